"""``clients.list`` and ``clients.connect`` at ``/rpc``: the page's "Use it in your AI client"
part, through the same code as ``mcp-setup client list|connect`` (app/clients).

``clients.connect {client, apply}``: without ``apply`` the diff (``client connect --dry-run``);
with it, the write (backup, idempotent); a file it cannot merge is left alone and the answer
carries the entry to paste. Only the person at this computer (the page's own token) may write
their clients' files: a team member's token is refused.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.clients import CLIENTS, client_config, client_rows, launcher_command, launcher_env, plan_connect
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


def _connect(runtime: Any, client: str, apply: bool) -> dict[str, Any]:
    config = client_config(client, Path.home())
    plan = plan_connect(config, launcher_command(), launcher_env(runtime.settings))
    out: dict[str, Any] = {"client": client, "path": str(config.path)}
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
    backup = plan.edit.write()
    return {
        **out,
        "changed": True,
        "written": True,
        "backup": str(backup) if backup else None,
        "message": f"Updated {config.path}"
        + (f" (the old file is {backup})" if backup else "")
        + ". Restart the client to see the tools.",
    }


async def call_clients(runtime: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "clients.list":
        return await asyncio.to_thread(_list, runtime)
    client, apply = params.get("client"), params.get("apply", False)
    if client not in CLIENTS or not isinstance(apply, bool):
        raise InvalidInput(f"client must be one of {', '.join(CLIENTS)}; apply true or false.")
    principal = current_principal()
    if principal is not None and principal.kind != "user":
        refused = SetupError(
            "Only the person at this computer connects its AI clients (the page opened with serve's link)."
        )
        refused.code = "tool_not_allowed"  # as a tool a token may not call
        raise refused
    return await asyncio.to_thread(_connect, runtime, client, apply)
