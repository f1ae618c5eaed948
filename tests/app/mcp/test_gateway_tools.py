"""The context budget of ``tools/list``: every tool while they fit, else mcp-setup's own tools,
the find/call pair (saying how many more tools there are, of which servers), the most recently
used tools, also those used in an earlier session, and in the room left the others by server in
install order; every tool stays callable, a call that changes
the listing is one list_changed, and a call that cannot change it costs no new listing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp import Client

from app.mcp import McpFace
from app.mcp.gateway_tools import OWN_TOKENS, listed_tools
from setup_agent.gateway import CALL_TOOL, FIND_TOOLS, Budget, estimated_tokens, standing_of
from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.router import Gateway
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.setup import TOOL_SPECS
from setup_agent.store import TOOLS_BUDGET, Catalog
from setup_agent.store.catalog import CatalogServer
from setup_agent.store.database import Store
from tests.helpers.budget import install_many, padding
from tests.helpers.gateway import ListChanges
from tests.helpers.mcp_face import Recorder, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

DEFAULT_BUDGET = 8000


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


def test_over_the_budget_the_recent_tools_are_listed_then_the_rest_of_the_room_and_the_pair_counts_the_rest() -> None:
    big = catalog_of(20, 20)
    everything = listed_tools("all", big, budget=0)
    assert estimated_tokens(everything) > DEFAULT_BUDGET  # the case the budget is for
    recent = ["server-07__action_03", "server-19__action_00", "no-such__tool"]
    listed = listed_tools("all", big, budget=DEFAULT_BUDGET, recent=recent)
    names = [t["name"] for t in listed]
    assert estimated_tokens(listed) <= DEFAULT_BUDGET  # the pair's note included
    assert names[: len(TOOL_SPECS)] == [t["name"] for t in TOOL_SPECS]
    assert {FIND_TOOLS, CALL_TOOL} <= set(names)
    installed = [n for n in names if "__" in n]
    assert installed[:2] == ["server-07__action_03", "server-19__action_00"]  # the most recent first
    in_order = [t["name"] for t in everything if "__" in t["name"] and t["name"] not in installed[:2]]
    assert installed[2:] == in_order[: len(installed) - 2]  # then by server in install order
    assert len(installed) > 20  # most of the budget is spent: whole servers fit beside the recent two
    biggest = max(estimated_tokens([t]) for t in everything if "__" in t["name"])
    assert estimated_tokens(listed) > DEFAULT_BUDGET - 2 * biggest
    pair = {t["name"]: t["description"] for t in listed if t["name"] in (FIND_TOOLS, CALL_TOOL)}
    left = {f"Server {s:02d}": 20 - sum(n.startswith(f"server-{s:02d}__") for n in installed) for s in range(20)}
    counts = ", ".join(f"{server} ({n})" for server, n in sorted(left.items(), key=lambda kv: (-kv[1], kv[0])) if n)
    for description in pair.values():
        assert f" {400 - len(installed)} more installed tools are not listed here, to keep your context small: " in (
            description
        )
        assert f"small: {counts}. Find them" in description
        assert "Server 00 (" not in description  # listed whole
    standing = standing_of(big, OWN_TOKENS, Budget(DEFAULT_BUDGET, "default"), recent)
    assert standing.listed_tools == len(installed) and standing.unlisted_tools == 400 - len(installed)
    assert abs(standing.listed_tokens - estimated_tokens(listed)) <= 3  # the page counts what clients get
    assert OWN_TOKENS < DEFAULT_BUDGET


def test_over_the_budget_with_nothing_used_the_first_servers_installed_are_listed_whole() -> None:
    listed = listed_tools("all", catalog_of(20, 20), budget=DEFAULT_BUDGET)
    installed = [t["name"] for t in listed if "__" in t["name"]]
    assert installed[:40] == [f"server-{s:02d}__action_{i:02d}" for s in (0, 1) for i in range(20)]
    assert estimated_tokens(listed) <= DEFAULT_BUDGET


def test_whatever_the_budget_the_listing_never_exceeds_it() -> None:
    big = catalog_of(20, 20)
    for budget in range(OWN_TOKENS + 300, 40_000, 1_111):
        listed = listed_tools("all", big, budget=budget, recent=["server-12__action_05", "server-02__action_19"])
        assert estimated_tokens(listed) <= budget


def test_the_discover_mode_lists_only_mcp_setups_own_tools_whatever_the_budget() -> None:
    listed = listed_tools("discover", catalog_of(20, 20), budget=DEFAULT_BUDGET, recent=["server-01__action_01"])
    assert [t["name"] for t in listed] == [*(t["name"] for t in TOOL_SPECS), FIND_TOOLS, CALL_TOOL]


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
            assert f"{servers[0]['slug']}__echo" in names  # nothing used yet: the first servers installed fill it
            assert target not in names  # and the seventh's tools are past the budget
            find = next(t for t in first if t.name == FIND_TOOLS)
            installed = sum("__" in name for name in names)
            assert f"{400 - installed} more installed tools are not listed here" in (find.description or "")
            found = await client.call_tool(FIND_TOOLS, {"query": "echo server 07", "limit": 3})
            assert target in found.content[0].text  # type: ignore[union-attr]
            answer = await client.call_tool(CALL_TOOL, {"name": target, "arguments": {"text": "hello"}})
            assert answer.content[0].text == "hello"  # type: ignore[union-attr]
            await changes.wait()  # it is used now: listed first, and the client is told once
            again = {t.name for t in (await client.list_tools()).tools}
            assert target in again
            direct = await client.call_tool(f"{servers[3]['slug']}__echo", {"text": "direct"})
            assert direct.content[0].text == "direct"  # an unlisted tool is callable by its name too


async def test_a_tool_used_in_one_mcp_setup_mcp_session_is_listed_in_the_next_sessions_first_tools_list(
    tmp_path: Path, canary: str
) -> None:
    (tmp_path / "data").mkdir()
    Vault.in_memory().export_key(tmp_path / "data.key")
    servers = install_many(tmp_path, canary, 20, 20)
    env = face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(tmp_path / "data.key"), MCP_SETUP_REGISTRIES="local")
    target = f"{servers[11]['slug']}__echo"

    async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env) as client:
        with anyio.fail_after(scaled(60)):
            assert target not in {t.name for t in (await client.list_tools()).tools}  # over the budget, unused
            answer = await client.call_tool(target, {"text": "first session"})
            assert answer.content[0].text == "first session"  # type: ignore[union-attr]

    async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env) as client:
        with anyio.fail_after(scaled(60)):
            first = (await client.list_tools()).tools  # read from the store's file, before the core loads
            listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in first]
            assert target in {t.name for t in first}
            assert estimated_tokens(listed) <= DEFAULT_BUDGET
            await client.call_tool(FIND_TOOLS, {"query": "echo"})  # the core is up now: the same choice
            assert target in {t.name for t in (await client.list_tools()).tools}


class CountedListings:
    """Counts how often the face works out its budgeted listing (it reads every tool's definition)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import app.mcp.face as face_module

        self.count = 0
        real = face_module.face_listing

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(face_module, "face_listing", counted)


@asynccontextmanager
async def gateway_of(tmp_path: Path, canary: str, servers: int, tools: int) -> AsyncIterator[tuple[Gateway, list]]:
    """A real store, connection manager and gateway over ``servers`` installed stubs (each starts
    on its first call)."""
    (tmp_path / "data").mkdir()
    Vault.in_memory().export_key(tmp_path / "data.key")
    recorded = install_many(tmp_path, canary, servers, tools)
    store = Store.for_data_dir(tmp_path / "data", Vault.from_key_file(tmp_path / "data.key"))
    manager = ConnectionManager(
        store, Redactor(), install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(15)
    )
    gw = Gateway(store, manager, Redactor(), eager=False, poll_interval=0.1)
    await gw.start()
    try:
        yield gw, recorded
    finally:
        await gw.aclose()
        await manager.aclose()
        store.close()


def face_of(gw: Gateway) -> McpFace:
    return McpFace(
        SimpleNamespace(gateway=gw, settings=SimpleNamespace(gateway_tools="all")), tools_budget=DEFAULT_BUDGET
    )


async def test_a_call_that_changes_what_fits_is_one_list_changed_and_a_call_that_cannot_recomputes_nothing(
    tmp_path: Path, canary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    listings = CountedListings(monkeypatch)
    changes = ListChanges()
    async with gateway_of(tmp_path, canary, 20, 20) as (gw, servers):
        target, other = f"{servers[4]['slug']}__echo", f"{servers[9]['slug']}__whoami"
        with anyio.fail_after(scaled(60)):
            async with Client(face_of(gw).server, mode="legacy", message_handler=changes) as client:
                assert target not in {t.name for t in (await client.list_tools()).tools}
                await client.call_tool(target, {"text": "now it is used"})  # unlisted: it moves in
                assert changes.count == 1  # told before the call's answer
                assert target in {t.name for t in (await client.list_tools()).tools}
                before = listings.count
                await client.call_tool(target, {"text": "again"})  # listed already: nothing can move
                await client.call_tool(FIND_TOOLS, {"query": "echo"})  # uses no tool
                assert (listings.count, changes.count) == (before, 1)
                await client.call_tool(CALL_TOOL, {"name": other, "arguments": {}})  # unlisted, through the pair
                assert listings.count == before + 1 and changes.count == 2
                assert other in {t.name for t in (await client.list_tools()).tools}


async def test_under_the_budget_no_call_recomputes_the_listing(
    tmp_path: Path, canary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    listings = CountedListings(monkeypatch)
    changes = ListChanges()
    async with gateway_of(tmp_path, canary, 2, 5) as (gw, servers):
        with anyio.fail_after(scaled(60)):
            async with Client(face_of(gw).server, mode="legacy", message_handler=changes) as client:
                listed = {t.name for t in (await client.list_tools()).tools}
                assert {f"{s['slug']}__echo" for s in servers} <= listed  # everything fits
                before = listings.count
                for server in servers:
                    await client.call_tool(f"{server['slug']}__echo", {"text": "hi"})
                assert (listings.count, changes.count) == (before, 0)


async def test_mcp_setup_mcp_lists_by_the_budget_saved_on_the_page_unless_its_own_environment_sets_one(
    tmp_path: Path, canary: str
) -> None:
    (tmp_path / "data").mkdir()
    Vault.in_memory().export_key(tmp_path / "data.key")
    install_many(tmp_path, canary, 20, 20)
    with Store.for_data_dir(tmp_path / "data", Vault.from_key_file(tmp_path / "data.key")) as store:
        store.preferences.set(TOOLS_BUDGET, "0", actor="user:web")  # as the page saves it: no budget
    env = face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(tmp_path / "data.key"), MCP_SETUP_REGISTRIES="local")
    everything = 400 + len(TOOL_SPECS) + 2

    async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env) as client:
        with anyio.fail_after(scaled(60)):
            assert len((await client.list_tools()).tools) == everything  # before the core: the store's file
            await client.call_tool(FIND_TOOLS, {"query": "echo"})
            assert len((await client.list_tools()).tools) == everything  # the core reads the same

    own = {**env, "MCP_SETUP_TOOLS_BUDGET": str(DEFAULT_BUDGET)}
    async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=own) as client:
        with anyio.fail_after(scaled(60)):
            listed = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools
            ]
            assert len(listed) < everything and estimated_tokens(listed) <= DEFAULT_BUDGET
