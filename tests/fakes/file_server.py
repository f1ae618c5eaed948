"""A file served over HTTP on loopback (a remote registry may not name a file:// bundle)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["serve_file"]


@contextmanager
def serve_file(path: Path, hits: list[str] | None = None, host: str = "127.0.0.1") -> Iterator[str]:
    """``path`` over HTTP on loopback (a remote registry may not name a file:// bundle);
    each request's path is appended to ``hits`` when given. ``host`` may be ``::1`` (a loopback
    URL that a check for ``127.0.0.1``/``localhost`` takes for a remote host)."""
    body = path.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if hits is not None:
                hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        netloc = f"[{host}]" if ":" in host else host
        yield f"http://{netloc}:{server.server_address[1]}/{path.name}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
