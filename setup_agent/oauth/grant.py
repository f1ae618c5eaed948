"""A signed-in remote's grant and the auth that uses it.

:class:`Grant` holds the tokens and where they may go (the resource they are bound to per
RFC 8707, the authorization server, its token and revocation endpoints); it masks its tokens
in ``repr``. :class:`GrantAuth` signs requests with it: only requests to the resource's own
origin get the bearer token; it renews a token about to expire before use, and once after a
401; a refused renewal sets ``signed_out`` and raises :class:`~setup_agent.errors.NeedsSignIn`.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2
from mcp.shared.auth import OAuthToken
from pydantic import BaseModel, Field

from setup_agent.errors import NeedsSignIn, OAuthError, Unreachable

__all__ = ["GRANT_KEY", "Grant", "GrantAuth", "host_of", "origin", "token_auth"]

#: The env row (secret) an installed server's grant is stored under.
GRANT_KEY = "__oauth_grant"


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` with default ports spelled out, for same-origin checks."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def host_of(url: str) -> str:
    return urlsplit(url).netloc.lower()


class Grant(BaseModel):
    """What a sign-in yields: tokens and where they may go. Masked in ``repr``."""

    server_url: str
    resource: str  # RFC 8707: the tokens are bound to this resource
    issuer: str
    token_endpoint: str
    revocation_endpoint: str | None = None
    client_id: str
    client_secret: str | None = Field(default=None, repr=False)
    token_endpoint_auth_method: str | None = None
    scope: str | None = None
    access_token: str = Field(repr=False)
    refresh_token: str | None = Field(default=None, repr=False)
    expires_at: float | None = None

    def secret_values(self) -> list[str]:
        return [v for v in (self.access_token, self.refresh_token, self.client_secret) if v]

    def client_auth(self, data: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """Token-endpoint client authentication (RFC 6749 §2.3.1) for refresh and revocation."""
        return token_auth(self.client_id, self.client_secret, self.token_endpoint_auth_method, data)


def token_auth(
    client_id: str, client_secret: str | None, method: str | None, data: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """A token request's form and headers with the client's authentication (RFC 6749 §2.3.1)."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    data = {**data, "client_id": client_id}
    if client_secret and method == "client_secret_basic":
        pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif client_secret:
        data["client_secret"] = client_secret
    return data, headers


class GrantAuth(httpx2.Auth):
    """Bearer auth from a :class:`Grant`: same origin only, refresh before expiry and after a 401."""

    def __init__(
        self,
        grant: Grant,
        *,
        label: str,
        on_change: Callable[[Grant], Any] | None = None,
        clock: Callable[[], float] = time.time,
        skew: float = 30.0,
        timeout: float = 30.0,
    ) -> None:
        self.grant = grant
        self.label = label
        self.on_change = on_change
        self.clock = clock
        self.skew = skew
        self.timeout = timeout
        self.signed_out = asyncio.Event()
        self.signed_out_reason = ""
        self.refreshes = 0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"GrantAuth({self.label!r}, signed_out={self.signed_out.is_set()})"

    def _ours(self, url: httpx2.URL) -> bool:
        return origin(str(url)) == origin(self.grant.resource)

    def _expiring(self) -> bool:
        return self.grant.expires_at is not None and self.clock() >= self.grant.expires_at - self.skew

    async def async_auth_flow(self, request: httpx2.Request) -> Any:
        if not self._ours(request.url):
            yield request  # another host (a redirect, a stray URL) never gets the token
            return
        if self._expiring():
            async with self._lock:
                if self._expiring():
                    await self.refresh()
        sent = self.grant.access_token
        request.headers["Authorization"] = f"Bearer {sent}"
        response = yield request
        if response.status_code == 401:
            async with self._lock:
                if self.grant.access_token == sent:
                    await self.refresh()
            request.headers["Authorization"] = f"Bearer {self.grant.access_token}"
            yield request

    async def refresh(self) -> None:
        """Trade the refresh token for new tokens; a refused refresh signs the server out."""
        grant = self.grant
        if origin(grant.token_endpoint) != origin(grant.issuer):  # never send a token elsewhere
            self._sign_out("its token endpoint is not on its authorization server's host")
        if not grant.refresh_token:
            self._sign_out("its access token expired and it gave no refresh token")
        data, headers = grant.client_auth(
            {"grant_type": "refresh_token", "refresh_token": grant.refresh_token or "", "resource": grant.resource}
        )
        try:
            async with httpx2.AsyncClient(timeout=self.timeout) as http:
                response = await http.post(grant.token_endpoint, data=data, headers=headers)
        except httpx2.HTTPError as exc:
            raise Unreachable(
                f"Could not reach {host_of(grant.token_endpoint)} to renew the sign-in ({type(exc).__name__})."
            ) from None
        if response.status_code in (400, 401, 403):
            self._sign_out(f"{host_of(grant.token_endpoint)} refused to renew it (HTTP {response.status_code})")
        if response.status_code != 200:
            raise OAuthError(
                f"{host_of(grant.token_endpoint)} answered HTTP {response.status_code} when renewing the sign-in."
            )
        try:
            token = OAuthToken.model_validate_json(response.content)
        except ValueError:
            raise OAuthError(f"{host_of(grant.token_endpoint)} sent a token answer mcp-setup cannot read.") from None
        self.grant = grant.model_copy(
            update={
                "access_token": token.access_token,
                "refresh_token": token.refresh_token or grant.refresh_token,
                "scope": token.scope or grant.scope,
                "expires_at": self.clock() + token.expires_in if token.expires_in else None,
            }
        )
        self.refreshes += 1
        if self.on_change is not None:
            result = self.on_change(self.grant)
            if inspect.isawaitable(result):
                await result

    def _sign_out(self, why: str) -> None:
        self.signed_out_reason = (
            f"The sign-in to {self.label} no longer works: {why}. The user must sign in again: remove the "
            "server (mcp_setup_remove), call mcp_setup_authorize, then install it again with the new oauth_ref."
        )
        self.signed_out.set()
        raise NeedsSignIn(self.signed_out_reason)
