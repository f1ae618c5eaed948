"""The audit: every change to an installed server, who made it, when, appended to a keyed chain.

:class:`AuditLog` is the repository: the other repositories append a row inside their own
transaction (:meth:`AuditLog.append`); the faces read the rows, their counts and the chain's state.

The chain: each row carries the link of the row before it, ``prev_hash``, and its own,
``row_hash = HMAC-SHA256(chain key, canonical JSON of [prev_hash, id, at, event, server_id,
qualified_name, actor, old_hash, new_hash, detail])``; the first row's ``prev_hash`` is
:data:`GENESIS`. The chain key is random and kept in the database only encrypted under the data
key (``audit_key.py``), so someone who can write the database but lacks the data key cannot
recompute a link: a row rewritten in place (``INSERT OR REPLACE``, an UPDATE with the triggers
dropped), a row deleted from the middle or rows inserted out of order break a link, and
:func:`verify_chain` names the first one (its id, time and event).

Rows written before the chain had a key carry a plain SHA-256 of the same JSON
(:func:`row_digest`). The first write or verification after the upgrade seals them: it makes the
key and appends one keyed row, ``audit_keyed``, chained to the last of them, so rewriting any of
them and recomputing their plain hashes breaks the seal's link. From that row on every link is
keyed; ``mcp-setup audit --verify`` says from which row, and when the seal was made.

What a chain cannot show by itself is the *tail* cut off (the last rows deleted and nothing
after them), nor a database rolled back to look as if it was never sealed (the key's row
dropped, every keyed row rewritten with plain hashes: the next start seals again, later): ``mcp-setup
audit --verify`` prints the last row's hash and the sealed row, to compare with a copy kept
elsewhere. The append-only rules (SQLite triggers, PostgreSQL rules and a ``BEFORE TRUNCATE``
trigger) refuse the changes in the first place; the chain shows one that went around them (the
file written directly, a trigger dropped).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from setup_agent.errors import StoreError
from setup_agent.secrets import Vault

from .audit_key import ChainKey, new_chain_key, read_chain_key, reencrypt_chain_key, write_chain_key
from .engine import Database, translated
from .models import AuditEntry, AuditRow, ServerRow, _aware

__all__ = [
    "AUDIT_LOCK",
    "GENESIS",
    "SEALED",
    "AuditLog",
    "ChainReport",
    "LinkContent",
    "row_digest",
    "row_mac",
    "verify_chain",
]

#: The PostgreSQL advisory lock key under which a row is appended to the audit's chain.
AUDIT_LOCK = 0x6D63_7061_7564  # "mcpaud"

GENESIS = "0" * 64

#: The event of the row that seals the rows written before the chain had a key.
SEALED = "audit_keyed"

#: ``Session.info`` entry of a key made in that session's transaction (cached only once committed).
_SEALING = "mcp_setup_audit_key"


def _at(value: datetime) -> str:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


class LinkContent(NamedTuple):
    """What one audit row's link covers, in the chain's order: the link of the row before it
    (``prev_hash``) and the row's own columns."""

    prev_hash: str
    id: int
    at: datetime
    event: str
    server_id: str | None
    qualified_name: str | None
    actor: str
    old_hash: str | None
    new_hash: str | None
    detail: str | None

    @classmethod
    def of(cls, row: Any) -> LinkContent:
        """The content of ``row`` (an object with the audit columns as attributes); a row
        without a ``prev_hash`` yet is read as chained to the empty string."""
        return cls(
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

    def canonical(self) -> bytes:
        """The bytes a link is made of: the fields as compact JSON, the time in UTC to the microsecond."""
        return json.dumps(
            [
                self.prev_hash,
                int(self.id),
                _at(self.at),
                self.event,
                self.server_id,
                self.qualified_name,
                self.actor,
                self.old_hash,
                self.new_hash,
                self.detail,
            ],
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode("utf-8")


def row_digest(content: LinkContent) -> str:
    """The unkeyed hash of one audit row: the rows written before the chain had a key (and
    migration 0007, which chained the rows before it)."""
    return hashlib.sha256(content.canonical()).hexdigest()


def row_mac(key: ChainKey, content: LinkContent) -> str:
    """The keyed link of one audit row: HMAC-SHA256 under ``key``."""
    return key.mac(content.canonical())


@dataclass
class ChainReport:
    """What :func:`verify_chain` found: the rows read, the broken links, the last hash, and from
    which row (sealed when) the chain is keyed."""

    keyed_from: int
    sealed_at: datetime
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
            "keyed_from": self.keyed_from,
            "sealed_at": _at(self.sealed_at) + "Z",
        }
        if self.broken:
            out["first_broken"] = self.broken[0]
        return out


def verify_chain(rows: Iterable[Any], key: ChainKey) -> ChainReport:
    """Check the chain over ``rows`` (oldest first; objects with the audit columns as attributes).

    A row from ``key.keyed_from`` on is checked against its HMAC under ``key``, one before it
    against its plain hash. A link is broken where a row's ``prev_hash`` is not its
    predecessor's ``row_hash`` (a row deleted or inserted; at the sealed row: the unkeyed rows
    before it changed), or its ``row_hash`` is not the link of its own content (rewritten, or
    recomputed without the key). A chain sealed after earlier rows whose sealing row is gone,
    with nothing after it, was cut from the end: that row is named too."""
    report = ChainReport(keyed_from=key.keyed_from, sealed_at=key.sealed_at)
    expected = GENESIS
    last = 0
    for row in rows:
        report.rows += 1
        content = LinkContent.of(row)
        actual = row_mac(key, content) if row.id >= key.keyed_from else row_digest(content)
        reason = None
        if row.prev_hash != expected:
            reason = (
                "the rows before it, chained before the chain had a key, were changed, removed or inserted"
                if row.id == key.keyed_from
                else "it does not follow the row before it (a row was removed or inserted)"
            )
        elif row.row_hash != actual:
            reason = "its content does not match its link (the row was rewritten, or its link made without the key)"
        if reason is not None:
            report.broken.append({"id": row.id, "at": _at(row.at) + "Z", "event": row.event, "reason": reason})
        expected = row.row_hash or actual
        report.last_hash = expected
        last = row.id
    if key.keyed_from > 1 and last < key.keyed_from:  # the sealing row and all after it cut off
        report.broken.append(
            {
                "id": key.keyed_from,
                "at": _at(key.sealed_at) + "Z",
                "event": SEALED,
                "reason": "it is missing: the rows from it to the end were removed",
            }
        )
    return report


@dataclass(frozen=True)
class _Event:
    """What one appended row says, before the chain gives it an id, a time and its link."""

    event: str
    server_id: str | None
    qualified_name: str | None
    actor: str
    old: str | None = None
    new: str | None = None
    detail: str | None = None


class AuditLog:
    """The append-only audit over a :class:`~setup_agent.store.engine.Database`; its chain is
    keyed under a key that ``vault`` (the data key) encrypts."""

    def __init__(self, database: Database, vault: Vault) -> None:
        self._db = database
        self._vault = vault
        self._key: ChainKey | None = None  # once read from a committed row: it never changes

    def record_event(
        self, event: str, *, actor: str, qualified_name: str | None = None, detail: str | None = None
    ) -> None:
        """Append one row, in a transaction of its own, that concerns no installed server (yet): a
        consent answered."""
        with translated(f"audit {event}"), self._db.session() as s, s.begin():
            self._append(s, _Event(event, None, qualified_name, actor, detail=detail))

    def append_event(self, s: Session, event: str, *, actor: str, detail: str | None = None) -> None:
        """Append one row that concerns no server in ``s``'s transaction (a gateway-wide setting)."""
        self._append(s, _Event(event, None, None, actor, detail=detail))

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
        self._append(s, _Event(event, row.server_id, row.qualified_name, actor, old=old, new=new, detail=detail))

    def _append(self, s: Session, event: _Event) -> None:
        """Append one row in ``s``'s transaction, chained to the last (its id and hash taken under
        a lock on PostgreSQL: two writers never chain to the same row; SQLite has one writer at a
        time); the chain sealed first if it has no key yet."""
        _lock(s)
        self._add(s, self._key_in(s), event)

    def _add(self, s: Session, key: ChainKey, event: _Event) -> None:
        last = s.execute(select(AuditRow.id, AuditRow.row_hash).order_by(AuditRow.id.desc()).limit(1)).first()
        prev, next_id = (last.row_hash or GENESIS, last.id + 1) if last is not None else (GENESIS, 1)
        fields = {
            "id": next_id,
            "at": _aware(self._db.clock()),
            "event": event.event,
            "server_id": event.server_id,
            "qualified_name": event.qualified_name,
            "actor": (event.actor or "unknown")[:128],
            "old_hash": event.old,
            "new_hash": event.new,
            "detail": event.detail and event.detail[:512],
        }
        # Keyed even below the key's first row (rows cut from the end past it): verify names it.
        s.add(AuditRow(**fields, prev_hash=prev, row_hash=row_mac(key, LinkContent(prev, **fields))))
        s.flush()  # the next row of the same transaction chains to this one

    def _key_in(self, s: Session) -> ChainKey:
        """The chain's key: this process's copy, the database's (decrypted), or made now (the seal).

        Called under the audit's lock in ``s``'s transaction. A key made here is kept for the
        transaction only (``s.info``): if it rolls back, the next one seals again."""
        return self._known_key(s) or self._seal(s)

    def _known_key(self, s: Session) -> ChainKey | None:
        """The chain's key if it has one: this process's copy, this transaction's, or the database's."""
        if self._key is not None:
            return self._key
        made: ChainKey | None = s.info.get(_SEALING)
        if made is not None:
            return made
        found = read_chain_key(s, self._vault)
        if found is not None:
            self._key = found
        return found

    def _seal(self, s: Session) -> ChainKey:
        """Key the chain: a new key for the rows from the next one on, stored encrypted, and (when
        rows were written before it) one keyed row chained to the last of them."""
        last = s.scalar(select(func.max(AuditRow.id)))
        key = new_chain_key((last or 0) + 1, self._db.clock())
        write_chain_key(s, self._vault, key)
        s.info[_SEALING] = key
        if last is not None:
            sealed = f"from this row on each link is keyed; rows up to {last} were chained without a key"
            self._add(s, key, _Event(SEALED, None, None, "mcp-setup", detail=sealed))
        return key

    def ensure_key(self) -> ChainKey:
        """The chain's key, in a transaction of its own: the chain sealed first if it has none yet."""
        with translated("key the audit"), self._db.session() as s, s.begin():
            _lock(s)
            return self._key_in(s)

    def reencrypt_key(self, s: Session, new_vault: Vault) -> None:
        """In a rotation's transaction (``Values.rotate_key``, after :meth:`ensure_key`): the chain's
        key stored under ``new_vault``. The same key: every link stays valid. Without the audit's
        lock (the key's row is all it writes): the rotation locks the values' table first, which a
        writer holding that lock may be waiting for."""
        key = self._known_key(s)
        if key is None:
            raise StoreError("The audit's chain key went missing during the rotation; nothing was changed.")
        reencrypt_chain_key(s, key, new_vault)

    def use_vault(self, vault: Vault) -> None:
        """After a rotation committed: the chain's key is read with ``vault`` from now on."""
        self._vault = vault

    def verify(self) -> ChainReport:
        """Check the audit's chain from its first row (``mcp-setup audit --verify``); a chain
        without a key yet (rows from before the upgrade) is sealed first."""
        key = self.ensure_key()
        with translated("verify the audit"), self._db.session() as s:
            return verify_chain(s.scalars(select(AuditRow).order_by(AuditRow.id)), key)

    def chain(self) -> dict[str, Any]:
        """The chain's state for ``tool_registry_diagnostics``: rows, broken links, the last hash,
        from which row it is keyed (or why it cannot be checked)."""
        try:
            return self.verify().public()
        except StoreError as exc:
            return {"ok": False, "problem": exc.message}

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


def _lock(s: Session) -> None:
    """PostgreSQL: the audit's advisory lock for ``s``'s transaction (SQLite has one writer)."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK})
