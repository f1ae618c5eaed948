"""The gateway passes tools and results through as the server sent them (#29): ``execution``,
``_meta`` and ``icons`` of a tool, a result's ``_meta`` and ``resource_link``, progress; the
find/call pair for clients that never re-list; names within Claude Code's budget; an answer
the SDK cannot read said in words; a server's requests relayed to the calling client, redacted. Real stub processes behind a real store and gateway, and the
MCP face served to the SDK's client in process."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from app.mcp.face import McpFace
from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.discover import CALL_TOOL, FIND_TOOLS, find_tools
from setup_agent.gateway.relay import InFlight, relay_callbacks
from setup_agent.gateway.router import Gateway
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.setup.tool_specs import TOOL_NAMES
from setup_agent.store.catalog import MAX_TOOL_NAME, Catalog, CatalogServer
from setup_agent.store.database import Store
from tests.helpers.connections import stub_launch
from tests.helpers.gateway import start_until
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
UI_META = {"ui": {"resourceUri": "ui://stub/view"}, "com.example/flag": True}
RESULT = {
    "content": [
        {"type": "text", "text": "see the link"},
        {"type": "resource_link", "uri": "file:///stub/readme.md", "name": "readme", "mimeType": "text/markdown"},
    ],
    "structuredContent": {"count": 2},
    "_meta": {"com.example/trace": "t-1"},
    "isError": False,
}
EXTRA_TOOLS = [
    {
        "name": "app.view",  # a '.': outside the gateway's name set, mapped (stably)
        "title": "App view",
        "description": "Opens the stub's view.",
        "inputSchema": {"type": "object", "properties": {}},
        "execution": {"taskSupport": "optional"},
        "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
        "_meta": UI_META,
        "_stubResult": RESULT,
    },
    {
        "name": "broken",
        "description": "Answers something that is not a tools/call result.",
        "inputSchema": {"type": "object", "properties": {}},
        "_stubResult": {"content": "not a list", "isError": "perhaps"},
    },
]


@pytest.fixture
async def gateway(tmp_path: Path, canary: str) -> AsyncIterator[tuple[Gateway, Any]]:
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps({"extra": EXTRA_TOOLS}))
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    manager = ConnectionManager(
        store, redactor, install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(15)
    )
    server = store.servers.install(
        qualified_name="io.test/stub",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=stub_launch(canary, STUB_TOOLS_FILE=str(tools_file)),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        title="Stub",
        tools=None,
    )
    gw = Gateway(store, manager, redactor, eager=False, poll_interval=0.1)
    await start_until(  # tools never recorded: started once so that they are listed
        gw,
        lambda: (
            len(gw.catalog.tools()) >= 4 and len(getattr(manager.connected_server(server.server_id), "tools", ())) >= 4
        ),
    )
    yield gw, server
    await gw.aclose()
    await manager.aclose()
    store.close()


def _view(gw: Gateway) -> dict[str, Any]:
    (tool,) = [t for t in gw.catalog.wire_tools() if t["name"].startswith("stub__app_view")]
    return tool


async def test_a_tools_execution_meta_and_icons_pass_through_and_its_dotted_name_is_mapped_stably(gateway) -> None:
    gw, _ = gateway
    view = _view(gw)
    assert view["execution"] == {"taskSupport": "optional"}
    assert view["_meta"] == UI_META
    assert view["icons"] == [{"src": "https://example.com/icon.png", "mimeType": "image/png"}]
    assert view["title"] == "App view" and view["description"] == "[Stub] Opens the stub's view."
    assert "_stubResult" not in view  # not a field the SDK knows: dropped when the client read the list
    assert NAME_RULE.match(view["name"]) and "." not in view["name"]
    # The same name in another process: made from the slug and the tool's name alone.
    again = Catalog.build([CatalogServer("x", "io.test/stub", "stub", "Stub", True, tuple(EXTRA_TOOLS))])
    assert view["name"] in {t["name"] for t in again.wire_tools()}
    assert all(len(t["name"]) <= MAX_TOOL_NAME for t in gw.catalog.wire_tools())


async def test_a_result_comes_back_as_the_server_sent_it_with_its_meta_and_resource_link(gateway) -> None:
    gw, _ = gateway
    with anyio.fail_after(scaled(20)):
        result = await gw.call(_view(gw)["name"], {})
    assert result == RESULT


async def test_an_answer_the_sdk_cannot_read_is_a_tool_error_naming_the_server_not_a_validation_dump(gateway) -> None:
    gw, _ = gateway
    with anyio.fail_after(scaled(20)):
        result = await gw.call("stub__broken", {})
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "Stub" in text and "cannot read" in text and "broken" in text
    assert "pydantic" not in text and "validation error" not in text.lower() and "not a list" not in text


def _runtime(gw: Gateway, mode: str = "all") -> Any:
    return SimpleNamespace(gateway=gw, settings=SimpleNamespace(gateway_tools=mode))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_face_lists_the_tools_fields_to_an_sdk_client_and_passes_the_result_through(
    gateway, mode: str
) -> None:
    gw, _ = gateway
    face = McpFace(_runtime(gw))
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode=mode) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            name = _view(gw)["name"]
            listed = tools[name]
            if client.protocol_version < "2026":  # 2026-07-28 has no execution any more (tasks left the spec)
                assert listed.execution is not None and listed.execution.task_support == "optional"
            assert listed.meta == UI_META
            assert listed.icons and str(listed.icons[0].src) == "https://example.com/icon.png"
            result = await client.call_tool(name, {})
    assert result.meta["com.example/trace"] == "t-1"  # (2026-07-28 adds the serverInfo stamp)
    assert result.content[1].type == "resource_link" and str(result.content[1].uri) == "file:///stub/readme.md"
    assert result.structured_content == {"count": 2}


async def test_a_client_that_never_relists_finds_and_calls_an_installed_tool_through_the_pair(gateway) -> None:
    gw, _ = gateway
    face = McpFace(_runtime(gw, "discover"))
    with anyio.fail_after(scaled(30)):
        async with Client(face.server) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == set(TOOL_NAMES) | {FIND_TOOLS, CALL_TOOL}  # discover: no installed tool listed
            found = await client.call_tool(FIND_TOOLS, {"query": "echo text"})
            tools = found.structured_content["tools"]
            assert tools[0]["name"] == "stub__echo" and tools[0]["inputSchema"]["required"] == ["text"]
            echoed = await client.call_tool(CALL_TOOL, {"name": "stub__echo", "arguments": {"text": "via the pair"}})
            unknown = await client.call_tool(CALL_TOOL, {"name": "mcp_setup_remove", "arguments": {}})
    assert echoed.content[0].text == "via the pair" and not echoed.is_error
    assert unknown.is_error and "mcp_setup_find_tools" in unknown.content[0].text  # setup tools are not reachable


def test_find_tools_ranks_name_matches_first_and_an_empty_query_lists_everything() -> None:
    tools = (
        {"name": "create_issue", "description": "Create a GitHub issue.", "inputSchema": {"type": "object"}},
        {"name": "list_repos", "description": "List repositories; an issue tracker link for each.", "inputSchema": {}},
        {"name": "weather", "description": "The weather.", "inputSchema": {"type": "object"}},
    )
    catalog = Catalog.build([CatalogServer("s1", "io.github/github", "github", "GitHub", True, tools)])
    ranked = [t["name"] for t in find_tools(catalog, "issue")]
    assert ranked == ["github__create_issue", "github__list_repos"]
    assert len(find_tools(catalog, "", limit=2)) == 2
    assert find_tools(catalog, "nothing-like-it") == []


class RecordingCaller:
    """A face's client as the relay sees it: records what it was sent."""

    def __init__(self, capabilities: set[str], fail_with: str | None = None) -> None:
        self.capabilities, self.fail_with = capabilities, fail_with
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.logs: list[dict[str, Any]] = []

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.requests.append((method, params))
        if self.fail_with:
            raise RuntimeError(self.fail_with)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="ok"), model="m")

    async def log(self, params: dict[str, Any]) -> None:
        self.logs.append(params)


async def test_a_servers_requests_and_logs_reach_the_calling_client_redacted_and_are_refused_without_one(
    canary: str,
) -> None:
    redactor = Redactor()
    redactor.register(canary, "[secret:KEY]")
    inflight = InFlight()
    callbacks = relay_callbacks(inflight, redactor, "Stub")
    asking = types.CreateMessageRequestParams(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"my key is {canary}"))
        ],
        max_tokens=5,
    )
    nobody = await callbacks["sampling_callback"](None, asking)
    assert isinstance(nobody, types.ErrorData) and "no client that can answer" in nobody.message

    caller = RecordingCaller({"sampling"})
    with inflight.add(caller):
        answered = await callbacks["sampling_callback"](None, asking)
        refused = await callbacks["list_roots_callback"](None)  # not declared by this client
        await callbacks["logging_callback"](
            types.LoggingMessageNotificationParams(level="info", data=f"using {canary}")
        )
    assert isinstance(answered, types.CreateMessageResult) and isinstance(refused, types.ErrorData)
    assert caller.requests[0][0] == "sampling/createMessage"
    assert canary not in json.dumps(caller.requests) + json.dumps(caller.logs)
    assert "[secret:KEY]" in json.dumps(caller.requests) and "[secret:KEY]" in json.dumps(caller.logs)

    failing = RecordingCaller({"sampling"}, fail_with=f"client could not show {canary}")
    with inflight.add(failing):
        error = await callbacks["sampling_callback"](None, asking)
    assert isinstance(error, types.ErrorData) and canary not in error.message
    assert inflight.newest() is None  # every call's caller left with its call


async def test_a_2026_server_that_omits_result_type_is_read_leniently_where_its_content_is_unambiguous(
    tmp_path: Path, canary: str
) -> None:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    manager = ConnectionManager(
        store, redactor, install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(15)
    )
    server = store.servers.install(
        qualified_name="io.test/sloppy",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=stub_launch(canary, "modern"),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        title="Sloppy",
        tools=None,
    )
    gw = Gateway(store, manager, redactor, eager=True, poll_interval=0.1)
    try:
        with anyio.fail_after(scaled(30)):
            await gw.start()
            status = await manager.wait_settled(server.server_id)
            assert status.status == "connected", status.reason  # its tools/list (no resultType) was read
            await gw.refresh()  # the catalog with the tools the connect recorded
            result = await gw.call("sloppy__echo", {"text": "read anyway"})
        assert result["content"] == [{"type": "text", "text": "read anyway"}] and not result.get("isError")
        assert manager._live[server.server_id].client.protocol_version == "2026-07-28"
    finally:
        await gw.aclose()
        await manager.aclose()
        store.close()
