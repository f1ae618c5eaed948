"""An installed server's lists kept live: when it says its tools, prompts or resources
changed, its connection lists them again.

A 2025-era server sends ``notifications/tools/list_changed`` (and the prompts and resources
ones): the relay hands each to :meth:`Relisting.want` (relay.py), from the connection's reader,
which must not wait on a request of its own. A 2026-07-28 server sends them only on a
``subscriptions/listen`` stream, which :meth:`Relisting.serve` keeps open while the
connection is held (and, as the stream replays nothing, the lists are read once more when it
is acknowledged). The same stream carries the updates of the resources a client subscribed to
at that server (:meth:`Relisting.follow`): ``resources/subscribe`` is gone in that era. Either way the lists are read again in one task, a burst of notifications
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

__all__ = ["KINDS", "Relisting", "modern"]

logger = logging.getLogger(__name__)

#: The lists a server may say changed.
KINDS = ("tools", "prompts", "resources")

Relist = Callable[[frozenset[str]], Awaitable[None]]


class Relisting:
    """The lists one connection was told changed, read again by :meth:`serve`; and, on a
    2026-07-28 connection, the resources it follows (:meth:`follow`) named on its stream."""

    def __init__(self, label: str) -> None:
        self.label = label  # the server's name, for the log
        self._wanted: set[str] = set()
        self._kick = asyncio.Event()
        self._uris: set[str] = set()  # the resources followed (2026-07-28)
        self._refollow = asyncio.Event()  # they changed: the stream is opened again with them
        self._following: frozenset[str] = frozenset()  # what the open stream was acknowledged for
        self._opened = asyncio.Event()  # set (and replaced) at each acknowledgement

    def want(self, kind: str) -> None:
        """The server said ``kind`` (one of :data:`KINDS`) changed; returns at once."""
        if kind in KINDS:
            self._wanted.add(kind)
            self._kick.set()

    async def follow(self, uri: str, on: bool, timeout: float = 10.0) -> bool:
        """Hear (``on``) or stop hearing the updates of ``uri`` (2026-07-28: a listen stream, opened
        again with the new set). True once the stream says so (bounded): one that names it is
        acknowledged, or the one that named it is closed."""
        (self._uris.add if on else self._uris.discard)(uri)
        self._refollow.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while (uri in self._following) != on:
                    await self._opened.wait()
        return (uri in self._following) == on

    async def serve(self, client: Any, relist: Relist) -> None:
        """Until cancelled: ``await relist(kinds)`` after each change heard (and, on a
        2026-07-28 connection, listen for them)."""
        listening = asyncio.ensure_future(self._listen(client)) if modern(client) else None
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
            self._following = frozenset()
            if listening is not None:
                listening.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await listening

    async def _listen(self, client: Any) -> None:
        """``subscriptions/listen`` for the lists the server declares changing and the resources
        followed (2026-07-28), opened again whenever those change."""
        caps = getattr(client, "server_capabilities", None)
        declared = {kind: bool(getattr(getattr(caps, kind, None), "list_changed", False)) for kind in KINDS}
        while True:
            self._refollow.clear()
            uris = sorted(self._uris)
            if not any(declared.values()) and not uris:
                await self._refollow.wait()
                continue
            try:
                async with client.listen(
                    tools_list_changed=declared["tools"],
                    prompts_list_changed=declared["prompts"],
                    resources_list_changed=declared["resources"],
                    resource_subscriptions=uris,
                ) as subscription:
                    self._now_following(subscription.honored.resource_subscriptions or ())
                    # No replay: a change between the first list and this acknowledgement would be
                    # lost, so what the stream covers is read once more now.
                    for kind, wanted in declared.items():
                        if wanted:
                            self.want(kind)
                    if not await self._until_refollow(subscription):
                        return  # the server ended the stream
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a server that takes no listen: its lists stay as listed
                logger.info(
                    "%s: no change stream (%s); its lists are read at each start", self.label, type(exc).__name__
                )
                return
            finally:
                self._now_following(())

    def _now_following(self, uris: Any) -> None:
        """The resources a stream was acknowledged for (none: it closed); :meth:`follow` waits on it."""
        self._following = frozenset(uris)
        self._opened.set()
        self._opened = asyncio.Event()

    async def _until_refollow(self, subscription: Any) -> bool:
        """Hand on the stream's events until the resources followed change (True) or the stream
        ends (False)."""
        reading = asyncio.ensure_future(self._read(subscription))
        refollow = asyncio.ensure_future(self._refollow.wait())
        try:
            done, _ = await asyncio.wait({reading, refollow}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reading, refollow):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if reading in done:
            reading.result()  # a stream that broke raises
            return False
        return True

    @staticmethod
    async def _read(subscription: Any) -> None:
        """Take the stream's events as they come: the SDK hands each frame to the connection's
        message handler too, where the relay acts on it (relay.py: a list change to
        :meth:`want`, a resource update to the faces), so here they are only taken off the
        stream (whose backlog would otherwise fill and end it)."""
        async for _event in subscription:
            pass


def modern(client: Any) -> bool:
    """Whether ``client`` speaks 2026-07-28 (changes come on a listen stream, not as notifications)."""
    return str(getattr(client, "protocol_version", "") or "") >= "2026"
