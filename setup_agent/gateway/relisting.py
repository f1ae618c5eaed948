"""An installed server's lists kept live: when it says its tools, prompts or resources
changed, its connection lists them again.

A 2025-era server sends ``notifications/tools/list_changed`` (and the prompts and resources
ones): the relay hands each to :meth:`Relisting.want` (relay.py), from the connection's reader,
which must not wait on a request of its own. A 2026-07-28 server sends them only on a
``subscriptions/listen`` stream, which :meth:`Relisting.serve` keeps open while the
connection is held (and, as the stream replays nothing, the lists are read once more when it
is acknowledged). Either way the lists are read again in one task, a burst of notifications
read once, and recorded by the connection (``relist``): a changed or new tool is held for the
user by the pins (setup_agent/store/pins.py), and the store's change counter tells every
gateway, whose clients then hear ``list_changed`` once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["KINDS", "Relisting"]

logger = logging.getLogger(__name__)

#: The lists a server may say changed.
KINDS = ("tools", "prompts", "resources")

Relist = Callable[[frozenset[str]], Awaitable[None]]


class Relisting:
    """The lists one connection was told changed, read again by :meth:`serve`."""

    def __init__(self, label: str) -> None:
        self.label = label  # the server's name, for the log
        self._wanted: set[str] = set()
        self._kick = asyncio.Event()

    def want(self, kind: str) -> None:
        """The server said ``kind`` (one of :data:`KINDS`) changed; returns at once."""
        if kind in KINDS:
            self._wanted.add(kind)
            self._kick.set()

    async def serve(self, client: Any, relist: Relist) -> None:
        """Until cancelled: ``await relist(kinds)`` after each change heard (and, on a
        2026-07-28 connection, listen for them)."""
        listening = asyncio.ensure_future(self._listen(client)) if _modern(client) else None
        try:
            while True:
                await self._kick.wait()
                self._kick.clear()
                kinds, self._wanted = frozenset(self._wanted), set()
                try:
                    await relist(kinds)
                except Exception as exc:  # noqa: BLE001 - the connection goes on; the next change tries again
                    logger.warning("listing the %s of %s again failed: %s", "/".join(sorted(kinds)), self.label, exc)
        finally:
            if listening is not None:
                listening.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await listening

    async def _listen(self, client: Any) -> None:
        """``subscriptions/listen`` for the lists the server declares changing (2026-07-28)."""
        from mcp.client.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        caps = getattr(client, "server_capabilities", None)
        declared = {kind: bool(getattr(getattr(caps, kind, None), "list_changed", False)) for kind in KINDS}
        if not any(declared.values()):
            return
        kinds = {ToolsListChanged: "tools", PromptsListChanged: "prompts", ResourcesListChanged: "resources"}
        try:
            async with client.listen(
                tools_list_changed=declared["tools"],
                prompts_list_changed=declared["prompts"],
                resources_list_changed=declared["resources"],
            ) as subscription:
                # No replay: a change between the first list and this acknowledgement would be
                # lost, so what the stream covers is read once more now.
                for kind, wanted in declared.items():
                    if wanted:
                        self.want(kind)
                async for event in subscription:
                    kind = kinds.get(type(event))
                    if kind is not None:
                        self.want(kind)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a server that takes no listen: its lists stay as listed
            logger.info("%s: no change stream (%s); its lists are read at each start", self.label, type(exc).__name__)


def _modern(client: Any) -> bool:
    """Whether ``client`` speaks 2026-07-28 (changes come on a listen stream, not as notifications)."""
    return str(getattr(client, "protocol_version", "") or "") >= "2026"
