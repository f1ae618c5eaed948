"""Landlock's TCP rules, the network fallback where bubblewrap cannot run: a server started by
the Landlock launcher with :func:`network_rules` connects only to the proxy's port.

Real launcher (``python -I -S landlock.py RULES COMMAND``), real loopback listeners. The same
"server" without the rules reaches the other port, which proves the test can fail.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from setup_agent.launch import landlock
from setup_agent.launch.landlock import NET_ABI, abi_version, network_rules
from tests.timeouts import scaled

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
