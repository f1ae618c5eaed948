"""A package registry faked as a real HTTP server on loopback: the request handler base that
can send a body slowly (a first download on a slow network) and the server's start and stop.
Used by tests/fakes/npm_registry.py, tests/fakes/pypi_index.py and tests/fakes/file_server.py."""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers.timeouts import scaled

__all__ = ["TrickleHandler", "serve_loopback"]


class TrickleHandler(http.server.BaseHTTPRequestHandler):
    """A handler whose :meth:`send_body` can spread a body over ``trickle`` seconds (in ten pieces)."""

    protocol_version = "HTTP/1.1"
    #: Set when the server shuts down: a trickling answer stops at once.
    stop: threading.Event

    def send_body(self, body: bytes, ctype: str, *, status: int = 200, trickle: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        pieces = 10 if trickle > 0 else 1
        size = -(-len(body) // pieces)
        for i in range(pieces):
            self.wfile.write(body[i * size : (i + 1) * size])
            self.wfile.flush()
            if trickle > 0 and i < pieces - 1 and self.stop.wait(trickle / pieces):
                return  # shutting down

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serve_loopback(
    handler: type[TrickleHandler], host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None
) -> Iterator[int]:
    """Serve ``handler`` on ``port`` of ``host`` (``127.0.0.1`` or ``::1``; 0: a free port; the
    port is yielded) until the block ends; over TLS with ``tls`` (a server context). A given port
    is where a runner was pointed before anything answered there: a registry that comes back."""

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        allow_reuse_address = True

        def get_request(self) -> tuple[socket.socket, object]:
            conn, addr = super().get_request()
            return (tls.wrap_socket(conn, server_side=True) if tls is not None else conn), addr

    handler.stop = threading.Event()
    server = Server((host, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        handler.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(scaled(5))
