"""A team member's own session of a server relays as the shared one does: the member's answer to
the server's form passes the guard (another server's stored secret refused and counted against
the member), and the person's sampling setting reaches a member's live session without a restart.
A real stub process (tests/stub_server/asking.py) with a per-member key, a real store and guard."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.members import MemberSessions
from setup_agent.gateway.relay_rules import RelayRules
from setup_agent.secrets.guard import GuessGuard
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from setup_agent.store.records import InstalledServer
from tests.helpers.asking_gateway import install_asking, install_victim
from tests.helpers.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

FORM = {"type": "object", "properties": {"colour": {"type": "string"}}}
TEXT = {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5}


class Member:
    """Alice's client: answers a form with ``said`` and any sampling request."""

    principal = "token:alice"

    def __init__(self, said: str) -> None:
        self.said = said
        self.sampled = 0

    def can(self, capability: str) -> bool:
        return capability in ("elicitation.form", "sampling")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "sampling/createMessage":
            self.sampled += 1
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text="ok"), model="m"
            )
        return types.ElicitResult(action="accept", content={"colour": self.said})

    async def log(self, params: dict[str, Any]) -> None:
        pass


class Team:
    def __init__(self, store: Store, members: MemberSessions, guard: GuessGuard, server: InstalledServer) -> None:
        self.store, self.members, self.guard, self.server = store, members, guard, server

    async def ask(self, member: Member, method: str, params: dict[str, Any]) -> dict[str, Any]:
        server = self.store.servers.get(self.server.server_id)
        assert server is not None
        manager = await self.members.connections_for(server, "alice", member)
        assert isinstance(manager, ConnectionManager), manager
        status = await manager.ensure_connected(server, scaled(20))
        assert status.status == "connected", status
        with anyio.fail_after(scaled(30)):
            result = await manager.call_tool(
                server.server_id, "ask", {"method": method, "params": params}, caller=member
            )
        return json.loads(result["content"][0]["text"])


@pytest.fixture
async def team(tmp_path: Path, canary: str) -> AsyncIterator[Team]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    guard = GuessGuard(redactor)
    rules = RelayRules(redactor, check=guard.check, holds_secret=guard.holds_secret)
    shared = ConnectionManager(store, redactor, install_root=tmp_path / "servers", backoff=(), relay_rules=rules)
    install_victim(store, canary)
    asking = install_asking(
        store,
        {"OWN": "${OWN_KEY}"},
        stored={"OWN_KEY": ("shared-value-1234", True)},
        tools=[{"name": "ask", "inputSchema": {"type": "object"}}],
    )
    store.values.set_member_keys(asking.server_id, ["OWN_KEY"], actor="user:terminal")
    store.values.set_member_value(asking.server_id, "alice", "OWN_KEY", "alice-own-value-5678")
    await shared.learn_stored_secrets()
    members = MemberSessions(shared, root=tmp_path / "members")
    yield Team(store, members, guard, asking)
    await members.aclose()
    await shared.aclose()
    store.close()


async def test_a_members_answer_holding_another_servers_secret_is_refused_and_counted_against_them(
    team: Team, canary: str
) -> None:
    answer = await team.ask(Member(f"it is {canary}"), "elicitation/create", {"message": "?", "requestedSchema": FORM})
    assert "did not pass the answer on" in answer["error"]["message"]
    assert [(i.principal, i.refusals) for i in team.guard.incidents()] == [("token:alice", 1)]


async def test_the_persons_sampling_setting_reaches_a_members_live_session(team: Team) -> None:
    alice = Member("blue")
    assert "result" in await team.ask(alice, "sampling/createMessage", TEXT)
    team.store.servers.set_sampling(team.server.server_id, "no", actor="user:web")
    await team.members.sync(team.store.servers.list())
    refused = await team.ask(alice, "sampling/createMessage", TEXT)
    assert "mcp-setup allow asking --sampling text" in refused["error"]["message"]
    assert alice.sampled == 1
