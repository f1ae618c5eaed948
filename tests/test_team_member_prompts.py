"""A member's prompt for their own key on any replica (#28, between parts A and B): two ``serve``
replicas (real subprocesses) on one throwaway PostgreSQL behind Debian's nginx (round-robin), two
member tokens, the stub bundle reporting the sha256 of the key it was started with (``key_hash``).

A member's first call on one replica gets the one-time link; the link is opened and answered on
the other replica, which stores the value as that member's (encrypted); the next calls, on either
replica, run with it. ``my_keys.set`` (rotation) works the same way, and a revoked member's
prompt answered on the other replica stores nothing. The planted values are in no table in
clear, no replica's or nginx's log and no answer."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from setup_agent.store import PendingApprovals
from setup_agent.store.database import Store
from tests.browser.serve import STUB
from tests.team_balancer import PUBLIC_HOST, REPLICA_HOSTS, Client, nginx_balancer, nginx_binary
from tests.test_member_keys import KEY_HASH, member_catalog, pending_link, sha
from tests.test_team_replicas import Team, answer_on_the_page
from tests.test_team_shared_state import every_cell
from tests.timeouts import scaled

pytestmark = pytest.mark.skipif(
    nginx_binary() is None and os.environ.get("CI") != "true",
    reason="nginx is not installed (scripts/test.sh installs it)",
)


@pytest.fixture
def team(tmp_path: Path, postgres_url: str, canary: str) -> Iterator[Team]:
    team = Team(tmp_path, postgres_url, canary)
    team.env["MCP_SETUP_CATALOG_DIR"] = str(member_catalog(tmp_path / "member-catalog"))
    team.env["MCP_SETUP_CONSENT"] = "never-ask"
    try:
        yield team
    finally:
        team.stop()


def call(client: Client, step: str, replica: str) -> dict[str, Any]:
    """The member's ``tools/call`` of the stub's ``key_hash`` on ``replica`` (session-less ``/mcp``)."""
    client.steer(replica)
    answer = client.mcp(step, "tools/call", {"name": "stub__key_hash", "arguments": {}})
    assert client.last_replica() == replica, client.trail[-1]
    return answer["result"]


class AnswerOn:
    """A member's client that takes URL elicitation: it answers the link on the balancer, steered to ``replica``."""

    def __init__(self, client: Client, replica: str, value: str) -> None:
        self.client, self.replica, self.value, self.urls = client, replica, value, []

    async def __call__(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        self.urls.append(params.url)
        await anyio.to_thread.run_sync(answer_on_the_page, self.client, params.url, self.value, self.replica)
        return types.ElicitResult(action="accept")


def call_in_session(host: str, port: int, token: str, answer: AnswerOn) -> dict[str, Any]:
    """A ``tools/call`` in an MCP session straight to one replica (``host``), taking URL elicitation."""

    async def talk() -> dict[str, Any]:
        with anyio.fail_after(scaled(90)):
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}", "Host": f"{PUBLIC_HOST}:{port}"}, timeout=scaled(60)
            )
            transport = streamable_http_client(f"http://{host}:{port}/mcp", http_client=http)
            async with http, McpClient(transport, mode="legacy", elicitation_callback=answer) as client:
                result = await client.call_tool("stub__key_hash", {})
                return result.model_dump(mode="json", by_alias=True)

    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(talk)


def started_with(result: dict[str, Any]) -> str:
    assert not result.get("isError"), result
    match = KEY_HASH.search(result["content"][0]["text"])
    assert match, result
    return match.group(1)


def test_a_members_link_from_one_replica_is_answered_on_the_other_and_their_calls_on_both_use_their_own_value(
    team: Team, canary: str
) -> None:
    alice_token = team.cli("token", "create", "alice")
    bob_token = team.cli("token", "create", "bob")
    carol_token = team.cli("token", "create", "carol")
    admin_token = team.cli("token", "create", "boss", "--admin")
    shared, bob_value, rotated, late, carol_value = (
        f"{canary}-{n}" for n in ("shared", "bob", "rotated", "late", "carol")
    )
    a, b = team.start()
    with nginx_balancer(team.port) as nginx:
        admin = Client(team.port, member=admin_token, admin=admin_token)
        alice = Client(team.port, member=alice_token, admin=admin_token)
        bob = Client(team.port, member=bob_token, admin=admin_token)
        carol = Client(team.port, member=carol_token, admin=admin_token)
        try:
            admin.steer(a)
            asked = admin.rpc(
                "request the shared key",
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "key", "server": STUB},
            )
            answer_on_the_page(admin, asked["result"]["url"], shared, b)
            admin.steer(a)
            installed = admin.rpc(
                "install",
                "mcp_setup_install_and_connect",
                {
                    "qualified_name": STUB,
                    "env_refs": {"STUB_API_KEY": asked["result"]["ref"]},
                    "per_member": ["STUB_API_KEY"],
                },
            )
            assert installed["result"]["status"] == "connected", installed
            server_id = installed["result"]["server_id"]

            link = pending_link(call(alice, "alice's first call", a))  # asked on A ...
            with Store(team.database_url, team.vault) as store:  # ... listed on no user page or terminal
                assert [i.kind for i in PendingApprovals(store, owner="test:0").pending()] == []
            answer_on_the_page(alice, link, canary, b)  # ... answered on B, stored there as hers
            assert started_with(call(alice, "alice on B", b)) == sha(canary)
            assert started_with(call(alice, "alice on A", a)) == sha(canary)

            link = pending_link(call(bob, "bob's first call", b))
            answer_on_the_page(bob, link, bob_value, a)
            assert started_with(call(bob, "bob on A", a)) == sha(bob_value)
            assert started_with(call(bob, "bob on B", b)) == sha(bob_value)
            assert started_with(call(alice, "alice again on B", b)) == sha(canary)  # never the other's

            alice.steer(b)  # rotation: the link from B, answered on A, used on both
            rotation = alice.rpc("alice rotates", "my_keys.set", {"server_id": server_id, "key_name": "STUB_API_KEY"})
            assert "url" in rotation["result"], rotation
            answer_on_the_page(alice, rotation["result"]["url"], rotated, a)
            assert started_with(call(alice, "alice rotated on B", b)) == sha(rotated)
            assert started_with(call(alice, "alice rotated on A", a)) == sha(rotated)

            asker = AnswerOn(carol, b, carol_value)  # asked within her call on A, answered on B: the call goes on
            within = call_in_session(REPLICA_HOSTS[0], team.port, carol_token, asker)
            assert len(asker.urls) == 1 and started_with(within) == sha(carol_value)
            carol.answers.append(repr(within))
            assert started_with(call(carol, "carol on B", b)) == sha(carol_value)

            bob.steer(a)  # a revoked member's prompt, answered on the other replica, stores nothing
            late_link = bob.rpc("bob rotates", "my_keys.set", {"server_id": server_id, "key_name": "STUB_API_KEY"})
            url = late_link["result"]["url"]
            team.cli("token", "revoke", "bob")
            parts = urlsplit(url)
            key = re.search(r"t=([^&]+)", parts.query)
            assert key is not None
            bob.steer(b)
            refused = bob.http.post(
                parts.path,
                data={"t": key.group(1), "value": late, "action": "submit"},
                headers={"Origin": f"http://{bob.host}"},
            )
            bob._record("bob's late answer", refused)
            assert bob.last_replica() == b
            assert "saved" not in refused.text, refused.text[:300]
            with Store(team.database_url, team.vault) as store:
                assert store.values.member_keys_set("bob") == {}
                assert store.values.member_keys_set("alice") == {server_id: ["STUB_API_KEY"]}
        finally:
            for client in (admin, alice, bob, carol):
                client.close()
        nginx_log = nginx.log_text()
    planted = (canary, shared, bob_value, rotated, late, carol_value)
    logs = team.logs()
    answers = [text for c in (admin, alice, bob, carol) for text in c.answers]
    for value in planted:
        assert value not in logs and value not in nginx_log
        assert not [text for text in answers if value in text]
    assert "Traceback" not in logs
    with Store(team.database_url, team.vault) as store:
        cells = every_cell(store)
    for value in planted:
        assert value not in cells
