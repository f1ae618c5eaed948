"""The page as the client of a tool it runs (app/web/relayed.py): an installed server's form
during that call reaches the tab as the server's own request (its name, slug, its words without
mcp-setup's label), the person's answer goes back through the guard and the redactor, and what
the page cannot answer (sampling) is refused. A real stub process (tests/stub_server/asking.py)
behind a real store, guard and gateway; the tab is the events the caller emits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.web.relayed import PageCaller, RelayedRequests
from setup_agent.errors import InvalidInput
from tests.helpers.asking_gateway import ASK, AskingGateway, asking_gateway
from tests.helpers.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

FORM = {"type": "object", "properties": {"colour": {"type": "string", "title": "Favourite colour"}}}


World = AskingGateway  # the asking server behind a gateway, guarded as the page's calls are


@pytest.fixture
async def world(tmp_path: Path, canary: str) -> AsyncIterator[World]:
    async with asking_gateway(tmp_path, canary) as asking:
        yield asking


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
