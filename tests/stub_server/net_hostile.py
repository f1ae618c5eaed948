#!/usr/bin/env python3
"""A server that tries the network every way it can, for the network sandbox tests: stdlib only,
newline-delimited JSON-RPC, run as an MCPB python bundle (tests/setup_agent/launch/test_sandbox_network.py).

``NET_TARGETS`` (JSON): ``abstract`` (an abstract unix socket's name on the host), ``refused`` and
``granted`` (host loopback ports), ``forms`` (spellings of the loopback host), ``hello`` (a
``host:port`` it reaches through its proxy as it starts, so its test-connect records one), and
optionally ``other`` (a ``host:port`` it tries only when called: a destination its test never saw). Its
one tool, ``reach``, answers ``{attempt: "ok: <first bytes>" | "failed: <why>"}``: through the
proxy its environment names when there is one, else directly (the sandbox off).
"""

import json
import os
import socket
import sys

TIMEOUT = 10.0


def _read_all(sock):
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _proxy():
    url = os.environ.get("HTTPS_PROXY") or ""
    if not url:
        return None
    host, _, port = url.replace("http://", "").rstrip("/").rpartition(":")
    return host, int(port)


def _get(sock, path):
    sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
    return _read_all(sock)


def reach(host, port, path):
    """``host:port`` through the proxy (CONNECT, then a GET), or directly without one."""
    proxy = _proxy()
    try:
        if proxy is None:
            bare = host[1:-1] if host.startswith("[") else host
            with socket.create_connection((bare, port), timeout=TIMEOUT) as sock:
                return "ok: " + _get(sock, path)
        with socket.create_connection(proxy, timeout=TIMEOUT) as sock:
            authority = "%s:%d" % (host, port)
            sock.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(1)
                if not chunk:
                    break
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                return "failed: " + (head.decode("utf-8", "replace") + _read_all(sock))
            return "ok: " + _get(sock, path)
    except OSError as exc:
        return "failed: %s" % exc


def direct(port, path):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
            return "ok: " + _get(sock, path)
    except OSError as exc:
        return "failed: %s" % exc


def abstract(name):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect("\0" + name)
            return "ok: " + _read_all(sock)
    except OSError as exc:
        return "failed: %s" % exc


def targets():
    return json.loads(os.environ.get("NET_TARGETS") or "{}")


def attempts():
    t = targets()
    out = {
        "abstract": abstract(t["abstract"]),
        "direct_refused": direct(t["refused"], "/direct"),
        "granted": reach("127.0.0.1", t["granted"], "/granted"),
        "granted_at_own_loopback": direct(t["granted"], "/own"),
        "proxy": os.environ.get("HTTPS_PROXY", ""),
    }
    for form in t["forms"]:
        out["form " + form] = reach(form, t["refused"], "/form")
    if t.get("other"):
        host, _, port = t["other"].rpartition(":")
        out["other"] = reach(host, int(port), "/other")
    return out


def hello():
    t = targets()
    if t.get("hello") and _proxy() is not None:
        host, _, port = t["hello"].rpartition(":")
        reach(host, int(port), "/hello")


def answer(msg):
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        hello()
        version = (msg.get("params") or {}).get("protocolVersion") or "2025-06-18"
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "net-hostile", "version": "1.0.0"},
        }
    if method == "tools/list":
        schema = {"type": "object", "properties": {}}
        return {
            "tools": [{"name": "reach", "description": "Report what this server can reach.", "inputSchema": schema}]
        }
    if method == "tools/call":
        return {"content": [{"type": "text", "text": json.dumps(attempts())}]}
    if method == "ping":
        return {}
    if mid is not None:
        raise LookupError(method)
    return None


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "method" not in msg or msg.get("id") is None:
            continue
        try:
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        except LookupError:
            out = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "method not found"}}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
