"""The guard of the web face: Host, Origin and token checks, and the security headers.

Every request, in this order (see :class:`Guard`):

1. ``Host`` must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (DNS rebinding), or the team's
   public host name (``MCP_SETUP_PUBLIC_HOST``, with or without ``:PORT``) or the address
   ``serve --host`` bound — else 421, or a refused websocket handshake (403).
2. ``Origin``, when sent, must be ``http://127.0.0.1:PORT`` or ``http://localhost:PORT``; it is
   required on ``/ws`` and on every state-changing request authenticated by the cookie — else 403.
3. The per-process token (``secrets.token_urlsafe(32)``, new on every start) — else 403. It is
   accepted from the header ``X-MCP-Setup-Token`` (programmatic clients), from the cookie
   ``mcp_setup_<PORT>`` (HttpOnly, SameSite=Strict, Path=/; the port is in the name because
   cookies are not port-scoped), or from the query ``t`` on ``GET /`` only: that first page
   load sets the cookie, and the page's script drops ``?t=`` from the address bar. The page's
   script never sees the token: fetch and websocket carry the cookie.
   A team's named bearer token (``Authorization: Bearer mcps_…``, see
   :mod:`setup_agent.store.tokens`) is accepted like the header token; it is looked up in the
   database on every request (one indexed query, off the event loop), so a revoked token is
   refused at once by every instance. The per-process token is the person's page credential:
   it is accepted as ``Authorization: Bearer`` too (the person's own scripts), but never on
   ``/mcp``: an AI client gets a client token of its own (``mcp-setup client connect CLIENT
   --http``), so no client holds the credential that approves.
   On ``/mcp`` a missing or wrong token is 401 with ``WWW-Authenticate: Bearer`` (what MCP
   clients expect), not 403; a foreign Origin stays 403.
4. The principal (:class:`~setup_agent.principals.Principal`, :func:`current_principal`) is
   decided by the credential alone: this run's token is **the user** (``user:web``); a named
   token is **a member** (``token:NAME``) or, made for one of the person's AI clients, **a
   client** (``client:http:NAME``). The user's own places — the page ``/``, the websocket
   ``/ws`` and the answers ``/api/consents/…`` (consents and tool reviews) — are the user's only: a
   member's bearer gets 403 there (no cookie, no consent event), unless the token was made with
   ``--admin``. An admin's page session is a cookie of its own, bound to that token and checked
   against the database on every request: revoking the token ends it.

Every response carries a CSP (no inline script or style, no foreign origin), ``no-store``,
``no-referrer``, ``nosniff``, ``X-Frame-Options: DENY``. ``/secrets/…`` (the one-time secret
page of :mod:`app.pages.secret`) is handed to that app, which runs its own guard.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

import anyio.to_thread
from starlette.datastructures import MutableHeaders
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.pages import SECURITY_HEADERS as SECRET_PAGE_HEADERS
from app.pages import token_ok
from setup_agent.errors import SetupError, StoreError
from setup_agent.principals import SCOPE_KEY, Principal

__all__ = [
    "Guard",
    "PRINCIPAL_SCOPE_KEY",
    "TOKEN_HEADER",
    "USER",
    "cookie_name",
    "csp",
    "current_principal",
    "require_user",
    "security_headers",
    "user_only",
]

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-mcp-setup-token"

#: Who the current request authenticated as (see check 4 of the module docstring).
_PRINCIPAL: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("mcp_setup_principal", default=None)

#: Looks a bearer token up: the member it names, or None (unknown or revoked). Blocking: runs in a thread.
BearerCheck = Callable[[str], "Principal | None"]
USER = Principal.user("web")
PRINCIPAL_SCOPE_KEY = SCOPE_KEY
#: Places only the user (or an ``--admin`` token) may reach: the websocket (consent and tool-review
#: events) and the consent answers. (A member may enter a secret: ``/api/secrets``.)
_USER_ONLY_PREFIXES = ("/ws", "/api/consents/", "/api/relayed/")
#: Why ``/mcp`` refused the page link's key, in the person's words.
LINK_KEY_ON_MCP = (
    "this is the key of your mcp-setup page link, which only opens your page; an AI client gets a key of "
    "its own: run `mcp-setup client connect CLIENT --http` (or `mcp-setup token create NAME --client`)"
)


def current_principal() -> Principal | None:
    """The principal of the current request (None outside one)."""
    return _PRINCIPAL.get()


def require_user(what: str) -> None:
    """Refuse (``tool_not_allowed``) a request whose principal may not approve: ``what`` is the
    action in words ("updates a server"). The person at this computer or an admin token may."""
    principal = current_principal()
    if principal is not None and not principal.may_approve:
        refused = SetupError(f"Only the person at this computer (or an admin token) {what}.")
        refused.code = "tool_not_allowed"
        raise refused


def user_only(path: str) -> bool:
    """The page, its websocket and its answers: the user's own channels."""
    return path == "/" or any(path == p.rstrip("/") or path.startswith(p) for p in _USER_ONLY_PREFIXES)


_REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcp-setup: open the link from the terminal</title></head>
<body><main><h1>Open the link printed by mcp-setup</h1>
<p>This page only opens with the full link that <code>mcp-setup serve</code> printed in its terminal
(it ends with <code>?t=</code> and a long key). Copy that whole link into the address bar.</p></main></body></html>
"""


def cookie_name(port: int) -> str:
    return f"mcp_setup_{port}"


def csp(port: int) -> str:
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        f"connect-src 'self' ws://127.0.0.1:{port} ws://localhost:{port}; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


def security_headers(port: int) -> dict[str, str]:
    """The secret page's headers, with the app's own CSP (scripts and the websocket allowed)."""
    return {**SECRET_PAGE_HEADERS, "Content-Security-Policy": csp(port)}


class Guard:
    """ASGI middleware: Host, Origin and token checks; security headers on every response."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        port: int,
        secret_app: ASGIApp | None = None,
        public_hosts: Iterable[str] = (),
        bearer: BearerCheck | None = None,
        health: Any = None,
        oauth_callback: Any = None,
        face: Any = None,
    ) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.secret_app = secret_app
        self.bearer = bearer
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        for name in public_hosts:
            name = name.strip().lower()
            if name:
                self.hosts |= {name, f"{name}:{port}"}
        self.origins = {f"{scheme}://{h}" for h in self.hosts for scheme in ("http", "https")}
        self.cookie = cookie_name(port)
        self.headers = security_headers(port)
        self.health = health  # the /healthz, /readyz app (replicas.py)
        self.oauth_callback = oauth_callback  # a team's /oauth/callback (replicas.py)
        self.face = face
        #: Page sessions of ``--admin`` tokens: cookie value -> the raw token (re-checked per request).
        self.admin_sessions: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if kind == "http" and self.health is not None and path in ("/healthz", "/readyz"):
            await self.health(scope, receive, send)  # a load balancer's probe: no credential, nothing in it
            return
        if kind == "http" and self.oauth_callback is not None and path == "/oauth/callback":
            await self.oauth_callback(scope, receive, send)  # a sign-in's redirect: its state is the credential
            return
        if kind == "http" and self.secret_app is not None and path.startswith("/secrets/"):
            await self.secret_app(scope, receive, self._replica_named(send))  # its own Host/Origin/token guard
            return
        headers = _headers(scope)
        principal: Principal | None = USER
        bearer = _bearer(headers.get("authorization"))
        admin_token = None if bearer else self.admin_sessions.get(_cookie(headers.get("cookie"), self.cookie) or "")
        if admin_token is not None:  # an admin's page session: its cookie stands for its token
            bearer = admin_token
            refusal = self._check_admin_session(kind, scope, headers)
        elif bearer is not None and token_ok(bearer, self.token):  # this run's token as a bearer (the person's)
            bearer = None
            refusal = self._check_place(scope, headers)
        elif bearer is not None and self.bearer is None:
            refusal = self._check_place(scope, headers) or (403, "unknown or revoked token")
        elif bearer is not None:
            refusal = self._check_place(scope, headers)
        else:
            refusal = self._check(kind, scope, headers)
        if refusal is None and bearer and self.bearer is not None:  # a named token: it alone decides
            try:
                principal = await anyio.to_thread.run_sync(self.bearer, bearer)
            except StoreError:
                refusal = (503, "the token could not be checked (database unreachable); try again")
            else:
                if principal is None:
                    self._end_admin_sessions(bearer)
                    refusal = (403, "unknown or revoked token")
                elif user_only(path) and not principal.may_approve:
                    refusal = (403, "this place is the user's own: a member token cannot open it")
                elif kind == "websocket" and "origin" not in headers:
                    refusal = (403, "missing Origin")
        if refusal is None and principal is USER and _is_mcp(path):
            refusal = (401, LINK_KEY_ON_MCP)  # the person's credential never drives an MCP client
        if refusal is not None:
            status, text = refusal
            log.warning("web: refused %s %s: %s", scope.get("method", "WS"), path, text)
            if kind == "websocket":
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1008, "reason": ""})
                return
            if _is_mcp(path) and status == 403 and text != "foreign Origin":
                status = 401  # an MCP client: no or a wrong bearer token
            await self._refuse(scope, receive, send, status, text, page=path == "/")
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal  # for handlers run outside this context (the /mcp sessions)
        reset = _PRINCIPAL.set(principal)
        try:
            await self._pass(kind, scope, receive, send)
        finally:
            _PRINCIPAL.reset(reset)

    def _replica_named(self, send: Send) -> Send:
        """``send`` adding this replica's id (replicas.py) to the answer, when a team gateway names it."""
        replica = {k: v for k, v in self.headers.items() if k.lower() == "x-mcp-setup-replica"}
        if not replica:
            return send

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(replica)
            await send(message)

        return named

    async def _pass(self, kind: str, scope: Scope, receive: Receive, send: Send) -> None:
        if kind == "websocket":
            await self.app(scope, receive, send)
            return

        async def send_secure(message: Message) -> None:
            if message["type"] == "http.response.start":
                h = MutableHeaders(scope=message)
                for name, value in self.headers.items():
                    h[name] = value
            await send(message)

        await self.app(scope, receive, send_secure)

    def _check_admin_session(self, kind: str, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        """An admin's page cookie: the browser's rules (Origin on POST and websocket) as for the user's."""
        refusal = self._check_place(scope, headers)
        safe = kind == "http" and scope.get("method", "GET") in ("GET", "HEAD")
        if refusal is None and not safe and "origin" not in headers:
            refusal = (403, "missing Origin")
        return refusal

    def _end_admin_sessions(self, raw_token: str) -> None:
        for sid in [sid for sid, tok in self.admin_sessions.items() if tok == raw_token]:
            self.admin_sessions.pop(sid, None)

    def admin_session(self, raw_token: str) -> str:
        """A new page session (the cookie's value) for an ``--admin`` token."""
        import secrets as _random

        sid = "adm_" + _random.token_urlsafe(32)
        if len(self.admin_sessions) > 1000:
            self.admin_sessions.pop(next(iter(self.admin_sessions)))
        self.admin_sessions[sid] = raw_token
        return sid

    def _check_place(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        """Host and Origin (checks 1 and 2)."""
        if headers.get("host", "").lower() not in self.hosts:
            return 421, "wrong Host header"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            return 403, "foreign Origin"
        return None

    def _check(self, kind: str, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        refusal = self._check_place(scope, headers)
        if refusal is not None:
            return refusal
        origin = headers.get("origin")
        method = scope.get("method", "GET")
        safe = kind == "http" and method in ("GET", "HEAD")
        header_token = headers.get(TOKEN_HEADER)
        cookie_token = _cookie(headers.get("cookie"), self.cookie)
        query_token = None
        if kind == "http" and scope.get("path") == "/" and safe:
            query_token = _query_param(scope, "t")
        if token_ok(header_token, self.token):
            if kind == "websocket" and origin is None:
                return 403, "missing Origin"
            return None
        if token_ok(cookie_token, self.token) or token_ok(query_token, self.token):
            if not safe and origin is None:  # browsers always send Origin on POST/websocket: not our page
                return 403, "missing Origin"
            return None
        return 403, "missing or wrong token"

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, text: str, *, page: bool) -> None:
        response: Response
        if page and status == 403:
            response = HTMLResponse(_REFUSED_PAGE, status_code=403)
        else:
            response = JSONResponse(
                {"ok": False, "error": {"code": "forbidden", "message": f"Refused: {text}."}}, status
            )
        for name, value in self.headers.items():
            response.headers[name] = value
        if status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="mcp-setup"'
        await response(scope, receive, send)


def _is_mcp(path: str) -> bool:
    """The gateway's streamable-HTTP endpoint (``/mcp``)."""
    return path == "/mcp" or path.startswith("/mcp/")


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None


def _query_param(scope: Scope, name: str) -> str | None:
    raw = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(raw, keep_blank_values=True):
        if key == name:
            return value
    return None
