"""``clients.list`` and ``clients.connect`` at ``/rpc``: the page's "Use it in your AI client"
part, through the same code as ``mcp-setup client list|connect`` (app/clients).

``clients.connect {client, apply, http?}``: without ``apply`` the diff (``client connect --dry-run``);
with it, the write (backup, idempotent); a file it cannot merge is left alone and the answer
carries the entry to paste. Only the person at this computer (the page's own token) may write
their clients' files: a team member's token is refused.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.clients import (
    CLIENTS,
    client_config,
    client_rows,
    connect_over_http,
    launcher_command,
    launcher_env,
    plan_connect,
    updated_words,
)
from setup_agent.errors import InvalidInput, SetupError

from .security import current_principal

__all__ = ["CLIENT_METHODS", "call_clients"]

CLIENT_METHODS = ("clients.list", "clients.connect")


def _list(runtime: Any) -> dict[str, Any]:
    rows = client_rows(Path.home(), launcher_command(), launcher_env(runtime.settings))
    tools = [
        {"name": t.name, "server": t.server.title or t.server.qualified_name}
        for t in runtime.store.servers.catalog().tools()
    ]
    return {"clients": rows, "tools": tools}


def _connect(runtime: Any, client: str, apply: bool, mcp_url: str | None = None) -> dict[str, Any]:
    """``mcp_url``: connect over HTTP to this serve's ``/mcp`` with a new client token of the
    client's own (never sent to the page: the change shows a placeholder where it goes)."""
    config = client_config(client, Path.home())
    out: dict[str, Any] = {"client": client, "path": str(config.path), "http": mcp_url is not None}
    if mcp_url is not None:
        plan, backup = connect_over_http(config, launcher_command(), mcp_url, runtime.store.tokens, apply=apply)
        if plan.edit is not None and apply:
            return _written(out, config.path, backup, f": it reaches {mcp_url} with a key of its own.")
    else:
        plan = plan_connect(config, launcher_command(), launcher_env(runtime.settings))
    if plan.edit is None:
        return {
            **out,
            "changed": False,
            "problem": plan.error,
            "paste_where": plan.paste_where,
            "snippet": plan.snippet,
        }
    if not plan.edit.changed:
        return {**out, "changed": False, "message": f"{config.path} is already up to date; nothing written."}
    if not apply:
        return {**out, "changed": True, "diff": plan.edit.diff()}
    return _written(out, config.path, plan.edit.write(), ".")


def _written(out: dict[str, Any], path: Path, backup: Path | None, how: str) -> dict[str, Any]:
    """The answer for a config file written: its backup, and what changed (``how``) in words."""
    return {
        **out,
        "changed": True,
        "written": True,
        "backup": str(backup) if backup else None,
        "message": updated_words(path, backup) + how + " Restart the client to see the tools.",
    }


async def call_clients(runtime: Any, method: str, params: dict[str, Any], *, mcp_url: str) -> dict[str, Any]:
    """``mcp_url``: this serve's ``/mcp``, for a client connected over HTTP (``http: true``)."""
    if method == "clients.list":
        return await asyncio.to_thread(_list, runtime)
    client, apply, http = params.get("client"), params.get("apply", False), params.get("http", False)
    if client not in CLIENTS or not isinstance(apply, bool) or not isinstance(http, bool):
        raise InvalidInput(f"client must be one of {', '.join(CLIENTS)}; apply and http true or false.")
    principal = current_principal()
    if principal is not None and principal.kind != "user":
        refused = SetupError(
            "Only the person at this computer connects its AI clients (the page opened with serve's link)."
        )
        refused.code = "tool_not_allowed"  # as a tool a token may not call
        raise refused
    return await asyncio.to_thread(_connect, runtime, client, apply, mcp_url if http else None)
