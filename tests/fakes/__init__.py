"""Real local HTTP fakes of upstream services, for tests and for trying the product offline.

Each fake is a Starlette app served by uvicorn on 127.0.0.1 (ephemeral port by default) in
a background thread. ``start()`` waits on a readiness event (bounded); ``stop()`` releases
any request held by ``latency`` and joins the thread. Use as a context manager::

    with FakeOfficialRegistry() as reg:
        reg.url            # http://127.0.0.1:PORT
        reg.latency = 2.0  # every request answers 2 s late (released at once by stop/reset)
        reg.down = True    # every request answers 500
        reg.requests       # what the fake saw (RecordedRequest, without Authorization)

For "connection refused", use :func:`closed_port_url` or a stopped fake's URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.pages import tcp_listener

__all__ = ["FakeHTTPServer", "RecordedRequest", "closed_port_url", "serve_forever"]


@dataclass
class RecordedRequest:
    method: str
    path: str  # decoded
    raw_path: str  # as sent (``%2F`` kept)
    query: dict[str, str] = field(default_factory=dict)
    authorized: bool | None = None  # set by fakes that check a key


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, owner: FakeHTTPServer) -> None:
        super().__init__(config)
        self._owner = owner

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._owner._loop = asyncio.get_running_loop()
        self._owner._release = asyncio.Event()
        try:
            await super().startup(sockets=sockets)
        finally:
            self._owner._ready.set()


class FakeHTTPServer:
    """Base: subclasses implement :meth:`build_app` and may override :meth:`down_response`."""

    def __init__(self, *, port: int = 0) -> None:
        self.port = port
        self.latency = 0.0
        self.down = False
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    # -- to implement -------------------------------------------------------------------
    def build_app(self) -> Starlette:
        raise NotImplementedError

    def down_response(self) -> Response:
        return JSONResponse({"error": "The fake is down (test switch)."}, status_code=500)

    # -- shared behaviour ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def record(self, request: Request, **extra: Any) -> RecordedRequest:
        raw = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        rec = RecordedRequest(request.method, request.url.path, raw, dict(request.query_params), **extra)
        with self._lock:
            self.requests.append(rec)
        return rec

    async def gate(self) -> Response | None:
        """Apply latency and the down switch; a Response means "answer this instead"."""
        if self.latency > 0 and self._release is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._release.wait(), self.latency)
        return self.down_response() if self.down else None

    def _release_waiters(self) -> None:
        loop, old = self._loop, self._release

        def swap() -> None:
            if old is not None:
                old.set()
            self._release = asyncio.Event()

        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(swap)

    def reset(self) -> None:
        """Back to a healthy, fast fake with an empty request log (held requests released)."""
        self.latency = 0.0
        self.down = False
        self._release_waiters()
        with self._lock:
            self.requests.clear()

    def start(self, timeout: float = 10.0) -> FakeHTTPServer:
        sock = tcp_listener("127.0.0.1", self.port, backlog=128, reuse_address=True)  # Nagle off, as serve's
        self.port = sock.getsockname()[1]
        self._sock = sock
        config = uvicorn.Config(self.build_app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = _Server(config, self)
        self._ready.clear()
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"{type(self).__name__}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout) or not self._server.started:
            self.stop()
            raise RuntimeError(f"{type(self).__name__} did not start within {timeout} s")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._release_waiters()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(fake: FakeHTTPServer, banner: str) -> None:
    """Run ``fake`` in the foreground until Ctrl-C (for ``python -m tests.fakes.…``)."""
    with fake:
        print(banner.format(url=fake.url), flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
