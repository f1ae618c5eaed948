"""Which mechanism restricts a sandboxed server's network, and why, by the sandbox's mechanism."""

from __future__ import annotations

from setup_agent.launch.landlock import abi_version
from setup_agent.launch.net_isolation import landlock_network, network_isolation
from setup_agent.launch.sandbox import Sandbox


def test_bubblewrap_gives_each_server_a_network_namespace_of_its_own() -> None:
    found = network_isolation("bwrap", netns=lambda: 4026531833)
    assert found.mechanism == "bwrap-netns" and "namespace of its own" in found.why
    assert found.words == "Network: only through mcp-setup, to the destinations you allow."


def test_a_host_that_hides_network_namespaces_says_the_network_is_not_restricted() -> None:
    def hidden() -> int:
        raise PermissionError(13, "Permission denied")

    found = network_isolation("bwrap", netns=hidden)
    assert found.mechanism == "none" and "Permission denied" in found.why


def test_landlock_restricts_tcp_from_abi_4_and_says_what_it_does_not_cover() -> None:
    six = network_isolation("landlock", landlock_abi=lambda: 6)
    assert six.mechanism == "landlock-net"
    assert "UDP not restricted" in six.why and "abstract unix sockets scoped" in six.why
    assert "not restricted on this system" in six.words
    four = network_isolation("landlock", landlock_abi=lambda: 4)
    assert four.mechanism == "landlock-net" and "not scoped (ABI 6)" in four.why
    three = network_isolation("landlock", landlock_abi=lambda: 3)
    assert (three.mechanism, three.why) == ("none", "Landlock ABI 3 has no TCP rules (ABI 4, Linux 6.7, is needed)")


def test_no_sandbox_means_no_network_restriction_said_plainly() -> None:
    found = network_isolation("none")
    assert found.mechanism == "none" and found.words == "Network: not restricted on this system."


def test_on_this_machine_the_sandboxs_mechanism_brings_its_network_one() -> None:
    sandbox = Sandbox("auto")
    found = network_isolation(sandbox.mechanism)
    expected = {"bwrap": "bwrap-netns", "landlock": "landlock-net" if abi_version() >= 4 else "none"}
    assert found.mechanism == expected.get(sandbox.mechanism, "none"), (sandbox.why, found.why)


def test_the_landlock_fallback_gets_the_rules_and_the_proxy_variables_for_its_port() -> None:
    rules, env = landlock_network(41234)
    assert rules == {"connect_ports": [41234]}
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://127.0.0.1:41234"
    assert env["NODE_USE_ENV_PROXY"] == "1" and env["npm_config_proxy"] == "http://127.0.0.1:41234"
