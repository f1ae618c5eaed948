"""The audit's hash chain: each row carries the hash of the row before it.

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

__all__ = ["GENESIS", "ChainReport", "row_digest", "verify_chain"]

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
