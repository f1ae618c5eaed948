"""A team's sign-in finished by the replica its redirect reaches.

The SDK's ``OAuthClientProvider`` keeps the PKCE verifier in a local variable of its
authorization-code step, so only the replica that started a sign-in could redeem the code: if it
died before the browser's redirect came back through the balancer, the sign-in was lost. For a
team (PostgreSQL and a public host) :class:`SharedProvider` replaces that step:

- it makes the PKCE pair and ``state`` itself and, before the browser is sent anywhere, has the
  sign-in's row opened with what the exchange needs (:func:`exchange_record`: the verifier, the
  token endpoint, the client's id, secret and auth method, the redirect URI, the resource, the
  scope, the issuer, the ref to fill and its key), encrypted with the data key;
- :func:`finish_exchange` runs on whichever replica receives ``/oauth/callback``: it claims the
  row once (a replayed redirect is refused), checks the ``iss`` of the response (RFC 9207) and that
  the token endpoint is on the issuer's origin, POSTs the code with the verifier and the resource
  (RFC 8707), builds the :class:`~setup_agent.oauth.grant.Grant`, fills the team's shared ref and
  marks the row done (or says why not);
- the starting replica, if still there, is woken with "done" and ends its flow
  (:class:`ExchangedElsewhere`) without a second exchange: the ref is filled already.

On SQLite (loopback listener) none of this is used: the SDK's own step runs as before.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, PKCEParameters
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.auth import OAuthToken

from setup_agent.errors import OAuthRefused, SetupError, Unreachable
from setup_agent.secrets import SecretRefStore

from .checks import check_endpoint
from .grant import Grant, host_of, token_auth

__all__ = ["ExchangedElsewhere", "SharedProvider", "exchange_record", "finish_exchange"]

logger = logging.getLogger(__name__)


class ExchangedElsewhere(BaseException):  # noqa: N818 - not an error: ends the SDK's flow without its logging
    """The sign-in was finished by the replica its redirect reached; the ref is filled."""


class SharedProvider(OAuthClientProvider):
    """The SDK's provider with its authorization-code step replaced (see the module)."""

    listener: Any = None
    ref: str = ""
    key: str = ""

    def bind(self, listener: Any, *, ref: str, key: str) -> None:
        """The :class:`~setup_agent.oauth.shared_callback.SharedCallback` opening the row, the ref to fill."""
        self.listener, self.ref, self.key = listener, ref, key

    async def _perform_authorization(self) -> httpx2.Request:
        ctx = self.context
        if not (
            ctx.client_info and ctx.redirect_handler and ctx.callback_handler and ctx.client_metadata.redirect_uris
        ):
            raise OAuthFlowError("The sign-in has no client, redirect or callback to work with.")
        meta = ctx.oauth_metadata
        if meta is not None and meta.authorization_endpoint:
            endpoint = str(meta.authorization_endpoint)
        else:
            endpoint = urljoin(ctx.get_authorization_base_url(ctx.server_url), "/authorize")
        pkce = PKCEParameters.generate()
        redirect_uri = str(ctx.client_metadata.redirect_uris[0])
        params = {
            "response_type": "code",
            "client_id": ctx.client_info.client_id,
            "redirect_uri": redirect_uri,
            "state": secrets.token_urlsafe(32),
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
        }
        send_resource = ctx.should_include_resource_param(ctx.protocol_version)
        if send_resource:
            params["resource"] = ctx.get_resource_url()  # RFC 8707
        scope = ctx.client_metadata.scope
        if scope:
            params["scope"] = scope
            if "offline_access" in scope.split():
                params["prompt"] = "consent"
        self.listener.hand_exchange(exchange_record(self, pkce.code_verifier, redirect_uri, send_resource))
        await ctx.redirect_handler(f"{endpoint}?{urlencode(params)}")  # opens the row (SharedCallback.expect)
        if await ctx.callback_handler() is not None:  # a code for this replica: never, the row has an exchange
            raise OAuthFlowError("The sign-in's answer came without its exchange.")
        raise ExchangedElsewhere


def exchange_record(
    provider: OAuthClientProvider, verifier: str, redirect_uri: str, send_resource: bool
) -> dict[str, Any]:
    """What the replica receiving the redirect needs to redeem the code (stored encrypted)."""
    ctx = provider.context
    client, meta = ctx.client_info, ctx.oauth_metadata
    assert client is not None
    url = str(ctx.server_url)
    revocation = str(meta.revocation_endpoint) if meta is not None and meta.revocation_endpoint else None
    return {
        "verifier": verifier,
        "token_endpoint": provider._get_token_endpoint(),
        "redirect_uri": redirect_uri,
        "client_id": client.client_id,
        "client_secret": client.client_secret,
        "token_endpoint_auth_method": client.token_endpoint_auth_method,
        "resource": ctx.get_resource_url(),
        "send_resource": send_resource,
        "scope": ctx.client_metadata.scope,
        "issuer": str(meta.issuer) if meta is not None else f"{urlsplit(url).scheme}://{host_of(url)}",
        "iss_expected": str(meta.issuer) if meta is not None else None,
        "iss_required": bool(meta is not None and meta.authorization_response_iss_parameter_supported),
        "revocation_endpoint": revocation,
        "server_url": url,
        "ref": getattr(provider, "ref", ""),
        "key": getattr(provider, "key", ""),
    }


def finish_exchange(
    backend: Any,
    refs: SecretRefStore,
    state: str,
    record: dict[str, Any],
    response: dict[str, Any],
    *,
    protect: Callable[[Grant], None],
    timeout: float,
    clock: Callable[[], float],
) -> tuple[int, str, str]:
    """Redeem the code of a claimed sign-in here (a worker thread); the callback page's
    ``(status, title, text)``. The row is finished either way, so the starting replica stops waiting."""
    if "error" in response:
        _finish(backend, state, {"error": response["error"]})
        refs.discard(record["ref"])
        return 200, "Sign-in declined", "You can close this tab."
    try:
        grant = _redeem(record, response, timeout=timeout, clock=clock)
        protect(grant)
        if refs.key_of(record["ref"]) != record["key"]:
            raise OAuthRefused("The sign-in's ref is bound to another server.")
        refs.fulfil(record["ref"], grant.model_dump_json())
    except SetupError as exc:
        logger.warning("a team's sign-in could not be finished here (%s)", exc.code)
        _finish(backend, state, {"failed": exc.message})
        try:
            refs.discard(record["ref"])
        except SetupError:
            pass  # it expires
        return 502, "Sign-in failed", f"{exc.message} Ask the assistant to start the sign-in again."
    _finish(backend, state, {"done": True})
    return 200, "Signed in", "mcp-setup received the sign-in. You can close this tab and go back."


def _finish(backend: Any, state: str, outcome: dict[str, Any]) -> None:
    try:
        backend.finish(state, outcome)
    except SetupError as exc:  # the waiting replica times out on its own
        logger.warning("a team's sign-in outcome could not be recorded (%s)", exc.code)


def _redeem(record: dict[str, Any], response: dict[str, Any], *, timeout: float, clock: Callable[[], float]) -> Grant:
    """The token request (RFC 6749 §4.1.3 with PKCE's verifier and RFC 8707's resource)."""
    iss, expected = response.get("iss"), record["iss_expected"]
    if (iss is not None and iss != expected) or (iss is None and record["iss_required"]):  # RFC 9207
        raise OAuthRefused("The sign-in response names another authorization server than the one signed in with.")
    endpoint, issuer = record["token_endpoint"], record["issuer"]
    check_endpoint("token endpoint", endpoint, issuer)
    data = {
        "grant_type": "authorization_code",
        "code": response["code"],
        "redirect_uri": record["redirect_uri"],
        "code_verifier": record["verifier"],
    }
    if record["send_resource"]:
        data["resource"] = record["resource"]
    data, headers = token_auth(record["client_id"], record["client_secret"], record["token_endpoint_auth_method"], data)
    try:
        with httpx2.Client(timeout=timeout) as http:
            answer = http.post(endpoint, data=data, headers=headers)
    except httpx2.HTTPError as exc:
        raise Unreachable(
            f"Could not reach {host_of(endpoint)} to finish the sign-in ({type(exc).__name__})."
        ) from None
    if answer.status_code not in (200, 201):
        raise OAuthRefused(f"{host_of(endpoint)} refused the sign-in's code (HTTP {answer.status_code}).")
    try:
        token = OAuthToken.model_validate_json(answer.content)
    except ValueError:
        raise OAuthRefused(f"{host_of(endpoint)} sent a token answer mcp-setup cannot read.") from None
    return Grant(
        server_url=record["server_url"],
        resource=record["resource"],
        issuer=issuer,
        token_endpoint=endpoint,
        revocation_endpoint=record["revocation_endpoint"],
        client_id=record["client_id"],
        client_secret=record["client_secret"],
        token_endpoint_auth_method=record["token_endpoint_auth_method"],
        scope=token.scope or record["scope"],
        access_token=token.access_token,
        refresh_token=token.refresh_token,
        expires_at=clock() + token.expires_in if token.expires_in else None,
    )
