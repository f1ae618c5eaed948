"""Consents, tool-list changes and secret prompts opened by another mcp-setup process (a stdio
face with no browser, another ``serve``), shown in this page's modals and answered here.

They live in the store (:class:`~setup_agent.store.PendingApprovals`); :class:`ForeignConsents`
looks once a second, announces each new one to every open tab (``consent_request`` or
``secret_request``, the same events as this process's own), tells the tabs when one is gone
(``consent_done`` / ``secret_done``), and hands a new tab the ones still waiting. The answer
(``POST /api/consents/{id}`` or ``/api/secrets/{id}``) is recorded in the store for the owner to
apply, as ``user:web`` (or an admin's ``token:NAME``); a secret value encrypted with the data key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import anyio.to_thread

from setup_agent.errors import SetupError
from setup_agent.store import process_owner

__all__ = ["ForeignConsents"]

log = logging.getLogger(__name__)


class ForeignConsents:
    def __init__(self, approvals: Any, hub: Any, *, interval: float = 1.0) -> None:
        self.approvals = approvals
        self.hub = hub
        self.interval = interval
        self.shown: dict[str, dict[str, Any]] = {}  # consent id -> its consent_request event
        self._me = process_owner()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick = asyncio.Event()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._kick = asyncio.Event()
        self._task = asyncio.create_task(self._watch(), name="mcp-setup-foreign-consents")
        self.hub.replays.append(lambda: list(self.shown.values()))

    def owns(self, consent_id: str) -> bool:
        """Whether ``consent_id`` is another process's: shown here, or waiting in the store (a replica
        of a team's gateway answers what another opened, before its next look)."""
        if consent_id in self.shown:
            return True
        try:
            item = self.approvals.get(consent_id)
        except SetupError as exc:
            log.warning("web: could not read an approval another process waits for (%s)", exc.code)
            return False
        return (
            item is not None
            and item.owner != self._me
            and item.status == "pending"
            and item.kind in ("consent", "secret")
        )

    async def _watch(self) -> None:
        from setup_agent.store import owner_alive

        while True:
            try:
                items = await anyio.to_thread.run_sync(self.approvals.pending)
            except SetupError as exc:
                log.warning("web: could not read the approvals other processes wait for (%s)", exc.code)
                items = None
            if items is not None:
                waiting = {
                    i.item_id: i
                    for i in items
                    if i.kind in ("consent", "secret") and i.owner != self._me and owner_alive(i.owner)
                }
                for item_id, item in waiting.items():
                    if item_id not in self.shown:
                        self.shown[item_id] = event = _shown(item)
                        if event["type"] == "secret_request":
                            self.hub.show_prompt(event)  # a few at a time per tab, as this process's own
                        else:
                            self.hub.emit(event)
                for item_id in [i for i in self.shown if i not in waiting]:
                    gone = self.shown.pop(item_id)
                    if gone["type"] == "secret_request":
                        self.hub.prompt_closed(
                            {
                                "type": "secret_done",
                                "prompt_id": item_id,
                                "key_name": gone.get("key_name"),
                                "status": "closed",
                            }
                        )
                    else:
                        self.hub.emit({"type": "consent_done", "consent_id": item_id, "status": "closed"})
            with contextlib.suppress(TimeoutError):  # a team's feed kicks at once; else the next look
                await asyncio.wait_for(self._kick.wait(), self.interval)
            self._kick.clear()

    def kick(self) -> None:
        """Look now (any thread): another replica published or answered an item (store/change_feed.py)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._kick.set)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


def _shown(item: Any) -> dict[str, Any]:
    """The event a tab opens its modal for: the same as for this process's own items."""
    if item.kind == "secret":
        request = item.request
        return {
            "type": "secret_request",
            "prompt_id": item.item_id,
            "key_name": request.get("key_name"),
            "prompt": request.get("prompt"),
            "server": request.get("server"),
        }
    return {"type": "consent_request", "consent_id": item.item_id, "consent": item.request}
