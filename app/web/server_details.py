"""``servers.details {server_id}`` at ``/rpc``: what a server's card shows beyond the list
(#25 item 2): its settings (every name; the values of non-secret ones, redacted; a secret is
never read out) and its recent log (the redacted stderr file ``mcp-setup logs`` prints).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from setup_agent.errors import InvalidInput, NotFound
from setup_agent.gateway import read_log

__all__ = ["DETAIL_METHODS", "server_details"]

DETAIL_METHODS = ("servers.details",)
LOG_LINES = 40


def _details(runtime: Any, server_id: str) -> dict[str, Any]:
    server = runtime.store.get(server_id)
    if server is None:
        raise NotFound("No installed server has that id.")
    values = runtime.store.env_values(server_id)
    redact = runtime.redactor.redact
    settings = [
        {"key": k.key, "secret": k.secret, **({} if k.secret or k.key not in values else {"value": redact(values[k.key].reveal())})}
        for k in server.env_keys
    ]  # fmt: skip
    values.clear()
    logs = Path(runtime.settings.home).expanduser() / "logs"
    return {"server_id": server_id, "slug": server.slug, "settings": settings,
            "log": [redact(line) for line in read_log(logs, server_id, LOG_LINES)]}  # fmt: skip


async def server_details(runtime: Any, params: dict[str, Any]) -> dict[str, Any]:
    server_id = params.get("server_id")
    if not isinstance(server_id, str) or not server_id or set(params) - {"server_id"}:
        raise InvalidInput("servers.details takes one server_id.")
    return await asyncio.to_thread(_details, runtime, server_id)
