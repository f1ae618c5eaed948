"""The secret page served on a loopback port from a background thread (its own event loop).

uvicorn writes nothing to stdout (the stdio MCP face owns stdout) and no log line shows a
link's key. Each link carries its own capability (:class:`~setup_agent.secrets.Capabilities`):
:meth:`SecretPageServer.url_for` one that enters one prompt's value, :meth:`SecretPageServer.consent_url`
one that answers one consent (for the user's channels only). The app itself is :func:`app.pages.secret.create_secret_app`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
from typing import Any
from urllib.parse import quote

import uvicorn

from setup_agent.secrets import Capabilities, PendingPrompt, PromptBroker

from .secret import create_secret_app

__all__ = ["SecretPageServer", "tcp_listener"]

log = logging.getLogger("app.pages.secret")  # the page's logger, as before the split


def tcp_listener(host: str, port: int, *, backlog: int, reuse_address: bool = False) -> socket.socket:
    """A bound, listening, non-blocking TCP socket for uvicorn's ``sockets=``.

    Created with its protocol named (``IPPROTO_TCP``): asyncio turns Nagle's algorithm off
    (``TCP_NODELAY``) only on connections whose socket says TCP, and one made with protocol 0
    does not. With Nagle on, each answer after the first on a kept-alive connection (a page's
    RPCs, an HTTP client's MCP messages) waited about 40 ms for the peer's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, telling a threading.Event when it is serving (or failed to)."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


class SecretPageServer:
    """Serves the secret page on a loopback port from a background thread (own event loop)."""

    def __init__(
        self,
        broker: PromptBroker,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        consents: Any = None,
        capabilities: Capabilities | None = None,
        ttl_seconds: float = 900.0,
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError("The secret page only binds to a loopback address such as 127.0.0.1")
        self.broker = broker
        self.consents = consents
        self.host = host
        self.capabilities = capabilities or Capabilities(ttl_seconds=ttl_seconds)
        self._want_port = port
        self.port: int | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._log_filter: logging.Filter | None = None
        self._filtered: list[logging.Handler] = []

    def _hide_keys_in_logs(self) -> None:
        """No log line shows a link's key: a client's error quoting the URL,
        a traceback, a library's debug line. Every root handler gets a filter for them."""
        from setup_agent.secrets import RedactingFilter, Redactor

        hider = Redactor()
        self.capabilities.on_issue = lambda key, _action: hider.register(key, "[link-key]")
        self._log_filter = RedactingFilter(hider)
        for handler in logging.getLogger().handlers:
            handler.addFilter(self._log_filter)
            self._filtered.append(handler)

    @property
    def allowed_hosts(self) -> set[str]:
        if self.port is None:
            return set()
        name = f"[{self.host}]" if ":" in self.host else self.host
        return {f"{name}:{self.port}", f"localhost:{self.port}"}

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("The secret page server is not started")
        name = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{name}:{self.port}"

    def url_for(self, prompt: PendingPrompt | str) -> str:
        """The page for ``prompt``: ``http://127.0.0.1:PORT/secrets/<prompt_id>?t=<key>``, with a new
        key that enters this prompt's value and opens nothing else (it may reach an agent)."""
        prompt_id = prompt.prompt_id if isinstance(prompt, PendingPrompt) else prompt
        key = self.capabilities.issue(prompt_id, "secret")
        return f"{self.base_url}/secrets/{quote(prompt_id, safe='')}?t={quote(key, safe='')}"

    def consent_url(self, consent_id: str) -> str:
        """The consent page for ``consent_id`` (see :mod:`app.pages.consent`), with a new key that
        answers it. For the user's channels only: never put it in anything an agent receives."""
        key = self.capabilities.issue(consent_id, "consent")
        return f"{self.base_url}/secrets/consents/{quote(consent_id, safe='')}?t={quote(key, safe='')}"

    def start(self, timeout: float = 10.0) -> SecretPageServer:
        """Bind, start serving in a background thread, and return once it serves."""
        if self._thread is not None:
            raise RuntimeError("The secret page server is already started")
        sock = tcp_listener(self.host, self._want_port, backlog=64)
        self.port = sock.getsockname()[1]
        self._hide_keys_in_logs()
        app = create_secret_app(
            self.broker,
            capabilities=self.capabilities,
            allowed_hosts=lambda: self.allowed_hosts,
            consents=lambda: self.consents,
        )
        config = uvicorn.Config(
            app,
            log_config=None,  # never configure logging (no handler on stdout)
            access_log=False,
            lifespan="off",
            ws="none",
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=5,
        )
        ready = threading.Event()
        self._server = _Server(config, ready)
        self._thread = threading.Thread(target=self._run, args=(sock, ready), name="mcp-setup-secret-page", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or not self._server.started:
            self.stop()
            raise RuntimeError("The secret page server did not start") from self._error
        log.info("Secret page serving on %s", self.base_url)
        return self

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        assert self._server is not None
        try:
            asyncio.run(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # SystemExit from uvicorn on a failed startup included
            self._error = exc
            log.error("Secret page server stopped with %s", type(exc).__name__)
        finally:
            sock.close()
            ready.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (bounded) and join the thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        if thread.is_alive():
            log.warning("The secret page server thread did not stop in time")
        self._server = self._thread = None
        if self._log_filter is not None:
            for handler in self._filtered:
                handler.removeFilter(self._log_filter)
            self._filtered.clear()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> SecretPageServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
