"""The audit: every change to an installed server, who made it, when, appended to a hash chain.

:class:`AuditLog` is the repository: the other repositories append a row inside their own
transaction (:meth:`AuditLog.append`); the faces read the rows, their counts and the chain's state.

The chain: each row carries the hash of the row before it.

``row_hash = sha256(canonical JSON of [prev_hash, id, at, event, server_id, qualified_name,
actor, old_hash, new_hash, detail])``; the first row's ``prev_hash`` is :data:`GENESIS`. A row
rewritten in place (``INSERT OR REPLACE``, an UPDATE with the triggers dropped), a row deleted
from the middle or rows inserted out of order break a link, and :func:`verify_chain` names the
first one. What a chain cannot show by itself is the *tail* cut off (the last rows deleted and
nothing after them): ``mcp-setup audit --verify`` prints the last row's hash, to compare with a
copy kept elsewhere. The append-only rules (SQLite triggers, PostgreSQL rules and a ``BEFORE
TRUNCATE`` trigger) refuse the changes in the first place; the chain shows one that went
around them (the file written directly, a trigger dropped).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from .engine import Database, translated
from .models import AuditEntry, AuditRow, ServerRow, _aware

__all__ = ["AUDIT_LOCK", "GENESIS", "AuditLog", "ChainReport", "row_digest", "verify_chain"]

#: The PostgreSQL advisory lock key under which a row is appended to the audit's chain.
AUDIT_LOCK = 0x6D63_7061_7564  # "mcpaud"

GENESIS = "0" * 64


def _at(value: datetime) -> str:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def row_digest(
    prev_hash: str,
    id: int,
    at: datetime,
    event: str,
    server_id: str | None,
    qualified_name: str | None,
    actor: str,
    old_hash: str | None,
    new_hash: str | None,
    detail: str | None,
) -> str:
    """The hash of one audit row, chained to ``prev_hash``."""
    canonical = json.dumps(
        [prev_hash, int(id), _at(at), event, server_id, qualified_name, actor, old_hash, new_hash, detail],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class ChainReport:
    """What :func:`verify_chain` found: the rows read, the broken links, the last hash."""

    rows: int = 0
    broken: list[dict[str, Any]] = field(default_factory=list)
    last_hash: str = GENESIS

    @property
    def ok(self) -> bool:
        return not self.broken

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "rows": self.rows,
            "broken_links": len(self.broken),
            "last_hash": self.last_hash,
        }
        if self.broken:
            out["first_broken"] = self.broken[0]
        return out


def verify_chain(rows: Iterable[Any]) -> ChainReport:
    """Check the chain over ``rows`` (oldest first; objects with the audit columns as attributes).

    A link is broken where a row's ``prev_hash`` is not its predecessor's ``row_hash`` (a row
    deleted or inserted), or its ``row_hash`` is not the hash of its own content (rewritten)."""
    report = ChainReport()
    expected = GENESIS
    for row in rows:
        report.rows += 1
        actual = row_digest(
            row.prev_hash or "",
            row.id,
            row.at,
            row.event,
            row.server_id,
            row.qualified_name,
            row.actor,
            row.old_hash,
            row.new_hash,
            row.detail,
        )
        if row.prev_hash != expected:
            report.broken.append(
                {"id": row.id, "reason": "does not follow the row before it (a row was removed or inserted)"}
            )
        elif row.row_hash != actual:
            report.broken.append(
                {"id": row.id, "reason": "its content does not match its hash (the row was rewritten)"}
            )
        expected = row.row_hash or actual
        report.last_hash = expected
    return report


class AuditLog:
    """The append-only audit over a :class:`~setup_agent.store.engine.Database`."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record_event(
        self, event: str, *, actor: str, qualified_name: str | None = None, detail: str | None = None
    ) -> None:
        """Append one row, in a transaction of its own, that concerns no installed server (yet): a
        consent answered."""
        with translated(f"audit {event}"), self._db.session() as s, s.begin():
            self._append(s, event, None, qualified_name, actor, detail=detail)

    def append(
        self,
        s: Session,
        event: str,
        row: ServerRow,
        actor: str,
        *,
        old: str | None = None,
        new: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Append one row about ``row``'s server in ``s``'s transaction (see :meth:`_append`)."""
        self._append(s, event, row.server_id, row.qualified_name, actor, old=old, new=new, detail=detail)

    def _append(
        self,
        s: Session,
        event: str,
        server_id: str | None,
        qualified_name: str | None,
        actor: str,
        *,
        old: str | None = None,
        new: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Append one row in ``s``'s transaction, chained to the last (its id and hash taken under
        a lock on PostgreSQL: two writers never chain to the same row; SQLite has one writer at a
        time)."""
        if s.get_bind().dialect.name == "postgresql":
            s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK})
        last = s.execute(select(AuditRow.id, AuditRow.row_hash).order_by(AuditRow.id.desc()).limit(1)).first()
        prev, next_id = (last.row_hash or GENESIS, last.id + 1) if last is not None else (GENESIS, 1)
        fields = {
            "id": next_id,
            "at": _aware(self._db.clock()),
            "event": event,
            "server_id": server_id,
            "qualified_name": qualified_name,
            "actor": (actor or "unknown")[:128],
            "old_hash": old,
            "new_hash": new,
            "detail": detail and detail[:512],
        }
        s.add(AuditRow(**fields, prev_hash=prev, row_hash=row_digest(prev, **fields)))
        s.flush()  # the next row of the same transaction chains to this one

    def verify(self) -> ChainReport:
        """Check the audit's hash chain from its first row (``mcp-setup audit --verify``)."""
        with translated("verify the audit"), self._db.session() as s:
            return verify_chain(s.scalars(select(AuditRow).order_by(AuditRow.id)))

    def chain(self) -> dict[str, Any]:
        """The chain's state for ``tool_registry_diagnostics``: rows, broken links, the last hash."""
        return self.verify().public()

    def entries(self, *, limit: int | None = None, server_id: str | None = None) -> list[AuditEntry]:
        """Audit rows, oldest first (the last ``limit`` when given)."""
        query = select(AuditRow).order_by(AuditRow.id.desc())
        if server_id is not None:
            query = query.where(AuditRow.server_id == server_id)
        if limit is not None:
            query = query.limit(max(int(limit), 0))
        with translated("read the audit"), self._db.session() as s:
            rows = list(s.scalars(query))
        return [
            AuditEntry(r.id, r.at, r.event, r.server_id, r.qualified_name, r.actor, r.old_hash, r.new_hash, r.detail)
            for r in reversed(rows)
        ]

    def counts(self) -> dict[str, int]:
        """Audit rows per event, and ``total`` (for ``tool_registry_diagnostics``)."""
        with translated("count the audit"), self._db.session() as s:
            pairs = s.execute(select(AuditRow.event, func.count()).group_by(AuditRow.event)).all()
        counts = {str(event): int(n) for event, n in pairs}
        counts["total"] = sum(counts.values())
        return counts
