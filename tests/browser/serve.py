"""Run ``mcp-setup serve`` as a real subprocess for the web tests, and talk to it.

``start_serve`` starts it with an isolated environment (``tests.helpers.mcp_face.face_env``), a local
catalog holding the stub bundle, ``--no-browser --port 0``, and reads the printed URL (bounded).
``stop_serve`` sends a signal and waits (bounded) for the exit code.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

STUB = "io.github.mcp-setup/stub"
OTHER_STUB = "io.example.other/stub"
URL_LINE = re.compile(r"(http://127\.0\.0\.1:(\d+)/\?t=([A-Za-z0-9_\-]+))")


def make_catalog(root: Path, expected: str, *, extra: bool = False) -> Path:
    """A local catalog with the stub bundle (wanting ``expected``); ``extra`` adds a namesake."""
    bundle, sha = build_stub_bundle(root / "dist", expected_value=expected)
    catalog = root / "catalog"
    catalog.mkdir(parents=True, exist_ok=True)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha)))
    if extra:  # a second server with the same short name: the agent has to ask which one
        doc = stub_server_json(bundle.resolve().as_uri(), sha, name=OTHER_STUB)
        doc["description"] = "Another stub server with the same name, from someone else."
        (catalog / "other-stub.json").write_text(json.dumps(doc))
    return catalog


_CLIENT_NAMES = itertools.count(1)


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    token: str
    root: Path
    env: dict[str, str]
    stderr_path: Path
    stdout_lines: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return self.base

    def headers(self, **extra: str) -> dict[str, str]:
        return {"X-MCP-Setup-Token": self.token, "Origin": self.origin, **extra}

    def client_token(self, name: str | None = None) -> str:
        """A new client token of this data dir (``mcp-setup token create NAME --client``; a new name
        by default): what an HTTP MCP client sends on ``/mcp``, where the page link's key is refused."""
        name = name or f"test-client-{next(_CLIENT_NAMES)}"
        done = subprocess.run(
            [*mcp_setup_argv(), "token", "create", name, "--client"],
            env=self.env,
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[0]

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=kwargs.pop("timeout", 30), trust_env=False, **kwargs)

    def rpc(
        self, method: str, params: dict[str, Any] | None = None, *, req_id: int = 1, **headers: str
    ) -> dict[str, Any]:
        with self.client() as http:
            body = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params or {}}
            response = http.post("/rpc", json=body, headers=self.headers(**headers))
            response.raise_for_status()
            return response.json()

    def websocket(self, *, session_header: bool = True, **headers: str) -> Any:
        """A websocket client on ``/ws`` (token header, right Origin) — ``websockets.sync``."""
        from websockets.sync.client import connect

        return connect(
            f"ws://127.0.0.1:{self.port}/ws",
            origin=self.origin,  # type: ignore[arg-type]
            additional_headers={"X-MCP-Setup-Token": self.token, **headers},
            proxy=None,
            open_timeout=scaled(10),
            legacy=True,
        )

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""


def start_serve(
    root: Path,
    catalog: Path | None = None,
    *,
    timeout: float = scaled(30.0),
    argv: list[str] | None = None,
    serve_args: tuple[str, ...] = (),
    **extra_env: str,
) -> Served:
    """``mcp-setup serve`` on a free port (``argv``: another ``mcp-setup`` to run, e.g. an installed wheel's;
    ``serve_args``: more options, e.g. ``--verbose``)."""
    env = face_env(root, **{"MCP_SETUP_REGISTRIES": "local", **extra_env})
    if catalog is not None:
        env["MCP_SETUP_CATALOG_DIR"] = str(catalog)
    env["PYTHONUNBUFFERED"] = "1"
    stderr_path = root / "serve-stderr.log"
    with open(stderr_path, "ab") as errlog:
        proc = subprocess.Popen(
            [*(argv or mcp_setup_argv()), "serve", "--no-browser", "--port", "0", *serve_args],
            stdout=subprocess.PIPE,
            stderr=errlog,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(REPO),
        )
    lines: list[str] = []
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"mcp-setup serve printed no URL in {timeout}s; stdout={lines!r}")
            if not sel.select(remaining):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(
                    f"mcp-setup serve exited ({proc.wait(scaled(5))}) before printing its URL; stderr:\n"
                    + stderr_path.read_text(errors="replace")
                )
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                lines.append(line.decode(errors="replace"))
                match = URL_LINE.search(lines[-1])
                if match:
                    url, port, token = match.group(1), int(match.group(2)), match.group(3)
                    assert parse_qs(urlsplit(url).query)["t"] == [token]
                    return Served(proc, url, port, token, root, env, stderr_path, lines)
    except BaseException:
        proc.kill()
        proc.wait(scaled(10))
        raise
    finally:
        sel.close()


def stop_serve(served: Served, sig: int = signal.SIGINT, timeout: float = scaled(30.0)) -> int:
    """Send ``sig`` and wait for the exit code (kill after ``timeout`` and fail)."""
    proc = served.proc
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(scaled(10))
            raise AssertionError(f"mcp-setup serve did not stop within {timeout}s after signal {sig}") from None
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


def raw_handshake(port: int, *, host: str, headers: dict[str, str] | None = None, path: str = "/ws") -> int:
    """Send a websocket upgrade request by hand (any Host/Origin) and return the HTTP status."""
    import base64
    import socket

    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
        "",
        "",
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(10)) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1"))
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    status_line = data.split(b"\r\n", 1)[0].decode("latin-1")
    return int(status_line.split()[1])


@contextlib.contextmanager
def serving(root: Path, canary: str) -> Iterator[Served]:
    """``mcp-setup serve`` over a stub catalog for a test module; on the way out it must stop
    cleanly (exit 0), with no traceback, canary or token in its log."""
    served = start_serve(root, make_catalog(root, canary))
    try:
        yield served
    finally:
        code = stop_serve(served)
    log = served.stderr()
    assert code == 0, log
    assert "Traceback" not in log
    assert canary not in log
    assert served.token not in log  # no access log line with ?t=
