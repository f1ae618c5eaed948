"""A sandboxed server's own network namespace: what it adds to a start and to a request.

Start (interleaved rounds, order rotated each round), ``/bin/true`` as the server, through the
sandbox's own bwrap command line (:meth:`Sandbox.wrap`), spawn → exit:

* ``shared`` — ``--share-net``: the baseline, the sandbox as it is today;
* ``netns``  — :meth:`NetnsBridge.into_bwrap`: a network namespace of its own, the bootstrap in
  front (binds the proxy's port, hands the socket out, ``exec``s the server), timed to the exit
  with the socket received and served by the proxy;
* ``netns_only`` — context: ``--unshare-net`` alone, no bootstrap (what the namespace costs).

Request (interleaved): a new TCP connection, TLS handshake, ``GET`` and the whole answer from a
local TLS server, directly vs through :class:`NetProxy` (``CONNECT``, the destination granted),
the proxy and the TLS server in this process's event loop on a thread, the client on the main
thread.

Download (interleaved): :meth:`Fetcher.fetch` of a one-package npm registry on loopback
(``tests/fakes/npm_registry.py``, the registry granted as the download's only destination), a
cold private npm cache each round, in bubblewrap with the network namespace and the proxy
(``setup_agent/launch/fetch_sandbox.py``) vs ``MCP_SETUP_SANDBOX=off``.

Reported: medians, the median of each round's ratio and of the milliseconds added (start target
≤ 1.15× or ≤ 50 ms added; request and download: info).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import Root, emit, median, summary


async def _start_once(kind: str, argv: list[str], proxy: Any) -> float:
    from setup_agent.launch import NetnsBridge, NetPolicy, NetRecord

    t0 = time.perf_counter()
    if kind == "netns":
        bridge = NetnsBridge()
        argv = bridge.into_bwrap(argv)
        process = await asyncio.create_subprocess_exec(*argv, pass_fds=bridge.pass_fds, env={"PATH": "/usr/bin:/bin"})
        bridge.spawned()
        sockets = await bridge.sockets(10)
        listener = await proxy.serve(sockets.proxy, NetPolicy.default(), NetRecord())
        await process.wait()
        elapsed = time.perf_counter() - t0
        await listener.aclose()
        bridge.close()
    else:
        if kind == "netns_only":
            argv = [a for a in argv if a != "--share-net"]
        process = await asyncio.create_subprocess_exec(*argv, env={"PATH": "/usr/bin:/bin"})
        await process.wait()
        elapsed = time.perf_counter() - t0
    assert process.returncode == 0, (kind, process.returncode)
    return elapsed


async def measure_start(root: Root, rounds: int) -> dict[str, Any]:
    from setup_agent.launch import NetProxy
    from setup_agent.launch.sandbox import Profile, Sandbox

    sandbox = Sandbox("bwrap", hide=(root.path / "data",), user_home=Path.home(), host_env=dict(os.environ))
    if sandbox.mechanism != "bwrap":
        return {"unavailable": sandbox.why}
    workdir = root.path / "server"
    workdir.mkdir()
    command, args, _ = sandbox.wrap("/bin/true", [], {}, Profile(workdir, network=True))
    argv = [command, *args]
    proxy = NetProxy()
    kinds = ["shared", "netns", "netns_only"]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for kind in kinds:  # warm-up: page cache, bwrap's and the interpreter's first start
            await _start_once(kind, argv, proxy)
        for i in range(rounds):
            for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
                times[kind].append(await _start_once(kind, argv, proxy))
    finally:
        await proxy.aclose()
    out: dict[str, Any] = {"times": {k: summary(v) for k, v in times.items()}, "rounds": rounds}
    for kind in ("netns", "netns_only"):
        out[f"ratio_{kind}"] = median(n / s for n, s in zip(times[kind], times["shared"], strict=True))
        out[f"added_{kind}_s"] = median(n - s for n, s in zip(times[kind], times["shared"], strict=True))
    return out


def _tls_contexts(root: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: the server's context and a client's that trusts it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench.local")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = root / "bench-cert.pem", root / "bench-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def _request(client_ctx: ssl.SSLContext, port: int, proxy_port: int | None) -> bytes:
    target = ("127.0.0.1", proxy_port or port)
    with socket.create_connection(target, timeout=10) as raw:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if proxy_port is not None:
            raw.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                chunk = raw.recv(1)
                if not chunk:
                    raise ConnectionError("the proxy closed the tunnel")
                head += chunk
            assert head.startswith(b"HTTP/1.1 200"), head
        with client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            body = b""
            while chunk := tls.recv(65536):
                body += chunk
            return body


def measure_request(root: Root, rounds: int) -> dict[str, Any]:
    from setup_agent.launch import NetPolicy, NetProxy, NetRecord

    server_ctx, client_ctx = _tls_contexts(root.path)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    ports: dict[str, int] = {}
    state: dict[str, Any] = {}

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def setup() -> None:
        origin = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
        ports["origin"] = origin.sockets[0].getsockname()[1]
        proxy = NetProxy()
        policy = NetPolicy.default([f"127.0.0.1:{ports['origin']}"])
        listener = await proxy.serve(socket.create_server(("127.0.0.1", 0)), policy, NetRecord())
        ports["proxy"] = listener.port
        state.update(origin=origin, proxy=proxy)
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(setup())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        if not ready.wait(30):
            raise TimeoutError("the TLS server and the proxy did not start")
        kinds = {"direct": None, "proxied": ports["proxy"]}
        for proxy_port in kinds.values():  # warm-up
            assert _request(client_ctx, ports["origin"], proxy_port).endswith(b"hello")
        times: dict[str, list[float]] = {k: [] for k in kinds}
        names = list(kinds)
        for i in range(rounds):
            for kind in names[i % 2 :] + names[: i % 2]:
                t0 = time.perf_counter()
                body = _request(client_ctx, ports["origin"], kinds[kind])
                times[kind].append(time.perf_counter() - t0)
                assert body.endswith(b"hello"), body
    finally:

        async def close() -> None:
            if "proxy" in state:
                await state["proxy"].aclose()
                state["origin"].close()

        asyncio.run_coroutine_threadsafe(close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
    out: dict[str, Any] = {"times": {k: summary(v) for k, v in times.items()}, "rounds": rounds}
    out["ratio"] = median(p / d for p, d in zip(times["proxied"], times["direct"], strict=True))
    out["added_s"] = median(p - d for p, d in zip(times["proxied"], times["direct"], strict=True))
    return out


async def measure_download(root: Root, rounds: int) -> dict[str, Any]:
    import shutil

    from setup_agent.launch import LaunchSpec, Sandbox
    from setup_agent.launch.fetch import Fetcher
    from tests.fakes.npm_registry import serve_npm_package

    if shutil.which("npm") is None:
        return {"unavailable": "npm is not installed"}
    kinds = ["off", "bwrap"]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    data = root.path / "download"
    with serve_npm_package("mcp-setup-bench-pkg", "1.0.0") as registry:
        spec = LaunchSpec(
            command="npx",
            args=["-y", f"--registry={registry.url}", "mcp-setup-bench-pkg@1.0.0"],
            package_type="npm",
            identifier="mcp-setup-bench-pkg",
            version="1.0.0",
            runner="npx",
        )

        async def once(kind: str, n: int) -> float:
            home = data / f"{kind}-{n}" / "home"  # a cold npm cache of its own
            home.mkdir(parents=True)
            env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
            sandbox = Sandbox(kind, hide=(data,), user_home=home, host_env=env)  # type: ignore[arg-type]
            if kind != "off" and sandbox.mechanism != kind:
                raise RuntimeError(sandbox.why)
            fetcher = Fetcher(host_env=env, workdir=data / "scratch", sandbox=sandbox)
            t0 = time.perf_counter()
            state = await fetcher.fetch(spec)
            elapsed = time.perf_counter() - t0
            await fetcher.aclose()
            assert state is not None and state.ok, (kind, state.tail if state else None)
            return elapsed

        try:
            for kind in kinds:  # warm-up
                await once(kind, -1)
        except RuntimeError as exc:
            return {"unavailable": str(exc)}
        for i in range(rounds):
            for kind in kinds[i % 2 :] + kinds[: i % 2]:
                times[kind].append(await once(kind, i))
    out: dict[str, Any] = {"times": {k: summary(v) for k, v in times.items()}, "rounds": rounds}
    out["ratio"] = median(b / o for b, o in zip(times["bwrap"], times["off"], strict=True))
    out["added_s"] = median(b - o for b, o in zip(times["bwrap"], times["off"], strict=True))
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    root = Root("netns")
    out: dict[str, Any] = {"section": "netns"}
    try:
        out["start"] = await measure_start(root, args.rounds)
        out["request"] = await asyncio.to_thread(measure_request, root, args.request_rounds)
        out["download"] = await measure_download(root, args.download_rounds)
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--request-rounds", type=int, default=100)
    parser.add_argument("--download-rounds", type=int, default=10)
    emit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
