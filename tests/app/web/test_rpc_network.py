"""``servers.network`` of ``mcp-setup serve`` (a real subprocess): the card's "Allow only these"
holds an installed server to the destinations its test connected to (stored at install), and
false lets it reach the public internet again. Only the person chooses it: a client token is
refused and nothing changes; the person's change is audited under the page's principal.
``servers.list`` gives each card its network as the call returns it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from setup_agent.launch import Sandbox
from tests.browser.serve import Served, start_serve, stop_serve
from tests.helpers.data_dir import OTHER, STUB, DataDir
from tests.helpers.timeouts import scaled

TESTED = "api.notion.com:443"
#: Whether this system holds a server's network to mcp-setup's proxy (the card says when it does not).
HELD = Sandbox("auto").network_isolation().mechanism in ("bwrap-netns", "landlock-net")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, DataDir, dict[str, str]]]:
    """``serve`` over a data dir holding the stub (its test reached ``TESTED``; 127.0.0.1:5432 allowed
    by the person) and another server whose test connected nowhere."""
    root = tmp_path_factory.mktemp("rpc-network")
    data = DataDir(root)
    ids = {
        "tested": data.install_tested(STUB, [TESTED], granted=("127.0.0.1:5432",)),
        "nowhere": data.install_tested(OTHER, []),
    }
    served = start_serve(root, data.catalog, MCP_SETUP_DATA_KEY_FILE=str(data.key))
    try:
        yield served, data, ids
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert "Traceback" not in served.stderr()


def card(served: Served, server_id: str) -> dict[str, Any]:
    servers = served.rpc("servers.list")["result"]["servers"]
    return next(s for s in servers if s["server_id"] == server_id)


def test_a_client_token_cannot_choose_where_a_server_connects_and_nothing_changes(world) -> None:
    served, data, ids = world
    before = card(served, ids["tested"])["network"]
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "servers.network",
        "params": {"server_id": ids["tested"], "only_tested": True},
    }
    token = served.client_token()
    with httpx.Client(base_url=served.base, timeout=scaled(30), trust_env=False) as http:
        answer = http.post("/rpc", json=body, headers={"Authorization": f"Bearer {token}", "Origin": served.origin})
    error = answer.json()["error"]
    assert error["data"]["code"] == "tool_not_allowed"
    assert (
        error["data"]["message"]
        == "Only the person at this computer (or an admin token) chooses where a server may connect."
    )
    assert card(served, ids["tested"])["network"] == before
    with data.store() as store:
        assert "network" not in [r.event for r in store.audit.entries(server_id=ids["tested"])]


def test_the_person_holds_a_server_to_what_its_test_reached_and_back_audited_as_the_page(world) -> None:
    served, data, ids = world
    sid = ids["tested"]
    assert card(served, sid)["network"] == {
        "mode": "default",
        "tested": [TESTED],
        "only": [],
        "allowed": ["127.0.0.1:5432"],
        "may_hold_to_tested": True,
        "held": HELD,
    }
    held = served.rpc("servers.network", {"server_id": sid, "only_tested": True})["result"]
    assert held["network"] == {
        "mode": "strict",
        "tested": [TESTED],
        "only": [TESTED],
        "allowed": ["127.0.0.1:5432"],
        "may_hold_to_tested": False,
        "held": HELD,
    }
    assert card(served, sid)["network"] == held["network"]
    back = served.rpc("servers.network", {"server_id": sid, "only_tested": False})["result"]
    assert back["network"]["mode"] == "default" and back["network"]["allowed"] == ["127.0.0.1:5432"]
    with data.store() as store:
        audited = [(r.event, r.actor) for r in store.audit.entries(server_id=sid)]
    assert audited[-2:] == [("network", "user:web"), ("network", "user:web")]


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"only_tested": True}, "During its test io.github.acme/other connected to nothing on the network"),
        ({"only_tested": "yes"}, "only_tested is required and must be true or false."),
        ({}, "only_tested is required and must be true or false."),
        ({"only_tested": True, "hosts": ["x:1"]}, "Unknown parameter(s): hosts"),
    ],
)
def test_a_choice_that_cannot_be_made_is_refused_in_words(world, params: dict[str, Any], said: str) -> None:
    served, data, ids = world
    error = served.rpc("servers.network", {"server_id": ids["nowhere"], **params})["error"]
    assert error["code"] == -32602 and error["data"]["code"] == "invalid_input"
    assert said in error["data"]["message"]
    assert card(served, ids["nowhere"])["network"]["mode"] == "default"
