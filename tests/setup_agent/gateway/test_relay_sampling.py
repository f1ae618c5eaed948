"""An installed server's sampling requests pass the gateway only as far as the person allowed
them for that server: not at all, without tools (the default) or with tools. A real stub process
(tests/stub_server/asking.py) behind a real store and gateway, the MCP face served in process to
an SDK client that would answer any sampling request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from app.mcp.face import McpFace
from setup_agent.gateway.relay_rules import ORIGIN_KEY
from setup_agent.gateway.router import Gateway
from setup_agent.store import Sampling
from tests.helpers.asking_gateway import ASK, AskingGateway, asking_gateway
from tests.helpers.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

TEXT = {"messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}], "maxTokens": 5}
WITH_TOOLS = {**TEXT, "tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]}


Served = AskingGateway  # the asking server installed under one sampling setting, behind a started gateway
Serve = Callable[[Sampling], Awaitable[Served]]


@pytest.fixture
async def serve(tmp_path: Path, canary: str) -> AsyncIterator[Serve]:
    async with AsyncExitStack() as opened:

        async def start(sampling: Sampling) -> Served:
            return await opened.enter_async_context(asking_gateway(tmp_path, canary, guarded=False, sampling=sampling))

        yield start


class Person:
    """An SDK client whose AI would write anything it is asked."""

    def __init__(self, said: str = "a summary") -> None:
        self.said = said
        self.sampled: list[dict[str, Any]] = []

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=self.said), model="m"
        )

    def client(self, gateway: Gateway) -> Client:
        face = McpFace(SimpleNamespace(gateway=gateway, settings=SimpleNamespace(gateway_tools="all")))
        return Client(face.server, mode="legacy", sampling_callback=self.sample)


async def _sample(client: Client, params: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(ASK, {"method": "sampling/createMessage", "params": params})
    assert not result.is_error, result
    return json.loads(result.content[0].text)


@pytest.mark.parametrize(
    ("setting", "request_", "passes"),
    [
        ("no", TEXT, False),
        ("no", WITH_TOOLS, False),
        ("text", TEXT, True),
        ("text", WITH_TOOLS, False),
        ("tools", TEXT, True),
        ("tools", WITH_TOOLS, True),
    ],
    ids=["no-text", "no-tools", "text-text", "text-tools", "tools-text", "tools-tools"],
)
async def test_a_sampling_request_reaches_the_client_only_where_the_person_allowed_it_for_that_server(
    serve: Serve, setting: Sampling, request_: dict[str, Any], passes: bool
) -> None:
    served = await serve(setting)
    person = Person()
    with anyio.fail_after(scaled(30)):
        async with person.client(served.gateway) as client:
            answer = await _sample(client, request_)
    if passes:
        assert answer["result"]["content"]["text"] == "a summary"
        (asked,) = person.sampled
        assert asked["_meta"][ORIGIN_KEY]["slug"] == "asking"
        assert ("tools" in asked) == ("tools" in request_)
        return
    assert person.sampled == []  # the person's AI was never asked
    message = answer["error"]["message"]
    wanted = "tools" if "tools" in request_ else "text"
    assert message.startswith("mcp-setup refused Asking's request to ask your AI to write text")
    assert '"May ask your AI to write text"' in message
    assert f"mcp-setup allow asking --sampling {wanted}" in message


async def test_a_changed_setting_judges_the_next_request_without_restarting_the_server(serve: Serve) -> None:
    served = await serve("text")
    person = Person()
    pid = served.manager.pid(served.server_id)
    with anyio.fail_after(scaled(30)):
        async with person.client(served.gateway) as client:
            assert "result" in await _sample(client, TEXT)
            served.store.servers.set_sampling(served.server_id, "no", actor="user:terminal")
            while served.manager.connected_server(served.server_id).sampling != "no":  # type: ignore[union-attr]
                await served.gateway.refresh()
            refused = await _sample(client, TEXT)
    assert "error" in refused and "--sampling text" in refused["error"]["message"]
    assert len(person.sampled) == 1
    assert served.manager.pid(served.server_id) == pid


async def test_another_servers_stored_secret_in_the_models_answer_never_reaches_the_server(
    serve: Serve, canary: str, tmp_path: Path
) -> None:
    served = await serve("tools")
    person = Person(said=f"the token is {canary}")
    with anyio.fail_after(scaled(30)):
        async with person.client(served.gateway) as client:
            answer = await _sample(client, {**WITH_TOOLS, "includeContext": "allServers"})
    (asked,) = person.sampled
    assert asked["includeContext"] == "none"
    assert answer["result"]["content"]["text"] == "the token is [secret:VICTIM_TOKEN]"
    received = (tmp_path / "received.jsonl").read_text(encoding="utf-8")
    assert "Summarise" in received and canary not in received
