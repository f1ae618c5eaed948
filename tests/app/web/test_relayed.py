"""The page as the client of a tool it runs (app/web/relayed.py): an installed server's form
during that call reaches the tab as the server's own request (its name, slug, its words without
mcp-setup's label), the person's answer goes back through the guard and the redactor, and what
the page cannot answer (sampling) is refused. A real stub process (tests/stub_server/asking.py)
behind a real store, guard and gateway; the tab is the events the caller emits."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.web.relayed import PageCaller, RelayedRequests
from setup_agent.errors import InvalidInput
from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.relay_rules import RelayRules
from setup_agent.gateway.router import Gateway
from setup_agent.launch import LaunchSpec
from setup_agent.secrets.guard import GuessGuard
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.paths import STUB_DIR
from tests.helpers.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

ASK = "asking__ask"
FORM = {"type": "object", "properties": {"colour": {"type": "string", "title": "Favourite colour"}}}


class World:
    def __init__(self, gateway: Gateway, guard: GuessGuard, record: Path) -> None:
        self.gateway, self.guard, self.record = gateway, guard, record

    def received(self) -> str:
        return self.record.read_text(encoding="utf-8") if self.record.exists() else ""


@pytest.fixture
async def world(tmp_path: Path, canary: str) -> AsyncIterator[World]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    guard = GuessGuard(redactor)
    rules = RelayRules(redactor, check=guard.check, holds_secret=guard.holds_secret)
    manager = ConnectionManager(
        store, redactor, install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(15), relay_rules=rules
    )
    record = tmp_path / "received.jsonl"
    store.servers.install(  # another server, whose stored secret the person might type by mistake
        qualified_name="io.test/victim",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=LaunchSpec(command=sys.executable, args=["-c", "pass"]).model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={"VICTIM_TOKEN": (canary, True)},
        title="Victim",
        tools=[{"name": "noop", "inputSchema": {"type": "object"}}],
    )
    launch = LaunchSpec(command=sys.executable, args=[str(STUB_DIR / "asking.py")], env={"ASKING_RECORD": str(record)})
    asking = store.servers.install(
        qualified_name="io.test/asking",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=launch.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
        title="Asking",
        tools=None,
    )
    gateway = Gateway(store, manager, redactor, eager=False, poll_interval=0.1, check_arguments=guard.check)
    changed = anyio.Event()

    async def heard() -> None:
        changed.set()

    gateway.add_listener(heard)
    manager.add_status_listener(lambda _status: changed.set())
    await gateway.start()
    with anyio.fail_after(scaled(20)):
        while (
            ASK not in {t["name"] for t in gateway.catalog.wire_tools()}
            or len(getattr(manager.connected_server(asking.server_id), "tools", ())) < 2
        ):
            await changed.wait()
            changed = anyio.Event()
    yield World(gateway, guard, record)
    await gateway.aclose()
    await manager.aclose()
    store.close()


class Tab:
    """A tab that answers each request it is shown with ``answer``."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.shown: list[dict[str, Any]] = []
        self.requests = RelayedRequests()

    def emit(self, event: dict[str, Any]) -> None:
        self.shown.append(event)
        if event["type"] == "relayed_request":
            asyncio.get_running_loop().call_soon(self.requests.answer, event["request_id"], self.answer)

    def caller(self) -> PageCaller:
        return PageCaller(self.requests, self.emit)


async def _ask(world: World, tab: Tab, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(scaled(30)):
        result = await world.gateway.call(
            ASK, {"method": method, "params": params}, session="user:web", caller=tab.caller()
        )
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])


async def test_a_servers_form_reaches_the_tab_as_the_servers_own_request_and_its_answer_goes_back(
    world: World,
) -> None:
    tab = Tab({"action": "accept", "content": {"colour": "blue"}})
    answer = await _ask(world, tab, "elicitation/create", {"message": "Which colour?", "requestedSchema": FORM})
    assert answer["result"] == {"action": "accept", "content": {"colour": "blue"}}
    shown, done = tab.shown
    assert shown["origin"] == {"slug": "asking", "title": "Asking", "server": "io.test/asking"}
    assert shown["message"] == "Which colour?"  # the frame says who asks: no label in its words
    assert shown["fields"] == [{"name": "colour", "type": "string", "required": False, "title": "Favourite colour"}]
    assert done == {"type": "relayed_done", "request_id": shown["request_id"]}


async def test_a_page_to_open_reaches_the_tab_with_its_address_and_the_servers_own_words(world: World) -> None:
    tab = Tab({"action": "accept"})
    params = {"mode": "url", "message": "Sign in", "url": "https://auth.example.com/x", "elicitationId": "e-1"}
    answer = await _ask(world, tab, "elicitation/create", params)
    assert answer["result"] == {"action": "accept"}
    shown = tab.shown[0]
    assert (shown["mode"], shown["url"], shown["message"]) == ("url", "https://auth.example.com/x", "Sign in")
    assert shown["origin"]["title"] == "Asking" and "fields" not in shown


async def test_another_servers_stored_secret_typed_in_the_tab_never_reaches_the_server(
    world: World, canary: str
) -> None:
    tab = Tab({"action": "accept", "content": {"colour": f"oops {canary}"}})
    answer = await _ask(world, tab, "elicitation/create", {"message": "Anything?", "requestedSchema": FORM})
    assert "did not pass the answer on" in answer["error"]["message"]
    assert [(i.principal, i.refusals) for i in world.guard.incidents()] == [("user:web", 1)]
    assert canary not in world.received() and "Anything?" in world.received()
    assert canary not in json.dumps(tab.shown)


async def test_the_page_answers_no_sampling_and_is_never_asked(world: World) -> None:
    tab = Tab({"action": "accept"})
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5}
    answer = await _ask(world, tab, "sampling/createMessage", params)
    assert "no client that can answer" in answer["error"]["message"] and tab.shown == []


async def test_a_request_nobody_answers_in_the_tab_is_cancelled_after_its_wait_and_the_tab_told(
    world: World,
) -> None:
    shown: list[dict[str, Any]] = []  # a tab that never answers (closed)
    caller = PageCaller(RelayedRequests(), shown.append, wait_seconds=0.2)
    with anyio.fail_after(scaled(30)):
        result = await world.gateway.call(
            ASK, {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": FORM}}, caller=caller
        )
    assert json.loads(result["content"][0]["text"])["result"] == {"action": "cancel"}
    assert [e["type"] for e in shown] == ["relayed_request", "relayed_done"]


async def test_an_answer_holding_a_field_the_form_did_not_ask_for_or_of_another_type_is_refused() -> None:
    requests = RelayedRequests()
    fields = [{"name": "age", "type": "integer", "required": True}]
    request_id, future = requests.open({"mode": "form", "fields": fields})
    for content in ({"age": 3, "token": "x"}, {"age": "three"}, {}):
        with pytest.raises(InvalidInput):
            requests.answer(request_id, {"action": "accept", "content": content})
    with pytest.raises(InvalidInput):
        requests.answer(request_id, {"action": "maybe"})
    assert not future.done()
    assert requests.answer(request_id, {"action": "accept", "content": {"age": 3}}) is True
    assert future.result() == {"action": "accept", "content": {"age": 3}}
    assert requests.answer("rel_unknown", {"action": "cancel"}) is False
