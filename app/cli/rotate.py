"""``mcp-setup rotate NAME KEY``: test the server with a new value, then store it, through the
core's :func:`setup_agent.setup.rotate_secret` (the page card's "Replace" runs the same).

The value typed at the hidden prompt becomes a ref here and never leaves the core again; a
failed test leaves the old value in place.
"""

from __future__ import annotations

from typing import Any

from setup_agent.setup import rotate_secret
from setup_agent.store import InstalledServer

__all__ = ["rotate"]


async def rotate(runtime: Any, server: InstalledServer, key: str, value: str) -> str:
    ref = runtime.refs.mint(key, value)
    return (await rotate_secret(runtime.service, server.server_id, key, ref, actor="cli"))["message"]
