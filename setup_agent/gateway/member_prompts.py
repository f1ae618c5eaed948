"""Asking a member for their own value of a per-member key, out of band.

The first call a member (a named token, ``token:NAME``) makes to a server with per-member keys
opens a secret prompt in a broker of its own (:class:`MemberPrompts`): no user page, tab or
terminal sees it, so only that member is asked. The face's page (:meth:`MemberPrompts.serve_page`) makes the prompt's
one-time secret link (a capability that enters this one value, nothing else). When the calling
client takes URL-mode elicitation, the link goes to that member's own client and the call waits
(bounded) for the answer; otherwise the call's result is a tool error ``member_secret_required``
with the link, which can only enter a value. The answer goes from the page into this broker's
ref, and from there, encrypted, into the store as that member's value (``store.values.set_member_value``,
audited as ``token:NAME``); the ref is discarded at once. A prompt of a member whose token was
revoked meanwhile stores nothing. Where else a prompt is answered is the ``replicas`` given at
construction (:mod:`~setup_agent.gateway.member_elsewhere`): nowhere on SQLite; on a team's
database the prompts are in ``mcp_pending`` too, so the link can be answered on any replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from setup_agent.errors import SetupError
from setup_agent.secrets import PromptBroker, Redactor, SecretRefStore
from setup_agent.store import InstalledServer, Store

from .member_elsewhere import MemberPromptReplicas, OnlyHere
from .relay import Caller

__all__ = ["MEMBER_SECRET_REQUIRED", "MemberPrompts", "tool_error"]

logger = logging.getLogger(__name__)

MEMBER_SECRET_REQUIRED = "member_secret_required"


@dataclass(frozen=True)
class _Ask:
    server_id: str
    member: str
    key: str


class MemberPrompts:
    """Pending prompts for members' own values; answers stored as that member's (see module doc)."""

    def __init__(
        self,
        store: Store,
        redactor: Redactor,
        *,
        ttl_seconds: float = 900.0,
        wait_seconds: float = 300.0,
        is_active: Callable[[str], bool] | None = None,
        on_stored: Callable[[str, str], Any] | None = None,
        replicas: MemberPromptReplicas | None = None,
    ) -> None:
        """``on_stored(server_id, member)``: after a member's value was stored (the sessions learn
        it at once). ``replicas``: where else a prompt is answered (default: nowhere, one process)."""
        self.store = store
        self.refs = SecretRefStore(ttl_seconds=ttl_seconds)
        #: Where else a prompt is published and answered (see module doc).
        self.replicas: MemberPromptReplicas = OnlyHere() if replicas is None else replicas
        self.broker = PromptBroker(self.refs, elsewhere=self.replicas.broker_side)
        self.wait_seconds = wait_seconds
        self.is_active = is_active  # whether a member's token is still active (a revoked one stores nothing)
        self._page_urls: list[Callable[[str], str]] = []  # the faces that serve the one-time secret page
        self.on_stored = on_stored
        self._asks: dict[str, _Ask] = {}  # prompt id -> what it asks
        self._open: dict[_Ask, str] = {}  # what is asked -> its open prompt id
        self._refs: dict[str, str] = {}  # prompt id -> the ref its answer fills
        self._lock = asyncio.Lock()
        self.ttl_seconds = ttl_seconds
        self._kicked: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        redactor.add_source(lambda: ((f"[secret:{k}]", v) for k, v in self.refs.live_values()))
        self._unsubscribe: Callable[[], None] | None = None

    def serve_page(self, page_url: Callable[[str], str]) -> None:
        """A face serves the one-time secret page: ``page_url(prompt_id)`` is a prompt's link."""
        self._page_urls.append(page_url)

    def page_url(self, prompt_id: str) -> str | None:
        """The one-time secret link of a prompt, from the first face that serves the page; None without one."""
        return self._page_urls[0](prompt_id) if self._page_urls else None

    def holds(self, prompt_id: str) -> bool:
        """Whether ``prompt_id`` is one of these prompts (the secret page answers it here), also
        another replica's on a team's database."""
        if not isinstance(prompt_id, str):
            return False
        return prompt_id in self._asks or self.replicas.holds(prompt_id)

    def kick(self) -> None:
        """A shared row changed (NOTIFY, any thread): a waiting call looks at once."""
        loop, kicked = self._loop, self._kicked
        if loop is not None and kicked is not None and not loop.is_closed():
            loop.call_soon_threadsafe(kicked.set)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hear answers on ``loop`` (a page answers from any thread)."""
        if self._unsubscribe is None:
            self._unsubscribe = self.broker.subscribe(self._event, loop=loop)
            self._loop, self._kicked = loop, asyncio.Event()

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def ask(self, server: InstalledServer, member: str, key: str, caller: Caller | None) -> dict[str, Any] | None:
        """Ask ``member`` for their ``key`` of ``server``: None once it is stored (answered through
        the member's own client meanwhile), else the tool error the call answers."""
        label = server.title or server.qualified_name
        answered = self._open.get(_Ask(server.server_id, member, key))
        if answered is not None and not _is_open(self.broker, answered):  # answered a moment ago
            await self._settle(answered)
            return None  # the caller reads the store again
        prompt_id, url = self.open_for(server, member, key)
        if url is not None and caller is not None and caller.can("elicitation.url"):
            if await self._elicit(caller, url, prompt_id, label, key):
                return None
        message = f"{label} needs your own {key} before your first call: " + (
            "open the link to enter it (only your calls use it), then call again."
            if url
            else "this gateway has no page to enter it on; ask the team's admin."
        )
        return tool_error(message, MEMBER_SECRET_REQUIRED, key_name=key, url=url)

    def open_for(self, server: InstalledServer, member: str, key: str) -> tuple[str, str | None]:
        """The open prompt for ``member``'s ``key`` of ``server`` (one at a time; a new one when none
        is open), and a new secret link to it (None without a page). An answer stores or rotates."""
        self.attach(asyncio.get_running_loop())
        label = server.title or server.qualified_name
        ask = _Ask(server.server_id, member, key)
        prompt_id = self._open.get(ask)
        if prompt_id is None or not _is_open(self.broker, prompt_id):
            if prompt_id is not None:
                self._drop(prompt_id)
            pending = self.broker.open(
                key, f"{label} needs your own {key}. Only your calls use it; nobody else's ever do.", server=label
            )
            prompt_id = pending.prompt_id
            self._asks[prompt_id], self._open[ask], self._refs[prompt_id] = ask, prompt_id, pending.ref
            request = {  # the link may reach another replica: the prompt (no value) is shared
                "server_id": server.server_id,
                "member": member,
                "key_name": key,
                "server": label,
                "prompt": pending.prompt,
            }
            self.replicas.publish(prompt_id, request, ttl_seconds=self.ttl_seconds)
        return prompt_id, self.page_url(prompt_id)

    async def _elicit(self, caller: Caller, url: str, prompt_id: str, label: str, key: str) -> bool:
        """URL-mode elicitation to the member's own client; True once the value is stored."""
        params = {
            "mode": "url",
            "elicitationId": prompt_id,
            "url": url,
            "message": f"{label} needs your own {key}. Open the page to enter it; only your calls use it.",
        }
        try:
            result = await caller.request("elicitation/create", params)
        except Exception as exc:  # noqa: BLE001 - the client's error may quote the URL: its type only
            logger.info(
                "URL elicitation of a member's key failed (%s); the link goes in the result", type(exc).__name__
            )
            return False
        if getattr(result, "action", None) != "accept":
            return False
        if not await self._answered(prompt_id):
            return False
        await self._settle(prompt_id)
        return True

    async def _answered(self, prompt_id: str) -> bool:
        """Wait (bounded) for the answer: here, or stored by another replica (its shared row)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        while True:
            step = min(self.replicas.poll_seconds, deadline - loop.time())
            if step <= 0:
                return False
            waiter = asyncio.ensure_future(self.broker.wait(prompt_id, timeout=step))
            kicked = asyncio.ensure_future(self._kicked.wait()) if self._kicked is not None else None
            await asyncio.wait([f for f in (waiter, kicked) if f is not None], return_when=asyncio.FIRST_COMPLETED)
            if kicked is not None:
                kicked.cancel()
                self._kicked.clear()  # type: ignore[union-attr]
            if waiter.done():
                exc = waiter.exception()
                if exc is None:
                    return True
                if not isinstance(exc, TimeoutError):
                    return False  # cancelled, expired (or the other replica took it: looked at below)
            else:
                waiter.cancel()
            if await asyncio.to_thread(self.replicas.answered, prompt_id):
                with contextlib.suppress(SetupError):  # stored by the replica that got the answer
                    self.broker.cancel(prompt_id, "answered on another replica")
                self._drop(prompt_id)
                return True

    async def _event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "secret_done" and event.get("status") == "answered":
            await self._settle(str(event.get("prompt_id")))
        elif event.get("type") == "secret_done":
            self._drop(str(event.get("prompt_id")))

    async def _settle(self, prompt_id: str) -> None:
        """The answered prompt's value into the store as its member's, once; the ref discarded."""
        async with self._lock:
            ask, ref = self._asks.get(prompt_id), self._refs.get(prompt_id)
            if ask is None or ref is None:
                return
            try:  # dropped only once stored: a call meanwhile waits for this lock, never asks anew
                value = self.refs.resolve({ask.key: ref})[ask.key]
                if self.is_active is not None and not await asyncio.to_thread(self.is_active, ask.member):
                    logger.warning("a revoked member's answer was not stored")
                    return
                if not await asyncio.to_thread(
                    self.replicas.claim, prompt_id, ask.member
                ):  # another replica took an answer first (and stored it): one answer is stored, once
                    return
                await asyncio.to_thread(self.store.values.set_member_value, ask.server_id, ask.member, ask.key, value)
            except SetupError as exc:
                logger.warning("a member's value could not be stored (%s)", exc.code)
                return
            finally:
                self.refs.discard(ref)
                self._drop(prompt_id)
        logger.info("stored the own %s of token:%s for server %s", ask.key, ask.member, ask.server_id)
        if self.on_stored is not None:
            await self.on_stored(ask.server_id, ask.member)

    def _drop(self, prompt_id: str) -> None:
        ask = self._asks.pop(prompt_id, None)
        self._refs.pop(prompt_id, None)
        if ask is not None and self._open.get(ask) == prompt_id:
            del self._open[ask]
        if ask is not None:
            self.replicas.close(prompt_id)

    def forget_member(self, member: str) -> None:
        """A revoked member: their open prompts are cancelled."""
        for prompt_id, ask in list(self._asks.items()):
            if ask.member == member:
                with contextlib.suppress(SetupError):
                    self.broker.cancel(prompt_id, "the member's token was revoked")
                self._drop(prompt_id)


def tool_error(text: str, code: str, *, key_name: str | None = None, url: str | None = None) -> dict[str, Any]:
    """The call's result while a member is asked: a tool error with its code (``status: pending``) and,
    when there is a page, the secret link (it enters this one value; it approves nothing)."""
    error: dict[str, Any] = {"code": code, "message": text}
    if key_name is not None:
        error["key_name"] = key_name
    if url is not None:
        error["url"] = url
    return {
        "content": [{"type": "text", "text": text + (f" {url}" if url else "")}],
        "structuredContent": {"ok": False, "status": "pending", "error": error},
        "isError": True,
    }


def _is_open(broker: PromptBroker, prompt_id: str) -> bool:
    try:
        broker.get(prompt_id)
    except SetupError:
        return False
    return True
