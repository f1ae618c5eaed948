"""``mcp-setup serve``: the web face (FastAPI + uvicorn on 127.0.0.1).

Endpoints (all on ``http://127.0.0.1:PORT``, all behind :class:`app.web.security.Guard`: Host,
Origin and the per-process token; CSP and no-store on every response):

* ``GET /?t=TOKEN`` — the page (``ui/index.html``; sets the token cookie); ``GET /static/app.css``
  and the ES modules of ``ui/js/`` as ``/static/<name>.js`` (entry ``app.js``);
* ``POST /rpc`` — JSON-RPC 2.0 (see :mod:`app.web.rpc`);
* ``GET /ws`` — the websocket of one browser session (see :mod:`app.web.ws`; agent runs:
  :mod:`app.web.agent_runs`);
* ``POST /api/secrets/{prompt_id}`` — the secret modal's answer, handed straight to the broker
  (see :mod:`app.web.secrets`);
* ``POST /api/consents/{consent_id}`` — the consent modal's answer (see :mod:`app.web.consents`);
* ``POST /api/relayed/{request_id}`` — the person's answer to an installed server's form or page
  shown in the tab that ran its tool (see :mod:`app.web.relayed`);
* ``/secrets/{prompt_id}?t=KEY`` — the one-time secret page of :mod:`app.pages.secret`, for
  clients that have no browser session (it runs its own guards); and
  ``/secrets/consents/{consent_id}?t=KEY``, the one-time consent page (:mod:`app.pages.consent`).
  Each ``KEY`` is that item's own capability (:class:`~setup_agent.secrets.Capabilities`), never
  the page token: a secret link enters one value; a consent link reaches only the user's
  channels (URL-mode elicitation shown by an MCP client), never a tool result;
* ``/mcp`` — the gateway over streamable HTTP (the SDK's session manager around the same
  :class:`app.mcp.face.McpFace` as ``mcp-setup mcp``): the setup tools, every installed
  server's tools, the prompt resources. Clients send the token as ``Authorization: Bearer``.

:class:`WebFace` builds the runtime in the app's lifespan and listens to it through the core's
own hooks (broker subscription, ``ConnectionManager.add_status_listener``, ``CallContext.
on_progress``); it never replaces or wraps an attribute of a runtime object. The access log is
off (URLs hold the token on the first load). The process (socket, TLS, uvicorn, signals) is
:func:`app.web.serve.run_serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.websockets import WebSocket

from app.pages import create_secret_app
from app.settings import Settings
from setup_agent.package_data import data_dir
from setup_agent.principals import Principal
from setup_agent.secrets import Capabilities

from .consents import answer_consent
from .relayed import answer_relayed
from .replicas import REPLICA_HEADER, health_app, oauth_callback_app, replica_id, wants_stateless
from .rpc import RpcDispatcher
from .secrets import BrokerView, answer_secret
from .security import PRINCIPAL_SCOPE_KEY, Guard, cookie_name, current_principal
from .ws import WebHub

__all__ = ["WebFace", "create_app", "ui_dir"]

log = logging.getLogger(__name__)


def ui_dir() -> Path:
    """The page's files: the top-level ``ui/`` folder (inside the ``app`` package in a wheel)."""
    return data_dir("app", "ui")


UI_DIR = ui_dir()
SESSION_HEADER = "x-mcp-setup-session"
_JS = "text/javascript; charset=utf-8"  # what ES modules need (and nosniff is on)
# URL → file under ui/. The scripts live in ui/js/ but are served flat under /static/ (the route
# takes one path segment), so their relative imports ("./api.js") resolve to these URLs.
_STATIC = {
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    # Every ES module of ui/js/ (entry: app.js), read once at import: a new module needs no route.
    **{f"/static/{path.name}": (f"js/{path.name}", _JS) for path in sorted((UI_DIR / "js").glob("*.js"))},
}


class WebFace:
    """The app's state: runtime, sessions, token. Built by :func:`create_app`."""

    def __init__(
        self,
        settings: Settings,
        *,
        token: str,
        port: int,
        runtime_factory: Callable[[], Any],
        public_base: str | None = None,
    ) -> None:
        self.settings = settings
        self.token = token
        self.port = port
        self.runtime_factory = runtime_factory
        self.runtime: Any = None
        self.hub: WebHub | None = None
        self.rpc: RpcDispatcher | None = None
        self._boot: asyncio.Task[None] | None = None
        self.mcp_face: Any = None
        self._mcp_http: Any = None
        self._mcp_stateless: Any = None
        self._mcp_stack = contextlib.AsyncExitStack()
        self._mcp_owners: dict[str, str] = {}  # MCP session id -> the principal that created it
        self.foreign: Any = None  # ForeignConsents (foreign.py), once started
        self.public_base = public_base  # a team gateway's own address, for links it hands out
        self.capabilities = Capabilities(ttl_seconds=settings.secret_ttl_seconds, on_issue=self._on_key)

    def _on_key(self, key: str, action: str) -> None:
        """A consent key is for the user's channels only: the redactor hides it from every answer too."""
        if action == "consent" and self.runtime is not None:
            self.runtime.redactor.register(key, "[approval-link]")

    @property
    def secret_page_base(self) -> str:
        return self.public_base or f"http://127.0.0.1:{self.port}"

    async def startup(self) -> None:
        self.runtime = self.runtime_factory()
        self.capabilities.shared = getattr(self.runtime, "shared_capabilities", None)  # a team's: any replica
        sign_ins = getattr(self.runtime, "sign_ins", None)
        if self.public_base and getattr(sign_ins, "shared", None) is not None:  # redirects to any replica
            sign_ins.serve_callbacks_at(self.public_base)
        self.hub = WebHub(self.runtime)
        self.hub.attach(asyncio.get_running_loop())
        self.rpc = RpcDispatcher(
            self.runtime, self.hub, page_url=self.secret_url, mcp_url=f"{self.secret_page_base}/mcp"
        )
        if getattr(self.runtime.gateway, "members", None) is not None:  # a member's own key: their link
            self.runtime.gateway.members.prompts.serve_page(self.secret_url)
        if getattr(self.runtime, "approvals", None) is not None:  # other processes' consents, shown here
            from .foreign import ForeignConsents

            self.foreign = ForeignConsents(self.runtime.approvals, self.hub)
            self.foreign.start()
            if getattr(self.runtime, "feed", None) is not None:  # a team's: other replicas' items at once
                from setup_agent.store import PENDING_CHANNEL

                self.runtime.feed.add_listener(PENDING_CHANNEL, self.foreign.kick)
        await self._start_mcp()
        # Installed servers come up in the background: the page is there at once.
        self.runtime.connections.mark_booting()  # servers.list(wait_seconds) waits for that boot
        self._boot = asyncio.create_task(self._start_runtime(), name="mcp-setup-boot")

    async def _start_mcp(self) -> None:
        """The gateway at ``/mcp``: the stdio face's server, served by the SDK's HTTP session manager."""
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

        from app.mcp import McpFace

        self.mcp_face = McpFace(self.runtime, page_url=self.secret_url, consent_url=self.consent_url)
        # Host/Origin/token are checked by the Guard in front of the whole app.
        manager = StreamableHTTPSessionManager(app=self.mcp_face.server)
        await self._mcp_stack.enter_async_context(manager.run())
        # A request without a session (a 2026-07-28 client; any client behind a round-robin balancer)
        # is served session-less: any replica answers it (replicas.py).
        stateless = StreamableHTTPSessionManager(app=self.mcp_face.server, stateless=True)
        await self._mcp_stack.enter_async_context(stateless.run())
        self._mcp_stateless = StreamableHTTPASGIApp(stateless)
        self._mcp_http = StreamableHTTPASGIApp(manager)

    async def mcp_asgi(self, scope: Any, receive: Any, send: Any) -> None:
        if self._mcp_http is None:
            response = JSONResponse(
                {"ok": False, "error": {"code": "starting", "message": "Starting; try again."}}, 503
            )
            await response(scope, receive, send)
            return
        # A session is bound to the credential that created it: another token cannot drive it
        # (its state, its guard count). Unknown ids go on to the SDK, which answers 404.
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        owner = principal.label if principal is not None else "-"
        session_id = _header(scope, b"mcp-session-id")
        bound = self._mcp_owners.get(session_id) if session_id else None
        if bound is not None and bound != owner:
            log.warning("web: refused an MCP session driven with another credential")
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found."}}
            await JSONResponse(body, 404)(scope, receive, send)
            return

        stateless, receive = await wants_stateless(scope, receive)
        if stateless:
            await self._mcp_stateless(scope, receive, send)
            return

        async def send_bound(message: Any) -> None:
            if message.get("type") == "http.response.start" and session_id is None:
                created = _header(message, b"mcp-session-id")
                if created:
                    while len(self._mcp_owners) > 10_000:
                        self._mcp_owners.pop(next(iter(self._mcp_owners)))
                    self._mcp_owners[created] = owner
            await send(message)

        await self._mcp_http(scope, receive, send_bound)

    async def _start_runtime(self) -> None:
        assert self.hub is not None
        hub = self.hub

        async def servers_changed() -> None:  # installs, removals, enable/disable, from any process
            hub.emit({"type": "servers_changed"})

        self.runtime.gateway.add_listener(servers_changed)
        # The guard locked an agent's session: the person at the page is told, never the agent.
        self.runtime.gateway.lockout_listeners.append(
            lambda _session: hub.emit({"type": "guard_lockout"})  # from the loop thread: the gateway's call
        )
        try:
            await self.runtime.start(eager=True)  # serve keeps every enabled server connected
        except Exception:
            log.exception("starting the installed servers failed")

    async def begin_shutdown(self) -> None:
        """Ctrl-C: end agent runs and in-flight JSON-RPC calls, close the websockets."""
        if self.rpc is not None:
            self.rpc.close()
        if self.hub is not None:
            await self.hub.aclose()

    async def shutdown(self) -> None:
        if self.foreign is not None:
            await self.foreign.aclose()
        with contextlib.suppress(Exception):
            await self._mcp_stack.aclose()
        if self.mcp_face is not None:
            self.mcp_face.close()
        if self.rpc is not None:
            self.rpc.close()
        if self.hub is not None:
            await self.hub.aclose()
        if self._boot is not None and not self._boot.done():
            self._boot.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._boot
        if self.runtime is not None:
            await self.runtime.aclose()

    def consent_url(self, consent_id: str) -> str:
        """The consent page with a new key that answers this consent: for URL-mode elicitation
        (the client shows it to the person), never for a tool result."""
        from app.pages import consent_path

        return self.secret_page_base + consent_path(consent_id, self.capabilities.issue(consent_id, "consent"))

    def secret_url(self, prompt_id: str) -> str:
        """The secret page with a new key that enters this one prompt's value (it may reach an agent)."""
        key = self.capabilities.issue(prompt_id, "secret")
        return f"{self.secret_page_base}/secrets/{quote(prompt_id, safe='')}?t={quote(key, safe='')}"


def create_app(
    settings: Settings,
    *,
    token: str,
    port: int,
    runtime_factory: Callable[[], Any] | None = None,
    public_hosts: Sequence[str] = (),
    secure_cookie: bool = False,
    public_url: str | None = None,
) -> Guard:
    """The web app for a server listening on ``127.0.0.1:port``, behind its :class:`Guard`.

    Serve what this returns (the guard), never ``.app`` alone: the guard is the security.
    ``.face`` is the :class:`WebFace` (runtime, sessions) once the lifespan has started.
    ``public_hosts`` are further Host names clients may use (a team's gateway); named bearer
    tokens (``mcp-setup token``) are checked against the runtime's database on every request.
    """
    if not token:
        raise ValueError("token must be a non-empty string")
    if runtime_factory is None:
        from app.runtime import build_runtime

        def runtime_factory() -> Any:
            return build_runtime(settings)

    # TLS ends at a proxy in front (MCP_SETUP_PUBLIC_URL): links name its address, and its Host
    # (as the proxy passes it on) is accepted.
    public_netloc = public_url.split("://", 1)[1] if public_url else None
    public_base: str | None = None
    if public_url:
        public_base = public_url
        secure_cookie = secure_cookie or public_url.startswith("https://")
    elif public_hosts:
        public_base = f"{'https' if secure_cookie else 'http'}://{public_hosts[0]}:{port}"
    face = WebFace(settings, token=token, port=port, runtime_factory=runtime_factory, public_base=public_base)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await face.startup()
        try:
            yield
        finally:
            await face.shutdown()

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.face = face
    guard_box: list[Guard] = []  # the Guard built below (the page hands out its admin sessions)

    @app.get("/")
    async def index(request: Request) -> Response:
        # The Guard let only the user (this run's token) or an --admin token in. The cookie is bound
        # to that credential: the user's is this run's token; an admin's is a session of its own,
        # which ends when the token is revoked. A member's token never gets here (403).
        principal = current_principal()
        response = FileResponse(UI_DIR / "index.html", media_type="text/html; charset=utf-8")
        value: str | None = token
        if principal is not None and principal.kind == "member":
            raw = _bearer_of(request)
            value = guard_box[0].admin_session(raw) if raw else None  # None: already in its cookie session
        if value is not None:
            response.set_cookie(
                cookie_name(port), value, httponly=True, samesite="strict", path="/", secure=secure_cookie
            )
        return response

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        entry = _STATIC.get(f"/static/{name}")
        if entry is None:
            return JSONResponse({"ok": False, "error": {"code": "not_found", "message": "No such file."}}, 404)
        return FileResponse(UI_DIR / entry[0], media_type=entry[1])

    @app.post("/rpc")
    async def rpc(request: Request) -> Response:
        assert face.rpc is not None
        return await face.rpc.handle(request, session_id=request.headers.get(SESSION_HEADER))

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        assert face.hub is not None
        await face.hub.serve(websocket)

    class _McpEndpoint:  # a class instance: Starlette's Route hands it the raw ASGI call
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await face.mcp_asgi(scope, receive, send)

    app.router.add_route("/mcp", _McpEndpoint(), methods=["GET", "POST", "DELETE"], include_in_schema=False)

    @app.post("/api/secrets/{prompt_id}")
    async def secret_answer(request: Request, prompt_id: str) -> Response:
        return await answer_secret(face.runtime, request, prompt_id, foreign=face.foreign)

    @app.post("/api/consents/{consent_id}")
    async def consent_answer(request: Request, consent_id: str) -> Response:
        return await answer_consent(face.runtime, request, consent_id, foreign=face.foreign)

    @app.post("/api/relayed/{request_id}")
    async def relayed_answer(request: Request, request_id: str) -> Response:
        assert face.hub is not None
        return await answer_relayed(face.hub, request, request_id)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:  # never a traceback to the client
        log.error("web: %s %s failed with %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"ok": False, "error": {"code": "internal", "message": "Internal error."}}, 500)

    hosts = {f"127.0.0.1:{port}", f"localhost:{port}"} | {f"{h.lower()}:{port}" for h in public_hosts if h}
    if public_netloc:
        hosts.add(public_netloc)
    secret_app = create_secret_app(
        BrokerView(lambda: face.runtime),
        capabilities=face.capabilities,
        allowed_hosts=hosts,
        consents=lambda: getattr(face.runtime, "consents", None),
    )

    def bearer(raw: str) -> Principal | None:
        if face.runtime is None:
            return None
        found = face.runtime.store.tokens.lookup(raw)
        if found is None:
            return None
        if found.kind == "client":
            return Principal.http_client(found.name)
        return Principal.member(found.name, admin=found.admin)

    guarded = Guard(
        app,
        token=token,
        port=port,
        secret_app=secret_app,
        bearer=bearer,
        public_hosts=[*public_hosts, *([public_netloc] if public_netloc else [])],
        health=health_app(face),  # /healthz, /readyz for a load balancer (replicas.py)
        oauth_callback=oauth_callback_app(face, hosts | {h.lower() for h in public_hosts if h}),
        face=face,
    )
    guarded.headers[REPLICA_HEADER] = replica_id()
    guard_box.append(guarded)
    return guarded


def _header(scope_or_message: Any, name: bytes) -> str | None:
    for key, value in scope_or_message.get("headers") or []:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _bearer_of(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
