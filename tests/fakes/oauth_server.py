"""A local OAuth authorization server and a protected streamable-HTTP MCP server, on loopback.

Built with the SDK's server-side auth pieces: the authorization server is
``mcp.server.auth.routes.create_auth_routes`` over :class:`FakeProvider` (dynamic client
registration, PKCE, refresh with rotation, revocation, RFC 8707 ``resource``), plus a consent
page at ``/consent`` with an **Authorize** button. The resource server is the stub's low-level
``Server.streamable_http_app(auth=…, token_verifier=…)``: 401 with ``WWW-Authenticate:
Bearer … resource_metadata="…"`` without a valid token, protected resource metadata (RFC 9728)
at ``/.well-known/oauth-protected-resource/mcp``, and tokens accepted only for its own URL.

The two run on separate ports (two origins), as a hosted server and its sign-in service do.
Tests turn knobs on :class:`FakeProvider`: ``expire_access_tokens()`` (the resource server
then answers 401), ``revoke_refresh_tokens()``, ``metadata_patch`` (what the authorization
server's metadata claims), ``confidential`` (a registered client gets a secret and
``client_secret_basic``), and read what it issued (``issued_access``, ``issued_refresh``) and
what each token request carried (``token_forms``: the PKCE verifier, the resource).

    with serve_oauth_pair() as pair:
        pair.mcp_url, pair.issuer, pair.provider
"""

from __future__ import annotations

import html
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from app.pages import tcp_listener
from tests.helpers.timeouts import scaled
from tests.stub_server.http_server import _ThreadedUvicorn, build_mcp_server

__all__ = ["FakeProvider", "OAuthPair", "serve_oauth_pair"]

SCOPES = ["notes:read", "notes:write"]


class FakeProvider:
    """An in-memory ``OAuthAuthorizationServerProvider`` with knobs for tests."""

    def __init__(self, issuer: str, *, scopes: list[str] | None = None, access_ttl: int = 3600) -> None:
        self.issuer = issuer
        self.scopes = list(scopes or SCOPES)
        self.access_ttl = access_ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[OAuthClientInformationFull, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued_access: list[str] = []
        self.issued_refresh: list[str] = []
        self.refreshes = 0
        self.revocations = 0
        self.metadata_patch: dict[str, Any] = {}
        self.confidential = False
        self.token_forms: list[dict[str, str]] = []  # every POST /token's form, in order
        self.lock = threading.Lock()

    # -- knobs ------------------------------------------------------------------------
    def expire_access_tokens(self) -> None:
        with self.lock:
            for token in self.access.values():
                token.expires_at = int(time.time()) - 10

    def revoke_refresh_tokens(self) -> None:
        with self.lock:
            self.refresh.clear()

    # -- the provider protocol ----------------------------------------------------------
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if self.confidential:  # the answer to the registration is this object: it carries the secret
            client_info.client_secret = "cs-" + secrets.token_urlsafe(24)
            client_info.token_endpoint_auth_method = "client_secret_basic"
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        tx = secrets.token_urlsafe(16)
        self.pending[tx] = (client, params)
        return f"{self.issuer}/consent?tx={tx}"

    def approve(self, tx: str) -> str:
        """The user pressed Authorize: mint a code, return where the browser goes next."""
        client, params = self.pending.pop(tx)
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or self.scopes,
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="user-1",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        found = self.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        with self.lock:
            self.access[access] = AccessToken(
                token=access,
                client_id=client_id,
                scopes=scopes,
                expires_at=int(time.time()) + self.access_ttl,
                resource=resource,
                subject="user-1",
            )
            self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
            self.issued_access.append(access)
            self.issued_refresh.append(refresh)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.access_ttl,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(code.code, None)
        return self._issue(client.client_id, code.scopes, code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        with self.lock:
            if self.refresh.pop(refresh_token.token, None) is None:
                raise TokenError("invalid_grant", "refresh token revoked")
            self.refreshes += 1
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        with self.lock:
            self.revocations += 1
            self.access.pop(token.token, None)
            self.refresh.pop(token.token, None)

    async def exchange_identity_assertion(self, client: Any, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "not supported")


def _consent_page(provider: FakeProvider) -> list[Route]:
    async def show(request: Request) -> Response:
        tx = request.query_params.get("tx", "")
        if tx not in provider.pending:
            return HTMLResponse("<p>Unknown or used sign-in request.</p>", status_code=400)
        client, params = provider.pending[tx]
        scopes = ", ".join(params.scopes or provider.scopes)
        return HTMLResponse(
            "<!doctype html><title>Fake Notes sign-in</title>"
            f"<h1>Sign in to Fake Notes</h1><p>{html.escape(client.client_name or 'An app')} asks for: "
            f"<span id=scopes>{html.escape(scopes)}</span></p>"
            f'<form method=post action="/consent"><input type=hidden name=tx value="{html.escape(tx)}">'
            "<button type=submit>Authorize</button></form>"
        )

    async def approve(request: Request) -> Response:
        form = await request.form()
        tx = str(form.get("tx", ""))
        if tx not in provider.pending:
            return HTMLResponse("<p>Unknown or used sign-in request.</p>", status_code=400)
        return RedirectResponse(provider.approve(tx), status_code=302)

    async def metadata(request: Request) -> Response:
        doc = build_metadata(
            AnyHttpUrl(provider.issuer),
            None,
            ClientRegistrationOptions(enabled=True, valid_scopes=provider.scopes),
            RevocationOptions(enabled=True),
        ).model_dump(mode="json", exclude_none=True)
        doc.update(provider.metadata_patch)
        return JSONResponse(doc)

    async def revoke(request: Request) -> Response:
        # The SDK's RevocationHandler demands a client_secret field even from a public client
        # (token_endpoint_auth_method "none"); RFC 7009 does not, so this route stands in for it.
        form = await request.form()
        client = provider.clients.get(str(form.get("client_id", "")))
        token = str(form.get("token", ""))
        if client is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        found = provider.access.get(token) or provider.refresh.get(token)
        if found is not None and found.client_id == client.client_id:
            await provider.revoke_token(found)
        return Response(status_code=200, headers={"Cache-Control": "no-store"})

    return [
        Route("/revoke", revoke, methods=["POST"]),
        Route("/consent", show, methods=["GET"]),
        Route("/consent", approve, methods=["POST"]),
        Route("/.well-known/oauth-authorization-server", metadata, methods=["GET"]),
    ]


def build_auth_app(provider: FakeProvider) -> Any:
    routes = _consent_page(provider) + create_auth_routes(
        provider,
        AnyHttpUrl(provider.issuer),
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=provider.scopes),
        revocation_options=RevocationOptions(enabled=True),
    )
    app = Starlette(routes=routes)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        """``POST /token``'s form goes to ``provider.token_forms`` on its way to the handler."""
        if scope["type"] != "http" or scope["path"] != "/token" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body = b""

        async def tap() -> Any:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                provider.token_forms.append(dict(parse_qsl(body.decode())))
            return message

        return await app(scope, tap, send)

    return recording


def build_resource_app(provider: FakeProvider, mcp_url: str) -> Starlette:
    settings = AuthSettings(
        issuer_url=AnyHttpUrl(provider.issuer),
        resource_server_url=AnyHttpUrl(mcp_url),
        required_scopes=["notes:read"],
        validate_token_resource=True,
    )
    return build_mcp_server().streamable_http_app(auth=settings, token_verifier=ProviderTokenVerifier(provider))


@dataclass
class OAuthPair:
    mcp_url: str
    issuer: str
    provider: FakeProvider


def _bound() -> tuple[socket.socket, int]:
    sock = tcp_listener("127.0.0.1", 0, backlog=128, reuse_address=True)  # Nagle off, as serve's
    return sock, sock.getsockname()[1]


@contextmanager
def _serve(app: Any, sock: socket.socket, timeout: float = 10.0) -> Iterator[None]:
    server = _ThreadedUvicorn(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, access_log=False)
    )
    thread = threading.Thread(target=server.run_in_thread, args=(sock,), daemon=True)
    thread.start()
    try:
        if not server.ready.wait(timeout) or not server.started:
            raise RuntimeError("fake OAuth server did not start")
        yield
    finally:
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        sock.close()


@contextmanager
def serve_oauth_pair(*, access_ttl: int = 3600) -> Iterator[OAuthPair]:
    """An authorization server and the MCP server it protects, each on its own loopback port."""
    as_sock, as_port = _bound()
    rs_sock, rs_port = _bound()
    issuer = f"http://127.0.0.1:{as_port}"
    mcp_url = f"http://127.0.0.1:{rs_port}/mcp"
    provider = FakeProvider(issuer, access_ttl=access_ttl)
    with ExitStack() as stack:
        stack.enter_context(_serve(build_auth_app(provider), as_sock))
        stack.enter_context(_serve(build_resource_app(provider, mcp_url), rs_sock))
        yield OAuthPair(mcp_url, issuer, provider)


def remote_server_json(name: str, mcp_url: str) -> dict[str, Any]:
    """A catalog ``server.json`` listing ``mcp_url`` as the server's only (streamable-HTTP) remote."""
    return {
        "name": name,
        "description": "A remote MCP server that signs in with OAuth (mcp-setup tests).",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": mcp_url}],
    }


async def approve_over_http(url: str, *, callback_host: str | None = None) -> int:
    """What the user's browser does, without a browser: open the link, press Authorize, follow
    the redirect (to ``callback_host`` instead of the real one, if given). Returns the status
    the loopback listener answered."""
    import re

    import httpx

    async with httpx.AsyncClient(timeout=scaled(20)) as http:
        page = await http.get(url, follow_redirects=True)
        tx = re.search(r'name=tx value="([^"]+)"', page.text)
        assert tx, page.text
        sent = await http.post(str(page.url), data={"tx": tx.group(1)})
        location = httpx.URL(sent.headers["location"])
        headers = {"Host": callback_host} if callback_host else {}
        return (await http.get(location, headers=headers)).status_code
