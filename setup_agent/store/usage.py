"""``mcp_tool_use``: when each installed tool was last called, by its gateway name, through any
gateway on this store. A context budget lists the most recent first (setup_agent/gateway/discover.py),
so what the person or their agents used in one session is listed in the next one too.

A gateway writes the uses it collected in one batch now and then, never one write per call
(:class:`~setup_agent.gateway.discover.RecentTools`); a later time never goes back to an earlier
one when two processes write. Only names and times: no arguments, no results. The rows beyond the
newest :data:`KEPT` are dropped with each batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import case, delete, select

from .engine import Database, translated
from .models import ToolUseRow

__all__ = ["KEPT", "ToolUse"]

#: The most tool names kept (far more than any budget lists).
KEPT = 1000


class ToolUse:
    """The store's record of the last use of each tool."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, uses: Mapping[str, datetime]) -> None:
        """Write ``uses`` (gateway name → when) in one transaction; a stored later time stays."""
        if not uses:
            return
        if self._db.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        newest = sorted(uses.items(), key=lambda kv: kv[1], reverse=True)[:KEPT]
        query = insert(ToolUseRow).values([{"name": name[:160], "used_at": at} for name, at in newest])
        query = query.on_conflict_do_update(
            index_elements=[ToolUseRow.name],
            set_={
                "used_at": case(
                    (query.excluded.used_at > ToolUseRow.used_at, query.excluded.used_at), else_=ToolUseRow.used_at
                )
            },
        )
        kept = select(ToolUseRow.name).order_by(ToolUseRow.used_at.desc()).limit(KEPT)
        with translated("record the tools used"), self._db.session() as s, s.begin():
            s.execute(query)
            s.execute(delete(ToolUseRow).where(ToolUseRow.name.not_in(kept.scalar_subquery())))

    def newest_first(self, limit: int = KEPT) -> list[tuple[str, datetime]]:
        """The tools used, the most recent first, each with when."""
        query = select(ToolUseRow.name, ToolUseRow.used_at).order_by(ToolUseRow.used_at.desc()).limit(limit)
        with translated("read the tools used"), self._db.session() as s:
            return [(name, at) for name, at in s.execute(query)]
