"""``mcp-setup serve``: the web face (FastAPI + uvicorn on 127.0.0.1).

Endpoints (all on ``http://127.0.0.1:PORT``, all behind :class:`app.web_security.Guard`: Host,
Origin and the per-process token; CSP and no-store on every response):

* ``GET /?t=TOKEN`` — the page (``ui/index.html``; sets the token cookie); ``GET /static/app.css``
  and the ES modules of ``ui/js/`` as ``/static/<name>.js`` (entry ``app.js``);
* ``POST /rpc`` — JSON-RPC 2.0 (see :mod:`app.rpc`);
* ``GET /ws`` — the websocket of one browser session (see :mod:`app.ws`; agent runs:
  :mod:`app.agent_runs`);
* ``POST /api/secrets/{prompt_id}`` — the secret modal's answer, handed straight to the broker
  (see :mod:`app.web_secrets`);
* ``POST /api/consents/{consent_id}`` — the consent modal's answer (see :mod:`app.web_consents`);
* ``/secrets/{prompt_id}?t=TOKEN`` — the one-time secret page of :mod:`app.secret_page`, for
  JSON-RPC clients that have no browser session (it runs its own guards); and
  ``/secrets/consents/{consent_id}?t=TOKEN``, the one-time consent page (:mod:`app.consent_page`).

:class:`WebFace` builds the runtime in the app's lifespan and listens to it through the core's
own hooks (broker subscription, ``ConnectionManager.add_status_listener``, ``CallContext.
on_progress``); it never replaces or wraps an attribute of a runtime object. The access log is
off (URLs hold the token on the first load).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import socket
import sys
import threading
import webbrowser
import ipaddress
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import uvicorn
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.websockets import WebSocket

from .rpc import RpcDispatcher
from .secret_page import create_secret_app
from .settings import Settings
from .web_consents import answer_consent
from .web_secrets import BrokerView, answer_secret
from .web_security import Guard, cookie_name
from .ws import WebHub

__all__ = ["WebFace", "create_app", "run_serve"]

log = logging.getLogger(__name__)

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
SESSION_HEADER = "x-mcp-setup-session"
_JS = "text/javascript; charset=utf-8"  # what ES modules need (and nosniff is on)
# URL → file under ui/. The scripts live in ui/js/ but are served flat under /static/ (the route
# takes one path segment), so their relative imports ("./api.js") resolve to these URLs.
_STATIC = {
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/static/app.js": ("js/app.js", _JS),  # the entry module (start-up wiring)
    "/static/api.js": ("js/api.js", _JS),
    "/static/dom.js": ("js/dom.js", _JS),
    "/static/errors.js": ("js/errors.js", _JS),
    "/static/progress.js": ("js/progress.js", _JS),
    "/static/secret_modal.js": ("js/secret_modal.js", _JS),
    "/static/consent_modal.js": ("js/consent_modal.js", _JS),
    "/static/oauth_modal.js": ("js/oauth_modal.js", _JS),
    "/static/servers.js": ("js/servers.js", _JS),
    "/static/setup.js": ("js/setup.js", _JS),
    "/static/thread.js": ("js/thread.js", _JS),
}


class WebFace:
    """The app's state: runtime, sessions, token. Built by :func:`create_app`."""

    def __init__(self, settings: Settings, *, token: str, port: int, runtime_factory: Callable[[], Any]) -> None:
        self.settings = settings
        self.token = token
        self.port = port
        self.runtime_factory = runtime_factory
        self.runtime: Any = None
        self.hub: WebHub | None = None
        self.rpc: RpcDispatcher | None = None
        self._boot: asyncio.Task[None] | None = None
        self.public_base: str | None = None  # a team gateway's own address, for links it hands out

    @property
    def secret_page_base(self) -> str:
        return self.public_base or f"http://127.0.0.1:{self.port}"

    async def startup(self) -> None:
        self.runtime = self.runtime_factory()
        self.hub = WebHub(self.runtime)
        self.hub.attach(asyncio.get_running_loop())
        self.rpc = RpcDispatcher(self.runtime, self.hub, page_url=self.secret_url, consent_url=self.consent_url)
        # Installed servers come up in the background: the page is there at once.
        self._boot = asyncio.create_task(self._start_runtime(), name="mcp-setup-boot")

    async def _start_runtime(self) -> None:
        assert self.hub is not None
        hub = self.hub

        async def servers_changed() -> None:  # installs, removals, enable/disable, from any process
            hub.emit({"type": "servers_changed"})

        self.runtime.gateway.add_listener(servers_changed)
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
        from .consent_page import consent_path

        return self.secret_page_base + consent_path(consent_id, self.token)

    def secret_url(self, prompt_id: str) -> str:
        return f"{self.secret_page_base}/secrets/{quote(prompt_id, safe='')}?t={quote(self.token, safe='')}"


def create_app(
    settings: Settings,
    *,
    token: str,
    port: int,
    runtime_factory: Callable[[], Any] | None = None,
    public_hosts: Sequence[str] = (),
    secure_cookie: bool = False,
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
        from .runtime import build_runtime

        def runtime_factory() -> Any:
            return build_runtime(settings)

    face = WebFace(settings, token=token, port=port, runtime_factory=runtime_factory)
    if public_hosts:
        face.public_base = f"{'https' if secure_cookie else 'http'}://{public_hosts[0]}:{port}"

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await face.startup()
        try:
            yield
        finally:
            await face.shutdown()

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.face = face

    @app.get("/")
    async def index(request: Request) -> Response:
        response = FileResponse(UI_DIR / "index.html", media_type="text/html; charset=utf-8")
        response.set_cookie(
            cookie_name(port), token, httponly=True, samesite="strict", path="/", secure=secure_cookie
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

    @app.post("/api/secrets/{prompt_id}")
    async def secret_answer(request: Request, prompt_id: str) -> Response:
        return await answer_secret(face.runtime, request, prompt_id)

    @app.post("/api/consents/{consent_id}")
    async def consent_answer(request: Request, consent_id: str) -> Response:
        return await answer_consent(face.runtime, request, consent_id)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:  # never a traceback to the client
        log.error("web: %s %s failed with %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"ok": False, "error": {"code": "internal", "message": "Internal error."}}, 500)

    hosts = {f"127.0.0.1:{port}", f"localhost:{port}"} | {f"{h.lower()}:{port}" for h in public_hosts if h}
    secret_app = create_secret_app(
        BrokerView(lambda: face.runtime),
        token=token,
        allowed_hosts=hosts,
        consents=lambda: getattr(face.runtime, "consents", None),
    )
    tokens: list[Any] = []

    def bearer(raw: str) -> str | None:
        if face.runtime is None:
            return None
        if not tokens:
            from setup_agent.tokens import Tokens

            tokens.append(Tokens(face.runtime.store))
        return tokens[0].verify(raw)

    guarded = Guard(app, token=token, port=port, secret_app=secret_app, public_hosts=public_hosts, bearer=bearer)
    guarded.face = face
    return guarded


# -- serve --------------------------------------------------------------------------------


class _Server(uvicorn.Server):
    """uvicorn's server: prints the URL once serving; Ctrl-C/SIGTERM shut down gracefully, exit 0."""

    def __init__(self, config: uvicorn.Config, url: str, open_browser: bool, face: WebFace) -> None:
        super().__init__(config)
        self.url = url
        self.open_browser = open_browser
        self.face = face
        self.signalled: int | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Stop agent runs, in-flight calls and websockets first: uvicorn then has nothing to wait for.
        try:
            await self.face.begin_shutdown()
        except Exception:
            log.exception("stopping the web sessions failed")
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit:  # the lifespan failed
            return
        print(f"mcp-setup is running at {self.url}", flush=True)
        print("Open that link (it holds this run's key). Press Ctrl-C to stop.", flush=True)
        if self.open_browser:
            threading.Thread(target=_open_browser, args=(self.url,), daemon=True, name="mcp-setup-browser").start()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, frame: Any) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.signalled = sig
        self.should_exit = True


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _hide_token_in_logs(token: str, handler: logging.Handler) -> None:
    """No log line shows the token (uvicorn logs websocket paths with their query)."""
    from setup_agent.redact import RedactingFilter, Redactor

    hider = Redactor()
    hider.register(token, "[token]")
    handler.addFilter(RedactingFilter(hider))


def _open_browser(url: str) -> None:
    try:
        webbrowser.open(url)
    except Exception as exc:  # noqa: BLE001 - the URL is printed anyway
        log.info("could not open a browser (%s); open the printed link yourself", type(exc).__name__)


def run_serve(
    settings: Settings,
    log_handler: logging.Handler,
    *,
    port: int | None = None,
    open_browser: bool = True,
    host: str = "127.0.0.1",
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    insecure_http: bool = False,
) -> int:
    """Serve the web app on ``host`` (127.0.0.1) until Ctrl-C/SIGTERM; returns the exit code.

    A non-loopback ``host`` needs ``tls_cert`` and ``tls_key``, or ``insecure_http`` (warned on
    every start): the token and every secret typed into the page cross that network.
    """
    want = settings.port if port is None else port
    if not 0 <= want <= 65535:
        print(f"mcp-setup: --port must be from 0 to 65535 (0 picks a free port), not {want}.", file=sys.stderr)
        return 2
    if (tls_cert is None) != (tls_key is None):
        print("mcp-setup: give both --tls-cert and --tls-key (PEM files), or neither.", file=sys.stderr)
        return 2
    tls = tls_cert is not None
    if not _is_loopback(host):
        if not tls and not insecure_http:
            print(
                f"mcp-setup: refusing to serve on {host} without TLS: tokens and secrets would cross the network "
                "in clear. Give --tls-cert FILE --tls-key FILE (PEM), or put a TLS proxy in front and pass "
                "--insecure-http.",
                file=sys.stderr,
            )
            return 2
        if not tls:
            log.warning(
                "serving on %s over plain HTTP (--insecure-http): tokens and secrets cross the network in clear "
                "unless a TLS proxy is in front.", host,
            )
    if settings.data_key_file or settings.data_key_keyring_entry:  # a team's key: say what is wrong, plainly
        from setup_agent.errors import SetupError

        from .runtime import open_vault

        try:
            open_vault(settings)
        except SetupError as exc:
            print(f"mcp-setup: {exc.message}", file=sys.stderr)
            return 1
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, want))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        print(
            f"mcp-setup: cannot listen on {host}:{want} ({exc.strerror or exc}). "
            "Is another mcp-setup running? Use --port to pick another port (0 = any free one).",
            file=sys.stderr,
        )
        return 1
    actual = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    public_hosts = [
        f"[{h}]" if ":" in h else h for h in (settings.public_host, host) if h and not _is_wildcard(h) and not _is_loopback(h)
    ]
    shown = settings.public_host or ("127.0.0.1" if _is_wildcard(host) else host)
    if ":" in shown:  # an IPv6 literal
        shown = f"[{shown}]"
    url = f"{'https' if tls else 'http'}://{shown}:{actual}/?t={token}"
    _hide_token_in_logs(token, log_handler)

    def factory() -> Any:
        from setup_agent.redact import install_log_redaction

        from .runtime import build_runtime

        runtime = build_runtime(settings)
        install_log_redaction(runtime.redactor, log_handler)
        return runtime

    app = create_app(
        settings, token=token, port=actual, runtime_factory=factory, public_hosts=public_hosts, secure_cookie=tls
    )
    config = uvicorn.Config(
        app,
        log_config=None,  # the CLI configured logging (stderr, redacted)
        access_log=False,  # the first URL holds the token
        lifespan="on",
        ws="websockets-sansio",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=5,
        ws_max_size=1 << 20,
        ssl_certfile=str(tls_cert) if tls_cert else None,
        ssl_keyfile=str(tls_key) if tls_key else None,
    )
    server = _Server(config, url, open_browser, app.face)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
    if not server.started:
        print("mcp-setup: the web app did not start; see the messages above.", file=sys.stderr)
        return 1
    return 0
