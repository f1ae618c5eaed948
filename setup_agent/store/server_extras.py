"""What an installed server offers besides tools: its prompts, pinned like tools,
and its resources and resource templates as it listed them at its last connect (redacted);
and the tools the user unticked in the consent (:meth:`ServerExtras.set_hidden_tools`).

Prompts follow the tool rules of :mod:`setup_agent.store.pins` (name-keyed, the same
:func:`~setup_agent.store.pins.reconcile`): the first list seen is pinned; a prompt whose
listed form (title, description, arguments) changed beyond whitespace, or a new prompt, is held
back (not listed nor gettable) until the user approves the new list
(:meth:`ServerExtras.approve_prompts`, ``mcp-setup tools-review``); a removed one disappears.
What ``prompts/get`` answers depends on its arguments and is redacted, not pinned.

Table ``mcp_server_extras`` (migration ``0011_prompt_pins``), one row per server, removed with it.
A mixin of :class:`~setup_agent.store.database.Store`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from setup_agent.errors import NotFound, ToolsChanged

from .catalog import parse_tools
from .engine import translated
from .models import Base, ServerRow, UTCDateTime, _aware, _tools_json
from .pins import reconcile, summarize, tools_hash

__all__ = ["ExtrasRow", "ServerExtras", "ServerOffers", "parse_items"]


class ExtrasRow(Base):
    __tablename__ = "mcp_server_extras"

    server_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("mcp_servers.server_id", ondelete="CASCADE"), primary_key=True
    )
    prompts_json: Mapped[str | None] = mapped_column(Text)  # the exposed (approved) prompts
    pinned_prompts_json: Mapped[str | None] = mapped_column(Text)
    pinned_hash: Mapped[str | None] = mapped_column(String(64))
    live_prompts_json: Mapped[str | None] = mapped_column(Text)
    live_hash: Mapped[str | None] = mapped_column(String(64))
    prompts_state: Mapped[str | None] = mapped_column(String(16))  # pinned | changed
    resources_json: Mapped[str | None] = mapped_column(Text)
    templates_json: Mapped[str | None] = mapped_column(Text)
    hidden_tools_json: Mapped[str | None] = mapped_column(Text)  # tool names the user unticked
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


def parse_items(text: str | None, key: str) -> tuple[dict[str, Any], ...]:
    """The JSON list ``text`` as objects that carry a string ``key`` (``name``, ``uri``, …)."""
    if key == "name":
        return parse_tools(text)
    try:
        items = json.loads(text) if text else []
    except ValueError:
        return ()
    return tuple(i for i in items if isinstance(i, dict) and isinstance(i.get(key), str))


@dataclass(frozen=True)
class ServerOffers:
    """One server's prompts (the exposed, approved forms), resources and templates."""

    server_id: str
    prompts: tuple[dict[str, Any], ...] = ()
    live_prompts: tuple[dict[str, Any], ...] = ()
    live_hash: str | None = None
    prompts_state: str = "pinned"  # pinned | changed (held back until the user approves)
    resources: tuple[dict[str, Any], ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    pinned_prompts: tuple[dict[str, Any], ...] = ()
    hidden_tools: frozenset[str] = frozenset()  # unticked by the user: never listed nor callable

    @classmethod
    def of(cls, row: ExtrasRow) -> ServerOffers:
        return cls(
            row.server_id,
            parse_items(row.prompts_json, "name"),
            parse_items(row.live_prompts_json, "name"),
            row.live_hash,
            row.prompts_state or "pinned",
            parse_items(row.resources_json, "uri"),
            parse_items(row.templates_json, "uriTemplate"),
            parse_items(row.pinned_prompts_json, "name"),
            frozenset(n for n in json.loads(row.hidden_tools_json or "[]") if isinstance(n, str)),
        )


class ServerExtras:
    """The store's part: record, read and approve what servers offer besides tools."""

    def set_offers(
        self,
        server_id: str,
        *,
        prompts: Sequence[Mapping[str, Any]],
        resources: Sequence[Mapping[str, Any]],
        templates: Sequence[Mapping[str, Any]],
    ) -> bool:
        """Record what the server lists now (already redacted); True (and a change bump) when
        what is exposed changed. A changed prompt list is audited once (``prompts_changed``)."""
        live_text, digest = _tools_json(prompts), tools_hash(prompts)
        with translated(f"update the prompts of server {server_id}"), self._session() as s, s.begin():  # type: ignore[attr-defined]
            server = s.get(ServerRow, server_id)
            if server is None:
                return False
            row = s.get(ExtrasRow, server_id, with_for_update=True)
            if row is None:
                row = ExtrasRow(server_id=server_id)
                s.add(row)
            before = (row.prompts_json, row.prompts_state, row.resources_json, row.templates_json)
            if row.pinned_prompts_json is None:  # the first list seen is the pin
                row.pinned_prompts_json, row.pinned_hash = live_text, digest
            verdict = reconcile(parse_tools(row.pinned_prompts_json), parse_tools(live_text))
            if digest != (row.live_hash or row.pinned_hash):
                self._audit(
                    s,
                    "prompts_changed",
                    server,
                    "server",
                    old=row.live_hash or row.pinned_hash,
                    new=digest,  # type: ignore[attr-defined]
                    detail=summarize(verdict.diff),
                )
            row.live_prompts_json, row.live_hash = live_text, digest
            row.prompts_json = _tools_json(verdict.exposed)
            row.prompts_state = "changed" if verdict.needs_approval else "pinned"
            row.resources_json, row.templates_json = _tools_json(resources), _tools_json(templates)
            row.updated_at = _aware(self._clock())  # type: ignore[attr-defined]
            if (row.prompts_json, row.prompts_state, row.resources_json, row.templates_json) == before:
                return False
            self._bump(s)  # type: ignore[attr-defined]
        self._changed()  # type: ignore[attr-defined]
        return True

    def set_hidden_tools(self, server_id: str, names: Sequence[str], *, actor: str) -> bool:
        """The tools the user unticked: held back like unapproved ones, whatever
        the server lists; audited (``tools_hidden``). True (and a change bump) when it changed."""
        with translated(f"update the tools of server {server_id}"), self._session() as s, s.begin():  # type: ignore[attr-defined]
            server = s.get(ServerRow, server_id)
            if server is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            if not self._write_hidden(s, server, names, actor):
                return False
            self._bump(s)  # type: ignore[attr-defined]
        self._changed()  # type: ignore[attr-defined]
        return True

    def _write_hidden(self, s: Any, server: ServerRow, names: Sequence[str], actor: str) -> bool:
        """In the caller's transaction (an install's): the unticked tools, audited."""
        text = json.dumps(sorted(set(names)))
        row = s.get(ExtrasRow, server.server_id, with_for_update=True)
        if row is None:
            if not names:
                return False
            row = ExtrasRow(server_id=server.server_id)
            s.add(row)
        if (row.hidden_tools_json or "[]") == text:
            return False
        row.hidden_tools_json = text
        self._audit(s, "tools_hidden", server, actor, detail=", ".join(sorted(set(names)))[:500] or "none")  # type: ignore[attr-defined]
        return True

    def _hidden_of(self, s: Any, server_id: str) -> list[str]:
        row = s.get(ExtrasRow, server_id)
        return [n for n in json.loads(row.hidden_tools_json or "[]") if isinstance(n, str)] if row is not None else []

    def offers(self) -> dict[str, ServerOffers]:
        """Every server's recorded offers, by server id."""
        with translated("read the servers' prompts and resources"), self._session() as s:  # type: ignore[attr-defined]
            return {row.server_id: ServerOffers.of(row) for row in s.scalars(select(ExtrasRow))}

    def approve_prompts(self, server_id: str, live_hash: str, *, actor: str) -> ServerOffers:
        """The user approved the prompt list with ``live_hash``: it becomes the pin, exposed whole."""
        with translated(f"update the prompts of server {server_id}"), self._session() as s, s.begin():  # type: ignore[attr-defined]
            row, server = s.get(ExtrasRow, server_id, with_for_update=True), s.get(ServerRow, server_id)
            if row is None or server is None:
                raise NotFound(f"No installed server with prompts has the id {server_id}.")
            if row.live_hash != live_hash or row.live_prompts_json is None:
                raise ToolsChanged("The server's prompt list changed again since this was asked; nothing was decided.")
            old = row.pinned_hash
            row.pinned_prompts_json = row.prompts_json = row.live_prompts_json
            row.pinned_hash, row.prompts_state = live_hash, "pinned"
            self._audit(s, "prompts_approved", server, actor, old=old, new=live_hash)  # type: ignore[attr-defined]
            self._bump(s)  # type: ignore[attr-defined]
            result = ServerOffers.of(row)
        self._changed()  # type: ignore[attr-defined]
        return result
