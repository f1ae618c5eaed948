"""The loopback listener that catches an OAuth redirect (RFC 8252 §7.3) for one sign-in.

It listens on ``127.0.0.1:<ephemeral>`` for one authorization response at ``/oauth/callback``
and accepts it only when

- the request names this very listener in its ``Host`` header (a request for another port or
  name, e.g. through a rebinding DNS name, is refused),
- its ``state`` equals the one of the authorization request (compared in constant time).

Anything else is answered with an error page and the listener keeps waiting, so a forged
callback cannot end the user's sign-in. Codes never appear in logs; the page says nothing
about them.
"""

from __future__ import annotations

import asyncio
import html
import logging
import secrets
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult

from setup_agent.errors import OAuthDenied

__all__ = ["CALLBACK_PATH", "CallbackListener"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/oauth/callback"
_MAX_HEAD = 16_384


class CallbackListener:
    """One loopback HTTP listener for one authorization response."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self.refused = 0  # callbacks refused (tests read it)

    @property
    def redirect_uri(self) -> str:
        return f"http://{self.host}:{self.port}{CALLBACK_PATH}"

    async def start(self) -> CallbackListener:
        self._result = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._handle, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def expect(self, state: str) -> None:
        """The ``state`` of the authorization request just sent to the browser."""
        self._state = state

    async def wait(self, timeout: float) -> AuthorizationCodeResult:
        assert self._result is not None, "start() first"
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), timeout)
        except TimeoutError:
            raise OAuthDenied(
                f"The sign-in was not completed within {timeout:g} seconds. Call mcp_setup_authorize again "
                "when the user is ready.",
                details={"reason": "timeout"},
            ) from None

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self._result is not None and not self._result.done():
            self._result.cancel()

    # -- one request ------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            status, title, text = self._answer(head[:_MAX_HEAD].decode("latin-1"))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, UnicodeError):
            status, title, text = 400, "Bad request", "This is not a sign-in response."
        body = (
            "<!doctype html><meta charset=utf-8><title>mcp-setup sign-in</title>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
        ).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        head_out = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n"
            "Content-Security-Policy: default-src 'none'\r\nConnection: close\r\n\r\n"
        )
        try:
            writer.write(head_out.encode() + body)
            await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    def _answer(self, head: str) -> tuple[int, str, str]:
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return self._refuse(400, "This is not a sign-in response.")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("host") != f"{self.host}:{self.port}":
            return self._refuse(400, "This sign-in response was addressed to another host or port.")
        target = urlsplit(parts[1])
        if target.path != CALLBACK_PATH:
            return self._refuse(404, "Nothing here.")
        query = {k: v[0] for k, v in parse_qs(target.query).items()}
        state = query.get("state", "")
        if self._state is None or not secrets.compare_digest(state.encode(), self._state.encode()):
            logger.warning("refused an OAuth callback whose state does not match the sign-in in progress")
            return self._refuse(400, "This sign-in response does not belong to the sign-in in progress.")
        assert self._result is not None
        if self._result.done():
            return 400, "Already done", "This sign-in was already completed; you can close this tab."
        if "error" in query:
            self._result.set_exception(
                OAuthDenied(
                    f"The sign-in was declined ({query['error'][:100]}).", details={"error": query["error"][:100]}
                )
            )
            return 200, "Sign-in declined", "You can close this tab."
        code = query.get("code")
        if not code:
            return self._refuse(400, "The sign-in response carries no code.")
        self._result.set_result(AuthorizationCodeResult(code=code, state=state, iss=query.get("iss")))
        return 200, "Signed in", "mcp-setup received the sign-in. You can close this tab and go back."

    def _refuse(self, status: int, text: str) -> tuple[int, str, str]:
        self.refused += 1
        return status, "Refused", text
