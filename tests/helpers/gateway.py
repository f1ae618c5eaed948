"""A stub catalog for the gateway, a gateway started until what a test needs is live, and a client
that hears its tool list change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import stub_catalog

STUB = "io.github.mcp-setup/stub"


async def start_until(gateway: Any, ready: Callable[[], bool], *, timeout: float = scaled(20)) -> None:
    """Start ``gateway`` and wait, bounded by ``timeout``, until ``ready()`` holds: woken by each
    reload of its catalog and each status change of its connections (a first connect records a
    server's tools, then the watcher reloads the catalog, then the live record follows)."""
    changed = anyio.Event()

    async def heard() -> None:
        changed.set()

    gateway.add_listener(heard)
    gateway.connections.add_status_listener(lambda _status: changed.set())
    await gateway.start()
    with anyio.fail_after(timeout):
        while not ready():
            await changed.wait()
            changed = anyio.Event()


def make_catalog(root: Path, expected: str) -> Path:
    return stub_catalog(root, expected, mode="echo_env")  # the stub echoes its env: the secret must come back redacted


class ListChanges:
    """Counts ``notifications/tools/list_changed`` (2025 era) as a client's message handler sees them."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification) or getattr(root, "method", None) == (
            "notifications/tools/list_changed"
        ):
            self.count += 1
            self.event.set()

    async def wait(self, timeout: float = scaled(10)) -> None:
        with anyio.fail_after(timeout):
            await self.event.wait()
        self.event = anyio.Event()

    async def until(self, check: Any, timeout: float = scaled(10)) -> None:
        """Wait (bounded) for notifications until ``await check()`` holds (one change may
        come as several notifications: the install, then the first connect's tool list)."""
        with anyio.fail_after(timeout):
            while not await check():
                await self.event.wait()
                self.event = anyio.Event()


async def tool_names(client: Any) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def lists_tool(client: Any, name: str, present: bool = True) -> bool:
    return (name in await tool_names(client)) is present
