"""The redirect of a team's sign-in, received by whichever replica the balancer picks.

With a team's database and a public host (``MCP_SETUP_PUBLIC_HOST``), a sign-in's ``redirect_uri``
is ``<public base>/oauth/callback`` instead of a loopback listener of the replica that started it:

- :class:`SharedCallback` stands in for :class:`~setup_agent.oauth.callback.CallbackListener` in
  the replica running the sign-in: it opens the sign-in's row (its ``state``'s SHA-256, and the
  exchange :class:`~setup_agent.oauth.shared_exchange.SharedProvider` hands it, encrypted) and
  waits for the outcome, woken by the change feed's ``NOTIFY`` or, failing that, by a short poll;
- :func:`callback_answer` is what ``serve``'s ``GET /oauth/callback`` does on any replica: the
  first response for an open ``state`` claims its exchange, which this replica does
  (``exchange``: :func:`~setup_agent.oauth.shared_exchange.finish_exchange`); a row without one
  gets the response stored encrypted for the replica waiting. Single use: refused once answered,
  taken or expired; the browser gets the usual page.

The backend is the store's ``SharedSignIns``. Codes never appear in logs or pages.
"""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import parse_qs

from mcp.shared.auth import AuthorizationCodeResult

from setup_agent.errors import OAuthDenied, OAuthRefused, SetupError
from setup_agent.store import process_owner

from .callback import CALLBACK_PATH

__all__ = ["Exchange", "SharedCallback", "SignInBackend", "callback_answer", "callback_page"]

logger = logging.getLogger(__name__)

#: The longest wait between two looks at the table when no NOTIFY arrives.
POLL_SECONDS = 1.0


#: ``exchange(state, record, response) -> (status, title, text)``: redeem a claimed sign-in here.
Exchange = Callable[[str, dict[str, Any], dict[str, Any]], tuple[int, str, str]]


class SignInBackend(Protocol):
    def open(self, state: str, *, owner: str, ttl_seconds: float, exchange: dict[str, Any] | None = None) -> None: ...
    def answer(self, state: str, response: dict[str, Any]) -> bool: ...
    def claim(self, state: str) -> dict[str, Any] | None: ...
    def finish(self, state: str, outcome: dict[str, Any]) -> None: ...
    def take(self, state: str) -> dict[str, Any] | None: ...
    def close(self, state: str) -> None: ...


def callback_page(status: int, title: str, text: str) -> bytes:
    return (
        "<!doctype html><meta charset=utf-8><title>mcp-setup sign-in</title>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
    ).encode()


def callback_answer(
    backend: SignInBackend, query_string: str, *, exchange: Exchange | None = None
) -> tuple[int, str, str]:
    """``(status, title, text)`` for one ``GET /oauth/callback?…`` arriving at this replica."""
    query = {k: v[0] for k, v in parse_qs(query_string).items()}
    state = query.get("state", "")
    if not state:
        return 400, "Refused", "This is not a sign-in response."
    if "error" in query:
        response: dict[str, Any] = {"error": query["error"][:100]}
    elif query.get("code"):
        response = {"code": query["code"], "iss": query.get("iss")}
    else:
        return 400, "Refused", "The sign-in response carries no code."
    try:
        record = backend.claim(state) if exchange is not None else None
        accepted = record is not None or backend.answer(state, response)
    except SetupError as exc:
        logger.warning("an OAuth callback could not be recorded (%s)", exc.code)
        return 503, "Try again", "mcp-setup could not record the sign-in just now; reload this page."
    if not accepted:
        logger.warning("refused an OAuth callback that matches no sign-in in progress (unknown, used or expired)")
        return (
            400,
            "Refused",
            "This sign-in response does not belong to a sign-in in progress (it was used or has expired).",
        )
    if record is not None:
        return exchange(state, record, response)  # type: ignore[misc]
    if "error" in response:
        return 200, "Sign-in declined", "You can close this tab."
    return 200, "Signed in", "mcp-setup received the sign-in. You can close this tab and go back."


class SharedCallback:
    """The waiting side of a team's sign-in: same interface as ``CallbackListener``."""

    def __init__(self, backend: SignInBackend, *, base: str, ttl_seconds: float, owner: str | None = None) -> None:
        self.backend = backend
        self.redirect_uri = base.rstrip("/") + CALLBACK_PATH
        self.owner = owner or process_owner()  # the replica waiting (host and pid)
        self.ttl_seconds = ttl_seconds
        self.refused = 0
        #: What the replica receiving the redirect needs to redeem the code; stored with the row.
        self.exchange: dict[str, Any] | None = None
        self._state: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kicked: asyncio.Event | None = None

    def hand_exchange(self, exchange: dict[str, Any]) -> None:
        """What the replica receiving the redirect needs to redeem the code (stored with the row)."""
        self.exchange = exchange

    async def start(self) -> SharedCallback:
        self._loop = asyncio.get_running_loop()
        self._kicked = asyncio.Event()
        return self

    def expect(self, state: str) -> None:
        """Open the sign-in's row before the browser is sent to the authorization server."""
        self._state = state
        exchange, self.exchange = self.exchange, None  # the verifier is not kept here once stored
        self.backend.open(state, owner=self.owner, ttl_seconds=self.ttl_seconds, exchange=exchange)

    def leave(self) -> bool:
        """This replica stops waiting but leaves the row (and its exchange) to whichever replica
        the redirect reaches; False when no row was opened yet."""
        opened, self._state = self._state is not None, None
        return opened

    def kick(self) -> None:
        """An answer may have arrived (the change feed's thread, or this loop)."""
        if self._loop is not None and self._kicked is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._kicked.set)

    async def wait(self, timeout: float) -> AuthorizationCodeResult | None:
        """The code (a row without exchange), or None once the replica the redirect reached
        finished the sign-in; raises when it was declined or could not be finished."""
        assert self._loop is not None and self._kicked is not None and self._state is not None, (
            "start() and expect() first"
        )
        deadline = self._loop.time() + timeout
        while True:
            self._kicked.clear()
            try:
                answer = await asyncio.to_thread(self.backend.take, self._state)
            except SetupError as exc:  # the database is away for a moment: look again
                logger.warning("a sign-in's answer could not be read yet (%s)", exc.code)
                answer = None
            if answer is not None:
                break
            left = deadline - self._loop.time()
            if left <= 0:
                raise OAuthDenied(
                    f"The sign-in was not completed within {timeout:g} seconds. Call mcp_setup_authorize again "
                    "when the user is ready."
                )
            try:
                await asyncio.wait_for(self._kicked.wait(), min(POLL_SECONDS, left))
            except TimeoutError:
                pass
        if "error" in answer:
            raise OAuthDenied(f"The sign-in was declined ({answer['error']}).", details={"error": answer["error"]})
        if "failed" in answer:
            raise OAuthRefused(str(answer["failed"]))
        if answer.get("done"):
            return None
        return AuthorizationCodeResult(code=answer["code"], state=self._state, iss=answer.get("iss"))

    async def aclose(self) -> None:
        if self._state is not None:
            try:
                await asyncio.to_thread(self.backend.close, self._state)
            except SetupError as exc:  # it expires on its own
                logger.warning("a finished sign-in's row could not be removed (%s)", exc.code)
        self._loop = None
