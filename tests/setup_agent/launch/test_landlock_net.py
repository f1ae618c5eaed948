"""Landlock's TCP rules, the network fallback where bubblewrap cannot run: a server started by
the Landlock launcher with :func:`network_rules` connects only to the proxy's port.

Real launcher (``python -I -S landlock.py RULES COMMAND``), real loopback listeners. The same
"server" without the rules reaches the other port, which proves the test can fail.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from setup_agent.launch import landlock
from setup_agent.launch.landlock import NET_ABI, abi_version, network_rules
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.skipif(
    abi_version() < NET_ABI, reason=f"this kernel has no Landlock TCP rules (ABI {NET_ABI}, Linux 6.7)"
)

TRY = """
import json, socket, sys
out = {}
for name, port in json.loads(sys.argv[1]).items():
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        out[name] = "connected"
    except OSError as exc:
        out[name] = f"failed: {exc.strerror}"
try:
    socket.create_server(("127.0.0.1", 0)).close()
    out["bind"] = "bound"
except OSError as exc:
    out["bind"] = f"failed: {exc.strerror}"
print(json.dumps(out))
"""


@pytest.fixture
def ports() -> Iterator[dict[str, int]]:
    """Two loopback listeners on the host: the proxy's and any other service's."""
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    try:
        yield {"proxy": listeners[0].getsockname()[1], "other": listeners[1].getsockname()[1]}
    finally:
        for listener in listeners:
            listener.close()


def launch(rules: dict, ports: dict[str, int]) -> dict[str, str]:
    command = [sys.executable, "-I", "-S", "-c", TRY, json.dumps(ports)]
    done = subprocess.run(
        [sys.executable, "-I", "-S", landlock.__file__, json.dumps(rules), *command],
        capture_output=True,
        text=True,
        timeout=scaled(30),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_server_restricted_to_the_proxys_port_reaches_it_and_no_other_loopback_port(ports: dict[str, int]) -> None:
    got = launch({"read": ["/"], **network_rules([ports["proxy"]])}, ports)
    assert got["proxy"] == "connected"
    assert got["other"] == "failed: Permission denied"
    assert got["bind"] == "bound"  # bind is not restricted unless bind_ports is given


def test_bind_ports_restrict_what_it_may_listen_on(ports: dict[str, int]) -> None:
    got = launch({"read": ["/"], **network_rules([ports["proxy"]], bind_ports=[])}, ports)
    assert got["proxy"] == "connected" and got["bind"].startswith("failed: Permission denied")


def test_without_the_network_rules_the_same_server_reaches_the_other_port_which_proves_the_test_can_fail(
    ports: dict[str, int],
) -> None:
    got = launch({"read": ["/"]}, ports)
    assert got == {"proxy": "connected", "other": "connected", "bind": "bound"}


def test_a_kernel_without_tcp_rules_stops_the_launch_instead_of_starting_it_unrestricted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(landlock, "abi_version", lambda: 3)
    with pytest.raises(OSError, match="Landlock ABI 3 has no TCP rules"):
        landlock.apply({"read": ["/"], **network_rules([8080])})  # refused before any restriction


def test_network_rules_name_each_port_once_in_order() -> None:
    assert network_rules([443, 80, 443]) == {"connect_ports": [80, 443]}
    assert network_rules([3128], bind_ports=[8080, 8080]) == {"connect_ports": [3128], "bind_ports": [8080]}


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_under_landlock_a_real_client_reaches_the_internet_only_through_the_proxy(canary: str) -> None:
    """The fallback whole: the proxy on the host's loopback, the server held to its port, the
    variables from :func:`landlock_network`. curl fetches a public-looking name through the proxy
    (a test resolver and connector keep it on loopback) and cannot reach the origin directly."""
    from setup_agent.launch.net_isolation import landlock_network
    from setup_agent.launch.net_policy import NetPolicy
    from setup_agent.launch.net_proxy import NetProxy
    from setup_agent.launch.net_record import NetRecord

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = f"origin {canary}".encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    origin = await asyncio.start_server(answer, "127.0.0.1", 0)
    origin_port = origin.sockets[0].getsockname()[1]

    class Table:
        async def resolve(self, host: str, port: int) -> list:
            return [ipaddress.ip_address("93.184.215.14")]

    class ToLoopback:
        async def connect(self, address: object, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection("127.0.0.1", origin_port)

    proxy = NetProxy(resolver=Table(), connector=ToLoopback())
    record = NetRecord()
    listener = await proxy.serve(socket.create_server(("127.0.0.1", 0)), NetPolicy.default(), record)
    rules, env = landlock_network(listener.port)
    try:

        async def curl(*args: str) -> tuple[int, str]:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                landlock.__file__,
                json.dumps({"read": ["/"], **rules}),
                "/usr/bin/curl",
                "-sS",
                "--max-time",
                str(scaled(20)),
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env={"PATH": "/usr/bin:/bin", **env},
            )
            async with asyncio.timeout(scaled(30)):
                out, _ = await process.communicate()
            return process.returncode or 0, out.decode()

        assert await curl("http://api.example.test/x") == (0, f"origin {canary}")
        code, said = await curl("--noproxy", "*", f"http://127.0.0.1:{origin_port}/")
        assert code == 7 and canary not in said, said  # couldn't connect: Landlock refused it
        assert [(a.destination, a.reached) for a in record.attempts()] == [("api.example.test:80", True)]
    finally:
        await proxy.aclose()
        origin.close()
