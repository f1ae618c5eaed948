"""The context budget of ``tools/list``: every tool while they fit, else mcp-setup's own tools,
the find/call pair (saying how many more tools there are, of which servers) and the most recently
used tools; every tool stays callable, and a call that changes the listing is one list_changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.mcp.gateway_tools import OWN_TOKENS, listed_tools
from setup_agent.gateway import CALL_TOOL, FIND_TOOLS, estimated_tokens
from setup_agent.secrets.vault import Vault
from setup_agent.setup import TOOL_SPECS
from setup_agent.store import Catalog
from setup_agent.store.catalog import CatalogServer
from setup_agent.store.database import Store
from tests.helpers.connections import stub_launch
from tests.helpers.gateway import ListChanges
from tests.helpers.mcp_face import Recorder, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled
from tests.stub_server.server import Stub

pytestmark = pytest.mark.anyio

DEFAULT_BUDGET = 8000


def padding(server: int, count: int) -> list[dict[str, Any]]:
    """``count`` tools the size real servers' tools are (a sentence or two, a few arguments)."""
    return [
        {
            "name": f"action_{i:02d}",
            "description": f"Does action {i} of server {server} on the account: reads the items it names, "
            "changes what the arguments say and answers with what it did, one line per item.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "item": {"type": "string", "description": "The item's id or name."},
                    "note": {"type": "string", "description": "What to write on it, if anything."},
                },
                "required": ["item"],
            },
        }
        for i in range(count)
    ]


def catalog_of(servers: int, tools: int) -> Catalog:
    return Catalog.build(
        [
            CatalogServer(
                f"srv_{s:02d}",
                f"io.test/server-{s:02d}",
                f"server-{s:02d}",
                f"Server {s:02d}",
                True,
                tuple(padding(s, tools)),
            )
            for s in range(servers)
        ]
    )


def test_under_the_budget_every_tool_is_listed_as_without_one() -> None:
    small = catalog_of(2, 5)
    assert listed_tools("all", small, budget=DEFAULT_BUDGET) == listed_tools("all", small, budget=0)
    assert len(listed_tools("all", small, budget=DEFAULT_BUDGET)) == len(TOOL_SPECS) + 2 + 10


def test_over_the_budget_the_recent_tools_are_listed_and_the_pair_counts_the_rest_by_server() -> None:
    big = catalog_of(20, 20)
    everything = listed_tools("all", big, budget=0)
    assert estimated_tokens(everything) > DEFAULT_BUDGET  # the case the budget is for
    recent = ["server-07__action_03", "server-19__action_00", "no-such__tool"]
    listed = listed_tools("all", big, budget=DEFAULT_BUDGET, recent=recent)
    names = [t["name"] for t in listed]
    assert estimated_tokens(listed) <= DEFAULT_BUDGET + 60  # the pair's note is the only addition
    assert names[: len(TOOL_SPECS)] == [t["name"] for t in TOOL_SPECS]
    assert {FIND_TOOLS, CALL_TOOL} <= set(names)
    installed = [n for n in names if "__" in n]
    assert installed[:2] == ["server-07__action_03", "server-19__action_00"]  # the most recent first
    pair = {t["name"]: t["description"] for t in listed if t["name"] in (FIND_TOOLS, CALL_TOOL)}
    rest = 400 - len(installed)
    for description in pair.values():
        assert f"{rest} more installed tools are not listed here" in description
        assert "Server 00 (20)" in description and "Server 07 (19)" in description
    assert OWN_TOKENS < DEFAULT_BUDGET


def test_the_discover_mode_lists_only_mcp_setups_own_tools_whatever_the_budget() -> None:
    listed = listed_tools("discover", catalog_of(20, 20), budget=DEFAULT_BUDGET, recent=["server-01__action_01"])
    assert [t["name"] for t in listed] == [*(t["name"] for t in TOOL_SPECS), FIND_TOOLS, CALL_TOOL]


def install_many(home: Path, canary: str, servers: int, tools: int) -> list[dict[str, Any]]:
    """``servers`` stub servers, each with its ``tools - 2`` padding tools besides the stub's own
    (echo, whoami), recorded as installed (nothing starts until a call)."""
    store = Store.for_data_dir(home / "data", Vault.from_key_file(home / "data.key"))
    try:
        recorded = []
        for s in range(servers):
            extra = padding(s, tools - 2)
            tools_file = home / f"tools-{s:02d}.json"
            tools_file.write_text(json.dumps({"extra": extra}))
            server = store.servers.install(
                qualified_name=f"io.test/server-{s:02d}",
                source="local",
                version="1",
                package_type="stdio",
                launch_spec=stub_launch(canary, STUB_TOOLS_FILE=str(tools_file)),
                installed_by="cli",
                tools_hash="x",
                env={"STUB_API_KEY": (canary, True)},
                title=f"Server {s:02d}",
                tools=[*Stub(set(), None).tools, *extra],
            )
            recorded.append({"slug": server.slug})
        return recorded
    finally:
        store.close()


async def test_through_mcp_setup_mcp_twenty_servers_stay_within_the_budget_and_an_unlisted_tool_answers(
    tmp_path: Path, canary: str
) -> None:
    (tmp_path / "data").mkdir()
    Vault.in_memory().export_key(tmp_path / "data.key")
    servers = install_many(tmp_path, canary, 20, 20)
    env = face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(tmp_path / "data.key"), MCP_SETUP_REGISTRIES="local")
    changes = ListChanges()

    async with mcp_setup_client(
        tmp_path, tmp_path / "stderr.log", Recorder(), env=env, message_handler=changes
    ) as client:
        with anyio.fail_after(scaled(60)):
            first = (await client.list_tools()).tools
            listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in first]
            assert estimated_tokens(listed) <= DEFAULT_BUDGET
            names = {t.name for t in first}
            target = f"{servers[7]['slug']}__echo"
            assert target not in names  # nothing used yet: only mcp-setup's own tools and the pair fit
            find = next(t for t in first if t.name == FIND_TOOLS)
            assert "400 more installed tools are not listed here" in (find.description or "")
            found = await client.call_tool(FIND_TOOLS, {"query": "echo server 07", "limit": 3})
            assert target in found.content[0].text  # type: ignore[union-attr]
            answer = await client.call_tool(CALL_TOOL, {"name": target, "arguments": {"text": "hello"}})
            assert answer.content[0].text == "hello"  # type: ignore[union-attr]
            await changes.wait()  # it is used now: listed first, and the client is told once
            again = {t.name for t in (await client.list_tools()).tools}
            assert target in again
            direct = await client.call_tool(f"{servers[3]['slug']}__echo", {"text": "direct"})
            assert direct.content[0].text == "direct"  # an unlisted tool is callable by its name too
