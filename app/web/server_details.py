"""A server card's calls at ``/rpc``:

* ``servers.details {server_id}``: its settings (every name; the values of non-secret ones,
  redacted; a secret is never read out) and its recent log (the redacted file ``mcp-setup logs`` prints);
* ``servers.rotate {server_id, key}``: the secret box opens in this tab for the new value, the
  server is tested with it and it is stored only if the server answers (``rotate_secret``, the
  core call ``mcp-setup rotate`` makes). The person (or an admin token) only;
* ``servers.update_check`` / ``servers.update``: server_update.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from setup_agent.errors import InvalidInput, NotFound, SetupError
from setup_agent.gateway import read_log
from setup_agent.setup import rotate_secret

from .security import require_user
from .server_update import UPDATE_METHODS, server_update

__all__ = ["DETAIL_METHODS", "server_details"]

DETAIL_METHODS = ("servers.details", "servers.rotate", *UPDATE_METHODS)
LOG_LINES = 40


def _details(runtime: Any, server_id: str) -> dict[str, Any]:
    server = runtime.store.servers.get(server_id)
    if server is None:
        raise NotFound("No installed server has that id.")
    values = runtime.store.values.env_values(server_id)
    redact = runtime.redactor.redact
    settings = [
        {
            "key": k.key,
            "secret": k.secret,
            **({} if k.secret or k.key not in values else {"value": redact(values[k.key].reveal())}),
        }
        for k in server.env_keys
    ]
    values.clear()
    logs = Path(runtime.settings.home).expanduser() / "logs"
    return {
        "server_id": server_id,
        "slug": server.slug,
        "settings": settings,
        "log": [redact(line) for line in read_log(logs, server_id, LOG_LINES)],
    }


async def server_details(
    runtime: Any,
    method: str,
    params: dict[str, Any],
    present: Callable[[Any], Awaitable[Any]],
    hub: Any,
    audience: str | None,
) -> dict[str, Any]:
    if method in UPDATE_METHODS:
        return await server_update(runtime, method, params, hub, audience)
    server_id = params.get("server_id")
    if method == "servers.details":
        if not isinstance(server_id, str) or not server_id or set(params) - {"server_id"}:
            raise InvalidInput("servers.details takes one server_id.")
        return await asyncio.to_thread(_details, runtime, server_id)
    key = params.get("key")
    if not isinstance(server_id, str) or not isinstance(key, str) or set(params) - {"server_id", "key"}:
        raise InvalidInput("servers.rotate takes a server_id and a key.")
    require_user("replaces a stored key")
    server = await asyncio.to_thread(runtime.store.servers.get, server_id)
    if server is None or key not in {k.key for k in server.env_keys if k.secret}:
        raise InvalidInput("That server has no such secret setting.")
    label = server.title or server.qualified_name
    pending = runtime.broker.open(
        key,
        f"The new value of {key}. It is tested with {label} before it replaces the "
        "old one; if the test fails, the old value stays.",
        label,
    )
    await present(pending)
    try:
        ref = await runtime.broker.wait(pending.prompt_id, runtime.settings.secret_prompt_timeout_seconds)
    except TimeoutError:
        runtime.broker.cancel(pending.prompt_id, "not answered in time")
        raise SetupError(f"No new value of {key} was entered in time; the old one stays.") from None
    return await rotate_secret(runtime.service, server_id, key, ref, actor="ui")
