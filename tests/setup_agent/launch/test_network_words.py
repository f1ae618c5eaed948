"""A server's network in words (setup_agent/launch/net_words.py) and what `mcp-setup allow`
stores: the consent, `show` and `doctor` say the policy, the mechanism and the destinations a
test used, and say plainly where nothing restricts the network. After install, "only these"
(the destinations its test connected to) and back to the public internet are one step each,
keeping what the person allowed."""

from __future__ import annotations

import pytest

from setup_agent.errors import InvalidInput
from setup_agent.launch import (
    NetPolicy,
    NetRecord,
    after_test_words,
    allowing,
    holding_to_tested,
    network_state,
    network_words,
)
from setup_agent.launch.net_policy import Verdict


def _spec(**extra: object) -> dict[str, object]:
    return {"command": "npx", "runner": "npx", "transport": "stdio", **extra}


def test_the_default_policy_in_words_names_the_mechanism_and_what_is_refused() -> None:
    assert network_words(_spec(), "bwrap-netns") == [
        "Network: its own, out only through mcp-setup's proxy (bwrap-netns).",
        "Network policy: the public internet; nothing on this computer or your local network.",
    ]
    assert network_words(_spec(), "none")[0] == "Network: not restricted on this system (no network sandbox here)."
    assert "DNS and UDP are not restricted" in network_words(_spec(), "landlock-net")[0]


def test_a_strict_server_lists_its_destinations_what_was_allowed_and_what_its_test_used() -> None:
    net = {**NetPolicy.strict(["api.notion.com:443"], ["127.0.0.1:5432"]).to_dict(), "seen": ["api.notion.com:443"]}
    assert network_words(_spec(sandbox_net=net), "bwrap-netns")[1:] == [
        "Network policy: only these: api.notion.com:443.",
        "You allowed: 127.0.0.1:5432.",
        "During its test it connected to api.notion.com:443.",
    ]


def test_no_network_a_container_a_remote_and_an_http_package_say_what_holds_instead() -> None:
    assert network_words(_spec(sandbox_network=False), "bwrap-netns") == ["Network: none."]
    assert network_words({"command": "docker", "runner": "docker"}, "bwrap-netns") == [
        "Network: its container's (Docker decides it)."
    ]
    assert network_words({"url": "https://mcp.example.com/mcp", "transport": "streamable-http"}, "bwrap-netns") == []
    served = network_words(_spec(transport="streamable-http", url="http://127.0.0.1:8080/mcp"), "bwrap-netns")
    assert served[0].startswith("Network: not restricted (it serves HTTP on this computer")


def test_a_test_says_where_it_connected_and_what_was_refused() -> None:
    record = NetRecord()
    reached = record.note("api.notion.com:443", Verdict(True, "public"))
    record.outcome(reached, True)
    record.note("127.0.0.1:6379", Verdict(False, "loopback"))
    assert after_test_words(record.attempts()) == [
        "During the test it connected to api.notion.com:443.",
        "mcp-setup refused it: 127.0.0.1:6379.",
    ]
    assert after_test_words([]) == ["During the test it connected to nothing on the network."]


def test_allowing_grants_the_destination_and_adds_it_to_a_strict_servers_list_keeping_what_its_test_saw() -> None:
    assert allowing(_spec(), "127.0.0.1:5432") == {"mode": "default", "granted": ["127.0.0.1:5432"], "only": []}
    strict = {**NetPolicy.strict(["api.notion.com:443"]).to_dict(), "seen": ["api.notion.com:443"]}
    after = allowing(_spec(sandbox_net=strict), "localhost:8080")
    assert after["mode"] == "strict" and after["only"] == ["api.notion.com:443", "localhost:8080"]
    assert after["granted"] == ["localhost:8080"] and after["seen"] == ["api.notion.com:443"]


def test_doctor_says_which_mechanism_holds_the_network_or_plainly_that_nothing_does(tmp_path: object) -> None:
    from app.cli.doctor import _network_check
    from setup_agent.launch import Sandbox

    off = _network_check(Sandbox("off"))
    assert off["ok"] and off["detail"].startswith("not restricted on this system")
    mac = _network_check(Sandbox("auto", platform="darwin"))
    assert mac["detail"].startswith("not restricted on this system")
    here = Sandbox("auto")
    if here.network_isolation().mechanism != "none":
        assert _network_check(here)["detail"].startswith(here.network_isolation().mechanism)


def test_only_these_holds_an_installed_server_to_what_its_test_reached_keeping_what_was_allowed() -> None:
    net = {**NetPolicy.default(["127.0.0.1:5432"]).to_dict(), "seen": ["api.notion.com:443"]}
    state = network_state(_spec(sandbox_net=net))
    assert state is not None and state.mode == "default" and state.may_hold_to_tested
    assert state.tested == ("api.notion.com:443",) and state.allowed == ("127.0.0.1:5432",)
    held = holding_to_tested(_spec(sandbox_net=net), True, "Notion")
    assert held == {
        "mode": "strict",
        "only": ["api.notion.com:443"],
        "granted": ["127.0.0.1:5432"],
        "seen": ["api.notion.com:443"],
    }
    now = network_state(_spec(sandbox_net=held))
    assert now is not None and now.mode == "strict" and not now.may_hold_to_tested
    policy = NetPolicy.from_dict(held)
    assert policy.check("other.example.com", 443).allowed is False  # refused before any lookup
    assert policy.check("other.example.com", 443).reason == "not-listed"


def test_back_to_the_public_internet_keeps_what_was_allowed_and_what_the_test_saw() -> None:
    held = {**NetPolicy.strict(["api.notion.com:443", "localhost:8080"], ["localhost:8080"]).to_dict()}
    held["seen"] = ["api.notion.com:443"]
    back = holding_to_tested(_spec(sandbox_net=held), False, "Notion")
    assert back == {"mode": "default", "only": [], "granted": ["localhost:8080"], "seen": ["api.notion.com:443"]}
    state = network_state(_spec(sandbox_net=back))
    assert state is not None and state.may_hold_to_tested and state.public()["mode"] == "default"


def test_only_these_is_refused_in_words_where_there_is_no_list_or_no_network_to_hold() -> None:
    with pytest.raises(InvalidInput, match="During its test Notion connected to nothing on the network"):
        holding_to_tested(_spec(sandbox_net={"mode": "default", "seen": []}), True, "Notion")
    with pytest.raises(InvalidInput, match="mcp-setup did not see where Notion connected during a test"):
        holding_to_tested(_spec(), True, "Notion")
    with pytest.raises(InvalidInput, match="Notion has no network"):
        holding_to_tested(_spec(sandbox_network=False), True, "Notion")
    remote = {"url": "https://mcp.example.com/mcp", "transport": "streamable-http"}
    with pytest.raises(InvalidInput, match="not held by mcp-setup's proxy"):
        holding_to_tested(remote, False, "Notion")
    assert network_state(remote) is None and network_state({"command": "docker", "runner": "docker"}) is None
    none = network_state(_spec(sandbox_network=False, sandbox_net={"mode": "default", "seen": ["a.example:443"]}))
    assert none is not None and none.mode == "none" and not none.may_hold_to_tested


def test_where_nothing_holds_the_network_the_state_says_so_and_the_policy_is_kept() -> None:
    net = {"mode": "default", "seen": ["api.notion.com:443"]}
    for mechanism in ("bwrap-netns", "landlock-net"):
        held = network_state(_spec(sandbox_net=net), mechanism)
        assert held is not None and held.held, mechanism
    unheld = network_state(_spec(sandbox_net=net), "none")
    assert unheld is not None and not unheld.held and unheld.may_hold_to_tested
