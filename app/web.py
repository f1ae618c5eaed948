"""``mcp-setup serve``: the web face (FastAPI + uvicorn on 127.0.0.1).

Endpoints (all on ``http://127.0.0.1:PORT``):

* ``GET /?t=TOKEN`` — the page (``ui/index.html``); ``GET /static/app.css``, ``/static/app.js``;
* ``POST /rpc`` — JSON-RPC 2.0 (see :mod:`app.rpc`);
* ``GET /ws`` — the websocket of one browser session (see :mod:`app.ws`);
* ``POST /api/secrets/{prompt_id}`` — JSON ``{"value": "..."}`` or ``{"cancel": true}``: the
  secret modal's answer, handed straight to the broker (never echoed, logged or broadcast);
* ``/secrets/{prompt_id}?t=TOKEN`` — the one-time secret page of :mod:`app.secret_page`, for
  JSON-RPC clients that have no browser session (it runs its own guards).

Security (every request, in this order; see :class:`Guard`):

1. ``Host`` must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (DNS rebinding) — else 421, or a
   refused websocket handshake (403).
2. ``Origin``, when sent, must be ``http://127.0.0.1:PORT`` or ``http://localhost:PORT``; it is
   required on ``/ws`` and on every state-changing request authenticated by the cookie — else 403.
3. The per-process token (``secrets.token_urlsafe(32)``, new on every start) — else 403. It is
   accepted from the header ``X-MCP-Setup-Token`` (programmatic clients), from the cookie
   ``mcp_setup_<PORT>`` (HttpOnly, SameSite=Strict, Path=/; the port is in the name because
   cookies are not port-scoped), or from the query ``t`` on ``GET /`` only: that first page
   load sets the cookie, and the page's script drops ``?t=`` from the address bar. The page's
   script never sees the token: fetch and websocket carry the cookie.

Every response carries a CSP (no inline script or style, no foreign origin), ``no-store``,
``no-referrer``, ``nosniff``, ``X-Frame-Options: DENY``. The access log is off (URLs hold the
token on the first load).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import AsyncIterator, Callable, Generator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from .settings import Settings

__all__ = ["Guard", "TOKEN_HEADER", "WebFace", "cookie_name", "create_app", "run_serve"]

log = logging.getLogger(__name__)

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
TOKEN_HEADER = "x-mcp-setup-token"
SESSION_HEADER = "x-mcp-setup-session"
_MAX_SECRET_BODY = 64 * 1024
_PROMPT_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")
_STATIC = {
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
}


def cookie_name(port: int) -> str:
    return f"mcp_setup_{port}"


def csp(port: int) -> str:
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        f"connect-src 'self' ws://127.0.0.1:{port} ws://localhost:{port}; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )


def security_headers(port: int) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp(port),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    }


def _token_ok(given: str | None, token: str) -> bool:
    if not given:
        return False
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


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


_REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>mcp-setup: open the link from the terminal</title></head>
<body><main><h1>Open the link printed by mcp-setup</h1>
<p>This page only opens with the full link that <code>mcp-setup serve</code> printed in its terminal
(it ends with <code>?t=</code> and a long key). Copy that whole link into the address bar.</p></main></body></html>
"""


class Guard:
    """ASGI middleware: Host, Origin and token checks; security headers on every response."""

    def __init__(self, app: ASGIApp, *, token: str, port: int, secret_app: ASGIApp | None = None) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.secret_app = secret_app
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = cookie_name(port)
        self.headers = security_headers(port)
        self.face: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if kind == "http" and self.secret_app is not None and path.startswith("/secrets/"):
            await self.secret_app(scope, receive, send)  # its own Host/Origin/token guard
            return
        headers = _headers(scope)
        refusal = self._check(kind, scope, headers)
        if refusal is not None:
            status, text = refusal
            log.warning("web: refused %s %s: %s", scope.get("method", "WS"), path, text)
            if kind == "websocket":
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1008, "reason": ""})
                return
            await self._refuse(scope, receive, send, status, text, page=path == "/")
            return
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

    def _check(self, kind: str, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return 421, "wrong Host header"
        origin = headers.get("origin")
        method = scope.get("method", "GET")
        safe = kind == "http" and method in ("GET", "HEAD")
        if origin is not None and origin.lower() not in self.origins:
            return 403, "foreign Origin"
        header_token = headers.get(TOKEN_HEADER)
        cookie_token = _cookie(headers.get("cookie"), self.cookie)
        query_token = None
        if kind == "http" and scope.get("path") == "/" and safe:
            query_token = _query_param(scope, "t")
        if _token_ok(header_token, self.token):
            if kind == "websocket" and origin is None:
                return 403, "missing Origin"
            return None
        if _token_ok(cookie_token, self.token) or _token_ok(query_token, self.token):
            if not safe and origin is None:  # browsers always send Origin on POST/websocket: not our page
                return 403, "missing Origin"
            return None
        return 403, "missing or wrong token"

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, text: str, *, page: bool) -> None:
        response: Response
        if page and status == 403:
            response = HTMLResponse(_REFUSED_PAGE, status_code=403)
        else:
            response = JSONResponse({"ok": False, "error": {"code": "forbidden", "message": f"Refused: {text}."}}, status)
        for name, value in self.headers.items():
            response.headers[name] = value
        await response(scope, receive, send)


def _query_param(scope: Scope, name: str) -> str | None:
    from urllib.parse import parse_qsl

    raw = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(raw, keep_blank_values=True):
        if key == name:
            return value
    return None


class WebFace:
    """The app's state: runtime, sessions, token. Built by :func:`create_app`."""

    def __init__(self, settings: Settings, *, token: str, port: int, runtime_factory: Callable[[], Any]) -> None:
        self.settings = settings
        self.token = token
        self.port = port
        self.runtime_factory = runtime_factory
        self.runtime: Any = None
        self.hub: Any = None
        self.rpc: Any = None
        self._boot: asyncio.Task[None] | None = None

    @property
    def secret_page_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def startup(self) -> None:
        from .rpc import RpcDispatcher
        from .ws import WebHub

        self.runtime = self.runtime_factory()
        self.hub = WebHub(self.runtime, page_url=self.secret_url)
        self.hub.attach(asyncio.get_running_loop())
        self.rpc = RpcDispatcher(self.runtime, self.hub)
        # Installed servers come up in the background: the page is there at once.
        self._boot = asyncio.create_task(self._start_runtime(), name="mcp-setup-boot")

    async def _start_runtime(self) -> None:
        try:
            await self.runtime.start()
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

    def secret_url(self, prompt_id: str) -> str:
        from urllib.parse import quote

        return f"{self.secret_page_base}/secrets/{quote(prompt_id, safe='')}?t={quote(self.token, safe='')}"


def create_app(
    settings: Settings,
    *,
    token: str,
    port: int,
    runtime_factory: Callable[[], Any] | None = None,
) -> Guard:
    """The web app for a server listening on ``127.0.0.1:port``, behind its :class:`Guard`.

    Serve what this returns (the guard), never ``.app`` alone: the guard is the security.
    ``.face`` is the :class:`WebFace` (runtime, sessions) once the lifespan has started.
    """
    if not token:
        raise ValueError("token must be a non-empty string")
    if runtime_factory is None:
        from .runtime import build_runtime

        def runtime_factory() -> Any:
            return build_runtime(settings)

    face = WebFace(settings, token=token, port=port, runtime_factory=runtime_factory)

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
            cookie_name(port), token, httponly=True, samesite="strict", path="/", secure=False
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
        return await face.rpc.handle(request, session_id=request.headers.get(SESSION_HEADER))

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await face.hub.serve(websocket)

    @app.post("/api/secrets/{prompt_id}")
    async def answer_secret(request: Request, prompt_id: str) -> Response:
        return await _answer_secret(face, request, prompt_id)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:  # never a traceback to the client
        log.error("web: %s %s failed with %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"ok": False, "error": {"code": "internal", "message": "Internal error."}}, 500)

    from .secret_page import create_secret_app

    secret_app = create_secret_app(
        _BrokerView(face), token=token, allowed_hosts={f"127.0.0.1:{port}", f"localhost:{port}"}
    )
    guarded = Guard(app, token=token, port=port, secret_app=secret_app)
    guarded.face = face
    return guarded


class _BrokerView:
    """The runtime's broker, looked up late (the runtime is built in the lifespan)."""

    def __init__(self, face: WebFace) -> None:
        self._face = face

    def __getattr__(self, name: str) -> Any:
        return getattr(self._face.runtime.broker, name)


def _secret_error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": {"code": code, "message": message}}, status)


async def _answer_secret(face: WebFace, request: Request, prompt_id: str) -> Response:
    """``POST /api/secrets/{prompt_id}``: the modal's answer. The value is never echoed or logged."""
    from setup_agent.errors import InvalidInput, PromptAlreadyAnswered, PromptCancelled, PromptNotFound

    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return _secret_error(415, "invalid_input", "Send JSON: {\"value\": \"...\"} or {\"cancel\": true}.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_SECRET_BODY:
            return _secret_error(413, "invalid_input", "The value is too long.")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return _secret_error(400, "invalid_input", "Send JSON: {\"value\": \"...\"} or {\"cancel\": true}.")
    finally:
        body[:] = b"\0" * len(body)
    if not isinstance(data, dict):
        return _secret_error(400, "invalid_input", "Send JSON: {\"value\": \"...\"} or {\"cancel\": true}.")
    if not _PROMPT_ID.fullmatch(prompt_id):
        return _secret_error(404, "prompt_not_found", "This request for a secret is unknown or has expired.")
    broker = face.runtime.broker
    value = data.pop("value", None)
    try:
        if data.get("cancel") is True:
            broker.cancel(prompt_id, "cancelled by the user in the web page")
            return JSONResponse({"ok": True, "status": "cancelled"})
        if not isinstance(value, str):
            return _secret_error(400, "invalid_input", "Enter a value, or cancel.")
        broker.answer(prompt_id, value)
        return JSONResponse({"ok": True, "status": "answered"})
    except InvalidInput as exc:
        return _secret_error(400, exc.code, face.runtime.redactor.redact(exc.message))
    except PromptAlreadyAnswered as exc:
        return _secret_error(409, exc.code, exc.message)
    except PromptCancelled as exc:
        return _secret_error(410, exc.code, exc.message)
    except PromptNotFound as exc:
        return _secret_error(404, exc.code, exc.message)
    except Exception as exc:  # never a traceback (which could quote the value)
        log.error("web: answering a secret prompt failed (%s)", type(exc).__name__)
        return _secret_error(500, "internal", "Nothing was saved. Try again.")
    finally:
        value = None
        data.clear()


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


def run_serve(settings: Settings, log_handler: logging.Handler, *, port: int | None = None, open_browser: bool = True) -> int:
    """Serve the web app on 127.0.0.1 until Ctrl-C/SIGTERM; returns the exit code."""
    want = settings.port if port is None else port
    if not 0 <= want <= 65535:
        print(f"mcp-setup: --port must be from 0 to 65535 (0 picks a free port), not {want}.", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", want))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        print(
            f"mcp-setup: cannot listen on 127.0.0.1:{want} ({exc.strerror or exc}). "
            "Is another mcp-setup running? Use --port to pick another port (0 = any free one).",
            file=sys.stderr,
        )
        return 1
    actual = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    url = f"http://127.0.0.1:{actual}/?t={token}"
    _hide_token_in_logs(token, log_handler)

    def factory() -> Any:
        from setup_agent.redact import install_log_redaction

        from .runtime import build_runtime

        runtime = build_runtime(settings)
        install_log_redaction(runtime.redactor, log_handler)
        return runtime

    app = create_app(settings, token=token, port=actual, runtime_factory=factory)
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
