"""A would-be server that tries the network every way it can, run inside the sandbox by
tests/setup_agent/launch/test_netns.py (standard library only: it runs as ``python3 -I -S net_probe.py PLAN``).

PLAN (JSON): ``granted`` and ``refused`` (host loopback ports), ``forms`` (spellings of the refused
destination to ask the proxy for), ``abstract`` (an abstract unix socket's name on the host),
``direct_only`` (skip the proxy: the run without a namespace of its own, where there is none).
Prints one JSON object: what each attempt got, ``"ok: ..."`` or ``"failed: ..."``.
"""

from __future__ import annotations

import json
import os
import socket
import sys

TIMEOUT = 10.0


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _proxy() -> tuple[str, int]:
    url = os.environ["HTTP_PROXY"]
    host, _, port = url.removeprefix("http://").rstrip("/").rpartition(":")
    return host, int(port)


def through_proxy(request: bytes) -> str:
    """Send ``request`` to the proxy the environment names; the whole answer."""
    try:
        with socket.create_connection(_proxy(), timeout=TIMEOUT) as sock:
            sock.sendall(request)
            return "ok: " + _read_all(sock).decode("utf-8", "replace")
    except OSError as exc:
        return f"failed: {exc}"


def connect_then_get(authority: str) -> str:
    """CONNECT ``authority``, then a GET through the tunnel."""
    try:
        with socket.create_connection(_proxy(), timeout=TIMEOUT) as sock:
            sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(1)
                if not chunk:
                    break
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                return "failed: " + (head + _read_all(sock)).decode("utf-8", "replace")
            sock.sendall(b"GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return "ok: " + _read_all(sock).decode("utf-8", "replace")
    except OSError as exc:
        return f"failed: {exc}"


def direct(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
            sock.sendall(b"GET /direct HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return "ok: " + _read_all(sock).decode("utf-8", "replace")
    except OSError as exc:
        return f"failed: {exc}"


def abstract(name: str) -> str:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect("\0" + name)
            return "ok: " + _read_all(sock).decode("utf-8", "replace")
    except OSError as exc:
        return f"failed: {exc}"


def main() -> None:
    plan = json.loads(sys.argv[1])
    out: dict[str, object] = {
        "direct_refused": direct(plan["refused"]),
        "abstract": abstract(plan["abstract"]),
    }
    if not plan.get("direct_only"):
        granted = plan["granted"]
        out["env"] = {k: v for k, v in os.environ.items() if "proxy" in k.lower()}
        out["connect_granted"] = connect_then_get(f"127.0.0.1:{granted}")
        out["get_granted"] = through_proxy(f"GET http://127.0.0.1:{granted}/get HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        out["forward_granted"] = direct(granted)
        out["forms"] = {
            form: connect_then_get(form) + " | " + through_proxy(f"GET http://{form}/ HTTP/1.1\r\n\r\n".encode())
            for form in plan["forms"]
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
