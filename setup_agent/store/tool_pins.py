"""The store's tool pins and audit: what each server offers, what the user approved, who did what;
the audit chained row to row (``audit_chain.py``).

A mixin of :class:`~setup_agent.store.database.Store` (it uses the store's session, translation and
change marker); the rules themselves live in :mod:`setup_agent.store.pins`.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from setup_agent.errors import NotFound, ToolsChanged

from .audit_chain import GENESIS, ChainReport, row_digest, verify_chain
from .catalog import parse_tools
from .engine import translated
from .models import AuditEntry, AuditRow, InstalledServer, ServerRow, _aware, _record, _tools_json
from .pins import reconcile, summarize
from .pins import tools_hash as _pin_hash

__all__ = ["AUDIT_LOCK", "ToolPins"]

#: The PostgreSQL advisory lock key under which a row is appended to the audit's chain.
AUDIT_LOCK = 0x6D63_7061_7564  # "mcpaud"


class ToolPins:
    """Pinned / live / exposed tool lists of installed servers, and the append-only audit."""

    def set_tools(self, server_id: str, tools: Sequence[Mapping[str, Any]]) -> bool:
        """Record the tools the server offers now and expose only their approved forms (pins.py).

        The first list ever recorded for a server without a pin becomes its pin. A list that
        differs from the pin beyond whitespace holds back what changed and waits for the user
        (``tools_state`` ``changed``); a list the user rejected stays ``rejected``. A new live
        list is audited once (``tools_changed``). True (and a change bump) when what is
        exposed or the state changed.
        """
        live_text = _tools_json(tools)
        digest = _pin_hash(tools)
        with translated(f"update the tools of server {server_id}"), self._session() as s, s.begin():
            row = s.get(ServerRow, server_id, with_for_update=True)  # PostgreSQL: one writer per server
            if row is None:
                return False
            before = (row.tools_json, row.tools_state)
            if row.pinned_tools_json is None:  # installed before pinning and never listed: trust on first use
                row.pinned_tools_json, row.pinned_hash = live_text, digest
                row.pinned_at, row.pinned_version = _aware(self._clock()), row.version
                self._audit(s, "pinned", row, "mcp-setup", new=digest, detail="first list seen")
            verdict = reconcile(parse_tools(row.pinned_tools_json), parse_tools(live_text))
            previous = row.live_hash or row.pinned_hash
            if digest != previous:
                self._audit(
                    s,
                    "tools_changed",
                    row,
                    "server",
                    old=previous,
                    new=digest,
                    detail=summarize(verdict.diff) + ("" if verdict.needs_approval else "; pinned forms kept"),
                )
            if not verdict.needs_approval:
                state = "pinned"
            else:
                state = "rejected" if row.rejected_hash == digest else "changed"
            row.live_tools_json, row.live_hash = live_text, digest
            row.tools_json = _tools_json(verdict.exposed)
            row.tools_state = state
            row.tools_diff = json.dumps(verdict.diff, sort_keys=True) if verdict.needs_approval else None
            if (row.tools_json, row.tools_state) == before:
                return False
            self._bump(s)
        self._changed()
        return True

    def approve_tools(self, server_id: str, live_hash: str, *, actor: str) -> InstalledServer:
        """The user approved the list with ``live_hash``: it becomes the pin and is exposed whole.

        Raises :class:`~setup_agent.errors.ToolsChanged` when the server offers another list by now.
        """
        return self._decide(server_id, live_hash, actor, approve=True)

    def reject_tools(self, server_id: str, live_hash: str, *, actor: str) -> InstalledServer:
        """The user rejected the list with ``live_hash``: the pin stays, nothing more is exposed."""
        return self._decide(server_id, live_hash, actor, approve=False)

    def _decide(self, server_id: str, live_hash: str, actor: str, *, approve: bool) -> InstalledServer:
        with translated(f"update the tools of server {server_id}"), self._session() as s, s.begin():
            row = s.get(ServerRow, server_id, with_for_update=True)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            if row.live_hash != live_hash or row.live_tools_json is None:
                raise ToolsChanged(
                    "The server's tool list changed again since this was asked; nothing was decided. "
                    "Review the new list."
                )
            if approve:
                old = row.pinned_hash
                row.pinned_tools_json = row.tools_json = row.live_tools_json
                row.pinned_hash, row.pinned_at, row.pinned_version = live_hash, _aware(self._clock()), row.version
                row.tools_state, row.tools_diff, row.rejected_hash = "pinned", None, None
                self._audit(s, "tools_approved", row, actor, old=old, new=live_hash)
            else:
                row.tools_state, row.rejected_hash = "rejected", live_hash
                self._audit(s, "tools_rejected", row, actor, old=row.pinned_hash, new=live_hash)
            self._bump(s)
            result = _record(s.get_one(ServerRow, server_id, populate_existing=True))
        self._changed()
        return result

    # -- audit ---------------------------------------------------------------------
    def _audit(
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
        """Append one row about ``row``'s server (see :meth:`_append_audit`)."""
        self._append_audit(s, event, row.server_id, row.qualified_name, actor, old=old, new=new, detail=detail)

    def _append_audit(
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
        """Append one row, chained to the last (its id and hash taken under a lock on PostgreSQL:
        two writers never chain to the same row; SQLite has one writer at a time)."""
        if s.get_bind().dialect.name == "postgresql":
            s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK})
        last = s.execute(select(AuditRow.id, AuditRow.row_hash).order_by(AuditRow.id.desc()).limit(1)).first()
        prev, next_id = (last.row_hash or GENESIS, last.id + 1) if last is not None else (GENESIS, 1)
        fields = {
            "id": next_id,
            "at": _aware(self._clock()),
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

    def record_event(
        self, event: str, *, actor: str, qualified_name: str | None = None, detail: str | None = None
    ) -> None:
        """Append one audit row that concerns no installed server (yet): a consent answered."""
        with translated(f"audit {event}"), self._session() as s, s.begin():
            self._append_audit(s, event, None, qualified_name, actor, detail=detail)

    def verify_audit(self) -> ChainReport:
        """Check the audit's hash chain from its first row (``mcp-setup audit --verify``)."""
        with translated("verify the audit"), self._session() as s:
            return verify_chain(s.scalars(select(AuditRow).order_by(AuditRow.id)))

    def audit_chain(self) -> dict[str, Any]:
        """The chain's state for ``tool_registry_diagnostics``: rows, broken links, the last hash."""
        return self.verify_audit().public()

    def audit(self, *, limit: int | None = None, server_id: str | None = None) -> builtins.list[AuditEntry]:
        """Audit rows, oldest first (the last ``limit`` when given)."""
        query = select(AuditRow).order_by(AuditRow.id.desc())
        if server_id is not None:
            query = query.where(AuditRow.server_id == server_id)
        if limit is not None:
            query = query.limit(max(int(limit), 0))
        with translated("read the audit"), self._session() as s:
            rows = builtins.list(s.scalars(query))
        return [
            AuditEntry(r.id, r.at, r.event, r.server_id, r.qualified_name, r.actor, r.old_hash, r.new_hash, r.detail)
            for r in reversed(rows)
        ]

    def audit_counts(self) -> dict[str, int]:
        """Audit rows per event, and ``total`` (for ``tool_registry_diagnostics``)."""
        from sqlalchemy import func

        with translated("count the audit"), self._session() as s:
            pairs = s.execute(select(AuditRow.event, func.count()).group_by(AuditRow.event)).all()
        counts = {str(event): int(n) for event, n in pairs}
        counts["total"] = sum(counts.values())
        return counts
