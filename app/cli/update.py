"""``mcp-setup update NAME [--version V]``: the registry's newer version (or exactly V), swapped in
only if it answers, through the core's :func:`setup_agent.setup.update_server` (the page card's
"Update" runs the same; the steps and the crash guarantees are told there). The consent is asked
in this terminal. Exit 0 updated or already current, 1 the old version stays.
"""

from __future__ import annotations

from typing import Any

from setup_agent.errors import NotFound, SetupError
from setup_agent.setup import CallContext, update_offer, update_server
from setup_agent.store import InstalledServer

__all__ = ["update"]


async def update(runtime: Any, server: InstalledServer, version: str | None) -> tuple[int, str]:
    from .terminal import TerminalIO

    try:
        offer = await update_offer(runtime.service, server.server_id, version)
    except NotFound as exc:
        return 1, exc.message
    io = TerminalIO(runtime.broker, consents=runtime.consents)
    ctx = CallContext(  # it stays installed by whoever installed it; you asked for the update
        installed_by=server.installed_by, asked_by="cli", present_consent=io.present_consent
    )
    try:
        result = await update_server(runtime.service, offer, ctx)
    except SetupError as exc:
        return 1, exc.message
    return 0, result["message"]
