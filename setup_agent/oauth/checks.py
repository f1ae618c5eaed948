"""What a sign-in refuses before it sends anything, and how its failures read.

- :func:`check_endpoint`: a request to an authorization server's endpoint on another origin than
  its issuer, or to a plain-http issuer off this machine, is refused (codes, verifiers and tokens
  go only to the host the user is shown);
- :class:`CheckedTransport`: the sign-in's transport, which applies that check to the SDK's own
  requests (registration, token, revocation) *before* they are sent;
- :func:`translate`: any failure of a sign-in as one :class:`~setup_agent.errors.SetupError`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from setup_agent.errors import OAuthError, OAuthRefused, SetupError, Unreachable

from .grant import host_of, origin

__all__ = ["LOOPBACK", "CheckedTransport", "check_endpoint", "check_issuer", "translate"]

logger = logging.getLogger(__name__)

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_ENDPOINTS = ("registration_endpoint", "token_endpoint", "revocation_endpoint")


def check_issuer(issuer: str) -> None:
    scheme, host, _ = origin(issuer)
    if scheme != "https" and host not in LOOPBACK:
        raise OAuthRefused(
            f"The authorization server {host_of(issuer)} does not use https; mcp-setup refuses to sign in over plain http."
        )


def check_endpoint(what: str, endpoint: str, issuer: str) -> None:
    """``endpoint`` (the issuer's ``what``) must be on the issuer's origin, and that on https or loopback."""
    if origin(endpoint) != origin(issuer):
        raise OAuthRefused(
            f"The authorization server {host_of(issuer)} sends its {what} to another host ({host_of(endpoint)}); "
            "mcp-setup sends nothing there and signs in only with the host it shows the user."
        )
    check_issuer(issuer)


class CheckedTransport(httpx2.AsyncBaseTransport):
    """Once the authorization server's metadata is known, a request to one of its endpoints is
    checked (:func:`check_endpoint`) before it is sent (the registration POST used to reach a
    foreign host; the check at the browser step came after)."""

    def __init__(self, provider: Any) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._provider = provider

    async def handle_async_request(self, request: Any) -> Any:
        meta = self._provider.context.oauth_metadata
        if meta is not None:
            url = str(request.url).split("?")[0]
            named = {str(getattr(meta, n)).split("?")[0]: n for n in _ENDPOINTS if getattr(meta, n, None)}
            if url in named:
                check_endpoint(named[url].replace("_", " "), url, str(meta.issuer))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def translate(exc: BaseException) -> SetupError:
    if isinstance(exc, SetupError):
        return exc
    if isinstance(exc, (OAuthFlowError, OAuthTokenError, OAuthRegistrationError)):
        return OAuthRefused(f"The sign-in was stopped: {exc}")
    if isinstance(exc, httpx2.HTTPError):
        return Unreachable(f"Could not reach the server or its sign-in service ({type(exc).__name__}).")
    if isinstance(exc, asyncio.CancelledError):
        return OAuthError("The sign-in was cancelled.")
    logger.warning("sign-in failed unexpectedly: %s", type(exc).__name__)
    return OAuthError(f"The sign-in failed ({type(exc).__name__}).")
