"""Replace one stored secret of an installed server, tested first: the one code
path of ``mcp-setup rotate`` and the page card's "Replace".

The new value comes as a ref (a secret prompt's answer, or one the CLI minted from its hidden
prompt): the value is given to the redactor first (nothing the server prints can carry it),
the server is test-connected with its other stored settings (an MCPB bundle from its folder,
unpacked on this machine first when it has none, as a live start does), and only when it answers
is the stored value replaced; a failed test raises (redacted) and leaves the old value in place.

A replaced value never keeps running: the write bumps the change counter, and every process whose
gateway runs the server restarts it with the new value (setup_agent/gateway/connections.py compares
the settings' stamps); this process's own connection is restarted here at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from setup_agent.errors import InvalidInput, NotFound
from setup_agent.launch import LaunchSpec, Value

__all__ = ["rotate_secret"]


async def rotate_secret(service: Any, server_id: str, key: str, ref: str, *, actor: str = "user") -> dict[str, Any]:
    """``{server_id, key, tools, restarted, message}`` once the server answered with the new value
    (``actor``: who replaced it, as the audit names them)."""
    server = await asyncio.to_thread(service.store.servers.get, server_id)
    if server is None:
        raise NotFound("No installed server has that id.")
    if key not in {k.key for k in server.env_keys}:
        raise InvalidInput(f"{server.qualified_name} has no setting {key}.")
    value = service.refs.resolve({key: ref})[key]  # masked: the probe's launch reveals it
    service.redactor.register(value, f"[secret:{key}]")
    await service.connections.learn_stored_secrets()
    stored = await asyncio.to_thread(service.store.values.env_values, server_id)
    values: dict[str, Value] = {**stored, key: value}
    spec = LaunchSpec.model_validate(server.launch_spec)
    try:
        dirname = await service.connections.bundle_folder(server, spec)  # a bundle: unpacked here first if need be
        result = await service.prober.probe(spec, values, dirname=dirname)  # raises (redacted) when it fails
        secret = next((k.secret for k in server.env_keys if k.key == key), True)
        await asyncio.to_thread(service.store.values.replace_env_value, server_id, key, value, secret, actor=actor)
    finally:
        values.clear()
        service.refs.consume({key: ref})  # used once, kept or not
    running = service.connections.status(server_id).status != "stopped"
    if running:  # here: at once, with the new value (other processes: at their next sync)
        await service.connections.connect(server, wait=False)
    return {
        "server_id": server_id,
        "key": key,
        "tools": len(result.tools),
        "restarted": running,
        "message": f"{server.qualified_name} answered with {len(result.tools)} tools using the new {key}; it is "
        "stored, and wherever the server runs it is restarted with it.",
    }
