"""``mcp-setup rotate NAME KEY``: test the server with a new value, then store it.

The new value is given to the redactor first (nothing the server prints can carry it), the
server is test-connected in a scratch dir with its other stored settings, and only when it
answers is the stored value replaced; a failed test leaves the old value in place.
"""

from __future__ import annotations

import asyncio
from typing import Any

from setup_agent.launch import LaunchSpec
from setup_agent.store import InstalledServer

__all__ = ["rotate"]


async def rotate(runtime: Any, server: InstalledServer, key: str, value: str) -> str:
    runtime.redactor.register(value, f"[secret:{key}]")
    await runtime.connections.learn_stored_secrets()
    stored = await asyncio.to_thread(runtime.store.env_values, server.server_id)
    values = {k: v.reveal() for k, v in stored.items()}
    values[key] = value
    spec = LaunchSpec.model_validate(server.launch_spec)
    dirname = str(runtime.connections.bundle_dir(server.server_id)) if spec.needs_install_dir else None
    result = await runtime.prober.probe(spec, values, dirname=dirname)  # raises (redacted) when it fails
    secret = next((k.secret for k in server.env_keys if k.key == key), True)
    await asyncio.to_thread(runtime.store.set_env_value, server.server_id, key, value, secret)
    return (
        f"{server.qualified_name} answered with {len(result.tools)} tools using the new {key}; it is stored. "
        "Running mcp-setup faces use it from the server's next start."
    )
