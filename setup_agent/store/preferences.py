"""``mcp_preferences``: the person's settings of the whole gateway, by name (the tools budget they
chose on the page). A change bumps the change counter, so every gateway on this store reads it
again and tells its clients (their tool list may change), and is audited under who made it.
"""

from __future__ import annotations

from sqlalchemy import select

from .audit import AuditLog
from .engine import Database, translated
from .models import PreferenceRow
from .schema import TOOLS_BUDGET

__all__ = ["TOOLS_BUDGET", "Preferences"]


class Preferences:
    def __init__(self, database: Database, audit: AuditLog) -> None:
        self._db = database
        self._audit = audit

    def get(self, name: str) -> str | None:
        with translated("read a setting"), self._db.session() as s:
            return s.scalar(select(PreferenceRow.value).where(PreferenceRow.name == name))

    def set(self, name: str, value: str, *, actor: str) -> bool:
        """Store ``value`` for ``name``; False (and nothing written) when it already is."""
        with translated("save a setting"), self._db.session() as s, s.begin():
            row = s.get(PreferenceRow, name)
            if row is not None and row.value == value:
                return False
            if row is None:
                row = PreferenceRow(name=name, value=value, updated_at=self._db.clock(), updated_by=actor[:128])
                s.add(row)
            else:
                row.value, row.updated_at, row.updated_by = value, self._db.clock(), actor[:128]
            self._audit.append_event(s, "preference", actor=actor, detail=f"{name} = {value}"[:500])
            self._db.bump(s)
        self._db.changed()
        return True
