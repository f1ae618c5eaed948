"""Two ``serve`` replicas behind Debian's nginx on loopback (round-robin, no stickiness), for the
team tests (#28). The replicas listen on one port at 127.0.0.2 and 127.0.0.3, nginx on
127.0.0.1 at the same port, so the links a replica hands out (``MCP_SETUP_PUBLIC_HOST`` and its
port) lead to the balancer. nginx runs unprivileged from a temp prefix (as ``nobody`` under root)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.timeouts import scaled

REPLICA_HOSTS = ("127.0.0.2", "127.0.0.3")
BALANCER_HOST = "127.0.0.1"
PUBLIC_HOST = "team.example"

NGINX_CONF = """
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log notice;
events {{ worker_connections 256; }}
http {{
    log_format replica '$request_method $uri -> $upstream_addr $status';
    access_log {prefix}/access.log replica;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    upstream mcp_setup {{
        # round-robin (nginx's default), no ip_hash, no sticky cookie
        server {a}:{port} max_fails=1 fail_timeout=60s;
        server {b}:{port} max_fails=1 fail_timeout=60s;
    }}
    server {{
        listen {balancer}:{port}{tls};
        location / {{
            proxy_pass http://mcp_setup;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


def nginx_binary() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)


def free_common_port() -> int:
    """A port free on the balancer's and both replicas' loopback addresses."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((BALANCER_HOST, 0))
            port = probe.getsockname()[1]
        try:
            for host in REPLICA_HOSTS:
                with socket.socket() as s:
                    s.bind((host, port))
            return port
        except OSError:
            continue
    raise AssertionError("no port free on 127.0.0.1-3")


def wait_listening(host: str, port: int, timeout: float, proc: subprocess.Popen[Any] | None = None) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"exited with {proc.returncode} before listening on {host}:{port}") from None
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on {host}:{port} after {timeout}s") from None
            pause.wait(0.05)  # a connect refused returns at once: do not spin


@dataclass
class Nginx:
    proc: subprocess.Popen[bytes]
    prefix: Path
    port: int
    logs: list[str] = field(default_factory=list)

    def log_text(self) -> str:
        out = []
        for name in ("access.log", "error.log"):
            path = self.prefix / name
            if path.exists():
                out.append(path.read_text(errors="replace"))
        return "\n".join(out)


@contextmanager
def nginx_balancer(port: int, tls: tuple[Path, Path] | None = None) -> Iterator[Nginx]:
    """nginx on BALANCER_HOST:port; with ``tls`` (cert, key) it ends TLS there and passes plain HTTP on."""
    binary = nginx_binary()
    assert binary is not None, "nginx is not installed (scripts/test.sh installs it: apt-get install nginx)"
    prefix = Path(tempfile.mkdtemp(prefix="mcp-setup-nginx-"))
    (prefix / "tmp").mkdir()
    conf = prefix / "nginx.conf"
    ssl = ""
    if tls is not None:
        for src, dst in zip(tls, ("cert.pem", "key.pem")):
            shutil.copy(src, prefix / dst)
        ssl = f" ssl;\n        ssl_certificate {prefix}/cert.pem;\n        ssl_certificate_key {prefix}/key.pem"
    conf.write_text(
        NGINX_CONF.format(
            prefix=prefix, a=REPLICA_HOSTS[0], b=REPLICA_HOSTS[1], port=port, balancer=BALANCER_HOST, tls=ssl
        )
    )
    argv = [binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log"), "-g", "daemon off;"]
    if os.getuid() == 0:  # never as root: nginx's own user for its worker, and for its master too
        nobody = pwd.getpwnam("nobody")
        os.chmod(prefix, 0o755)
        for path in [prefix, *prefix.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        argv = ["runuser", "-u", "nobody", "--", *argv]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(BALANCER_HOST, port, scaled(20), proc)
        yield Nginx(proc, prefix, port)
    finally:
        proc.terminate()
        try:
            proc.wait(scaled(10))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(scaled(10))
        shutil.rmtree(prefix, ignore_errors=True)


class Client:
    """A client of the balancer, recording which replica answered each request."""

    def __init__(self, port: int, *, member: str, admin: str, tls_cert: Path | None = None) -> None:
        self.port = port
        self.host = f"{PUBLIC_HOST}:{port}"
        self.scheme = "https" if tls_cert is not None else "http"  # https: TLS ends at nginx
        self.http = httpx.Client(
            base_url=f"{self.scheme}://{BALANCER_HOST}:{port}",
            trust_env=False,
            timeout=scaled(120),
            headers={"Host": self.host},
            verify=str(tls_cert) if tls_cert is not None else True,
        )
        self.member = {"Authorization": f"Bearer {member}"}
        self.admin = {"Authorization": f"Bearer {admin}"}
        self.answers: list[str] = []  # every response body, for the canary
        self.trail: list[tuple[str, str]] = []  # (step, replica)

    def close(self) -> None:
        self.http.close()

    def _record(self, step: str, response: httpx.Response) -> httpx.Response:
        self.answers.append(response.text)
        self.trail.append((step, response.headers.get("x-mcp-setup-replica", "?")))
        return response

    def healthz(self) -> str:
        return self._record("healthz", self.http.get("/healthz")).headers["x-mcp-setup-replica"]

    def steer(self, replica: str) -> None:
        """Make the next request land on ``replica``: round-robin goes on from the last answer (when
        only that replica is left, twice the same answer says so and the next goes there anyway)."""
        seen = [self.healthz()]
        while seen[-1] == replica:
            seen.append(self.healthz())
            if seen[-1] == seen[-2]:
                return

    def rpc(self, step: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self._record(step, self.http.post("/rpc", json=body, headers=self.member)).json()

    def mcp(self, step: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One session-less ``/mcp`` request (any replica answers it)."""
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        headers = {**self.member, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        response = self._record(step, self.http.post("/mcp", json=body, headers=headers))
        assert response.status_code == 200, response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            return json.loads(data[-1])
        return response.json()

    def post_as_user(self, step: str, path: str, body: dict[str, Any]) -> httpx.Response:
        return self._record(step, self.http.post(path, json=body, headers=self.admin))

    def last_replica(self) -> str:
        return self.trail[-1][1]
