"""``mcp-setup serve``'s process: the listening socket, TLS or not, uvicorn, signals, the browser.

:func:`run_serve` refuses a non-loopback host without TLS (or ``--insecure-http``), refuses a
second serve on the same data folder (``running.py``), prints the URL once serving and records
it for ``mcp-setup open``, keeps the token out of logs and shuts down gracefully on
Ctrl-C/SIGTERM. The runtime is built before the app's lifespan starts, so a data folder that
cannot be used stops serve with the exception the command line turns into one sentence, not with
uvicorn's traceback. The app itself is :func:`app.web.app.create_app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import uvicorn

from app.pages import tcp_listener
from app.settings import Settings

from .app import WebFace, create_app
from .running import AlreadyServing, ServeLock, display_available, open_in_browser

__all__ = ["display_available", "run_serve"]

log = logging.getLogger("app.web.app")  # the web face's logger, as before the split


class _BuiltRuntime:
    """The runtime, built by :class:`_Server` in the event loop before the app's lifespan starts,
    then handed to the face (its ``runtime_factory``). A failure is kept for :func:`run_serve`
    to raise once uvicorn has stopped."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._runtime: Any = None
        self.failure: Exception | None = None

    def build(self) -> bool:
        try:
            self._runtime = self._build()
        except Exception as exc:  # noqa: BLE001 - raised again by run_serve, outside uvicorn
            self.failure = exc
            return False
        return True

    def __call__(self) -> Any:
        return self._runtime


class _Server(uvicorn.Server):
    """uvicorn's server: prints the URL once serving and records it in the lock (``mcp-setup
    open``); Ctrl-C/SIGTERM shut down gracefully, exit 0."""

    def __init__(
        self,
        config: uvicorn.Config,
        url: str,
        open_browser: bool,
        face: WebFace,
        runtime: _BuiltRuntime,
        lock: ServeLock,
    ) -> None:
        super().__init__(config)
        self.url = url
        self.open_browser = open_browser
        self.face = face
        self.runtime = runtime
        self.lock = lock
        self.signalled: int | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Stop agent runs, in-flight calls and websockets first: uvicorn then has nothing to wait for.
        try:
            await self.face.begin_shutdown()
        except Exception:
            log.exception("stopping the web sessions failed")
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if not self.runtime.build():  # the data folder, the key, config.toml: said by run_serve
            self.should_exit = True
            return
        await super().startup(sockets=sockets)
        if self.should_exit:  # the lifespan failed
            return
        self.lock.publish(self.url)
        print(f"mcp-setup is running at {self.url}", flush=True)
        print(
            "Open that link (it holds this run's key; `mcp-setup open` shows it again). Press Ctrl-C to stop.",
            flush=True,
        )
        if self.open_browser and display_available(os.environ):
            threading.Thread(target=_open_browser, args=(self.url,), daemon=True, name="mcp-setup-browser").start()
        elif self.open_browser:
            print(
                "No display here, so no browser was opened: open the link in a browser on this computer "
                "(or through an SSH tunnel).",
                flush=True,
            )

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
    from setup_agent.secrets import RedactingFilter, Redactor

    hider = Redactor()
    hider.register(token, "[token]")
    handler.addFilter(RedactingFilter(hider))


def _open_browser(url: str) -> None:
    if not open_in_browser(url):
        log.info("could not open a browser; open the printed link yourself")


def parse_public_url(text: str) -> str | None:
    """``https://HOST[:PORT]`` (or ``http://``) as the base of every link, or None when it is not one."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return None
    if (
        parts.scheme not in ("https", "http")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or parts.username
        or parts.password
    ):
        return None
    default = {"https": 443, "http": 80}[parts.scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port not in (None, default) else "")


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
                "unless a TLS proxy is in front.",
                host,
            )
    if settings.data_key_file or settings.data_key_keyring_entry:  # a team's key: say what is wrong, plainly
        from app.data_key import open_vault
        from setup_agent.errors import SetupError

        try:
            open_vault(settings)
        except SetupError as exc:
            print(f"mcp-setup: {exc.message}", file=sys.stderr)
            return 1
    public_url = None
    if settings.public_url:
        public_url = parse_public_url(settings.public_url)
        if public_url is None:
            print(
                f"mcp-setup: MCP_SETUP_PUBLIC_URL: {settings.public_url!r} is not an address such as "
                "https://team.example or https://team.example:8443 (a scheme and a host, no path)",
                file=sys.stderr,
            )
            return 2
    try:  # before the port: a second serve on this data folder would start every server twice
        lock = ServeLock.acquire(Path(settings.home).expanduser())
    except AlreadyServing as exc:
        print(f"mcp-setup: {_already_serving(exc)}", file=sys.stderr)
        return 1
    try:
        return _serve_locked(
            settings,
            log_handler,
            lock,
            host=host,
            want=want,
            tls=tls,
            public_url=public_url,
            open_browser=open_browser,
            tls_cert=tls_cert,
            tls_key=tls_key,
        )
    finally:
        lock.release()


def _already_serving(exc: AlreadyServing) -> str:
    which = f" ({exc.other.words()})" if exc.other is not None else ""
    return (
        f"mcp-setup serve is already running on this data folder{which}. `mcp-setup open` shows its link; "
        "stop it (Ctrl-C in its terminal) before starting another."
    )


def _serve_locked(
    settings: Settings,
    log_handler: logging.Handler,
    lock: ServeLock,
    *,
    host: str,
    want: int,
    tls: bool,
    public_url: str | None,
    open_browser: bool,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> int:
    try:
        sock = tcp_listener(host, want, backlog=128, reuse_address=True)
    except OSError as exc:
        print(
            f"mcp-setup: cannot listen on {host}:{want} ({exc.strerror or exc}). "
            "Another program (or the serve of another data folder) may be using it. Use --port to pick "
            "another port (0 = any free one).",
            file=sys.stderr,
        )
        return 1
    actual = sock.getsockname()[1]
    token = secrets.token_urlsafe(32)
    public_hosts = [
        f"[{h}]" if ":" in h else h
        for h in (settings.public_host, host)
        if h and not _is_wildcard(h) and not _is_loopback(h)
    ]
    shown = settings.public_host or ("127.0.0.1" if _is_wildcard(host) else host)
    if ":" in shown:  # an IPv6 literal
        shown = f"[{shown}]"
    base = public_url or f"{'https' if tls else 'http'}://{shown}:{actual}"
    url = f"{base}/?t={token}"
    _hide_token_in_logs(token, log_handler)

    def build() -> Any:
        from app.runtime import build_runtime
        from setup_agent.secrets import install_log_redaction

        runtime = build_runtime(settings)
        install_log_redaction(runtime.redactor, log_handler)
        return runtime

    built = _BuiltRuntime(build)
    app = create_app(
        settings,
        token=token,
        port=actual,
        runtime_factory=built,
        public_hosts=public_hosts,
        secure_cookie=tls,
        public_url=public_url,
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
    server = _Server(config, url, open_browser, app.face, built, lock)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
    if built.failure is not None:
        raise built.failure  # the command line says it (one sentence for a data folder that cannot be used)
    if not server.started:
        print("mcp-setup: the web app did not start; see the messages above.", file=sys.stderr)
        return 1
    return 0
