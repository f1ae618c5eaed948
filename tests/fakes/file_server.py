"""A file served over HTTP on loopback (a remote registry may not name a file:// bundle), and a
local catalog whose stub bundle is served so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.fakes.loopback import TrickleHandler, serve_loopback
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

__all__ = ["serve_bundle_catalog", "serve_file"]


@contextmanager
def serve_file(path: Path, hits: list[str] | None = None, host: str = "127.0.0.1") -> Iterator[str]:
    """``path`` over HTTP on loopback (a remote registry may not name a file:// bundle);
    each request's path is appended to ``hits`` when given. ``host`` may be ``::1`` (a loopback
    URL that a check for ``127.0.0.1``/``localhost`` takes for a remote host)."""
    body = path.read_bytes()

    class Handler(TrickleHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:  # noqa: N802
            if hits is not None:
                hits.append(self.path)
            self.send_body(body, "application/octet-stream")

    with serve_loopback(Handler, host) as port:
        netloc = f"[{host}]" if ":" in host else host
        yield f"http://{netloc}:{port}/{path.name}"


@contextmanager
def serve_bundle_catalog(root: Path, expected: str, name: str) -> Iterator[tuple[Path, list[str], str]]:
    """A local catalog (``root/catalog``) whose entry ``name`` names the stub bundle (wanting
    ``expected``) served over loopback HTTP: ``(catalog, hits, sha256)``, every hit counted."""
    bundle, sha = build_stub_bundle(root / "dist", expected_value=expected)
    hits: list[str] = []
    with serve_file(bundle, hits) as url:
        catalog = root / "catalog"
        catalog.mkdir()
        (catalog / "stub.json").write_text(json.dumps(stub_server_json(url, sha, name=name)))
        yield catalog, hits, sha
