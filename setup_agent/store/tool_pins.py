"""What each installed server offers and what the user approved of it: tools and prompts pinned,
resources and resource templates as listed at the last connect, and the tools the user unticked.

:class:`Pins` is the repository; the rules it applies live in :mod:`setup_agent.store.pins`
(name-keyed, :func:`~setup_agent.store.pins.reconcile`). Tools: the first list seen is the pin; a
list that differs from it beyond whitespace holds back what changed until the user decides
(``tools_state`` ``changed`` or ``rejected``). Prompts follow the same rules: a prompt whose listed
form (title, description, arguments) changed, or a new prompt, is held back (not listed nor
gettable) until the user approves the new list (``mcp-setup tools-review``); a removed one
disappears. What ``prompts/get`` answers depends on its arguments and is redacted, not pinned.

Tools live on ``mcp_servers``; prompts, resources and the unticked tools in ``mcp_server_extras``
(one row per server, removed with it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from setup_agent.errors import NotFound, ToolsChanged

from .audit import AuditLog
from .catalog import parse_tools
from .engine import Database, translated
from .models import ExtrasRow, InstalledServer, ServerRow, _aware, _record, _tools_json
from .pins import reconcile, summarize, tools_hash

__all__ = ["Pins", "ServerOffers", "parse_items"]


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


class Pins:
    """Pinned / live / exposed tool and prompt lists of installed servers, their resources, and
    the tools the user left out."""

    def __init__(self, database: Database, audit: AuditLog) -> None:
        self._db = database
        self._audit = audit

    def set_tools(self, server_id: str, tools: Sequence[Mapping[str, Any]]) -> bool:
        """Record the tools the server offers now and expose only their approved forms (pins.py).

        The first list ever recorded for a server without a pin becomes its pin. A list that
        differs from the pin beyond whitespace holds back what changed and waits for the user
        (``tools_state`` ``changed``); a list the user rejected stays ``rejected``. A new live
        list is audited once (``tools_changed``). True (and a change bump) when what is
        exposed or the state changed.
        """
        live_text = _tools_json(tools)
        digest = tools_hash(tools)
        with translated(f"update the tools of server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id, with_for_update=True)  # PostgreSQL: one writer per server
            if row is None:
                return False
            before = (row.tools_json, row.tools_state)
            if row.pinned_tools_json is None:  # installed before pinning and never listed: trust on first use
                row.pinned_tools_json, row.pinned_hash = live_text, digest
                row.pinned_at, row.pinned_version = _aware(self._db.clock()), row.version
                self._audit.append(s, "pinned", row, "mcp-setup", new=digest, detail="first list seen")
            verdict = reconcile(parse_tools(row.pinned_tools_json), parse_tools(live_text))
            previous = row.live_hash or row.pinned_hash
            if digest != previous:
                self._audit.append(
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
            self._db.bump(s)
        self._db.changed()
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
        with translated(f"update the tools of server {server_id}"), self._db.session() as s, s.begin():
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
                row.pinned_hash, row.pinned_at, row.pinned_version = live_hash, _aware(self._db.clock()), row.version
                row.tools_state, row.tools_diff, row.rejected_hash = "pinned", None, None
                self._audit.append(s, "tools_approved", row, actor, old=old, new=live_hash)
            else:
                row.tools_state, row.rejected_hash = "rejected", live_hash
                self._audit.append(s, "tools_rejected", row, actor, old=row.pinned_hash, new=live_hash)
            self._db.bump(s)
            result = _record(s.get_one(ServerRow, server_id, populate_existing=True))
        self._db.changed()
        return result

    # -- prompts, resources and the tools left out ------------------------------------
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
        with translated(f"update the prompts of server {server_id}"), self._db.session() as s, s.begin():
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
                self._audit.append(
                    s,
                    "prompts_changed",
                    server,
                    "server",
                    old=row.live_hash or row.pinned_hash,
                    new=digest,
                    detail=summarize(verdict.diff),
                )
            row.live_prompts_json, row.live_hash = live_text, digest
            row.prompts_json = _tools_json(verdict.exposed)
            row.prompts_state = "changed" if verdict.needs_approval else "pinned"
            row.resources_json, row.templates_json = _tools_json(resources), _tools_json(templates)
            row.updated_at = _aware(self._db.clock())
            if (row.prompts_json, row.prompts_state, row.resources_json, row.templates_json) == before:
                return False
            self._db.bump(s)
        self._db.changed()
        return True

    def set_hidden_tools(self, server_id: str, names: Sequence[str], *, actor: str) -> bool:
        """The tools the user unticked: held back like unapproved ones, whatever
        the server lists; audited (``tools_hidden``). True (and a change bump) when it changed."""
        with translated(f"update the tools of server {server_id}"), self._db.session() as s, s.begin():
            server = s.get(ServerRow, server_id)
            if server is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            if not self.write_hidden(s, server, names, actor):
                return False
            self._db.bump(s)
        self._db.changed()
        return True

    def write_hidden(self, s: Session, server: ServerRow, names: Sequence[str], actor: str) -> bool:
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
        self._audit.append(s, "tools_hidden", server, actor, detail=", ".join(sorted(set(names)))[:500] or "none")
        return True

    def hidden_of(self, s: Session, server_id: str) -> list[str]:
        row = s.get(ExtrasRow, server_id)
        return [n for n in json.loads(row.hidden_tools_json or "[]") if isinstance(n, str)] if row is not None else []

    def offers(self) -> dict[str, ServerOffers]:
        """Every server's recorded offers, by server id."""
        with translated("read the servers' prompts and resources"), self._db.session() as s:
            return {row.server_id: ServerOffers.of(row) for row in s.scalars(select(ExtrasRow))}

    def approve_prompts(self, server_id: str, live_hash: str, *, actor: str) -> ServerOffers:
        """The user approved the prompt list with ``live_hash``: it becomes the pin, exposed whole."""
        with translated(f"update the prompts of server {server_id}"), self._db.session() as s, s.begin():
            row, server = s.get(ExtrasRow, server_id, with_for_update=True), s.get(ServerRow, server_id)
            if row is None or server is None:
                raise NotFound(f"No installed server with prompts has the id {server_id}.")
            if row.live_hash != live_hash or row.live_prompts_json is None:
                raise ToolsChanged("The server's prompt list changed again since this was asked; nothing was decided.")
            old = row.pinned_hash
            row.pinned_prompts_json = row.prompts_json = row.live_prompts_json
            row.pinned_hash, row.prompts_state = live_hash, "pinned"
            self._audit.append(s, "prompts_approved", server, actor, old=old, new=live_hash)
            self._db.bump(s)
            result = ServerOffers.of(row)
        self._db.changed()
        return result
