"""``tools/list`` in pages: the face's own SDK server, with SDK clients of both eras.

The gateway here lists 20 installed servers of 20 tools each (the catalog the stdio face reads
before its core loads); no server runs.
"""

from __future__ import annotations

import base64
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from app.mcp import McpFace
from app.mcp.paging import DEFAULT_PAGE_SIZE
from setup_agent.gateway import CALL_TOOL, FIND_TOOLS
from setup_agent.setup import TOOL_NAMES
from setup_agent.store import Catalog
from setup_agent.store.catalog import CatalogServer
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

SERVERS, TOOLS = 20, 20


def _catalog(servers: int = SERVERS) -> Catalog:
    return Catalog.build(
        CatalogServer(
            f"srv_{s:02d}",
            f"io.test/server-{s:02d}",
            f"server{s:02d}",
            f"Server {s}",
            True,
            tuple(
                {"name": f"tool_{t:02d}", "description": f"Tool {t} of server {s}.", "inputSchema": {"type": "object"}}
                for t in range(TOOLS)
            ),
        )
        for s in range(servers)
    )


def _face(catalog: Catalog, **options: Any) -> McpFace:
    return McpFace(early_catalog=lambda: catalog, gateway_tools=options.pop("gateway_tools", "all"), **options)


def _everything(catalog: Catalog) -> set[str]:
    return {t["name"] for t in catalog.wire_tools()}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_follows_next_cursor_sees_every_tool_of_twenty_servers_once(mode: str) -> None:
    catalog = _catalog()
    face = _face(catalog, tools_page_size=64)
    pages: list[list[str]] = []
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode=mode) as client:
            cursor = None
            while True:
                listed = await client.list_tools(cursor=cursor)
                pages.append([t.name for t in listed.tools])
                cursor = listed.next_cursor
                if cursor is None:
                    break
    names = [n for p in pages for n in p]
    assert len(names) == len(set(names)) == SERVERS * TOOLS + len(TOOL_NAMES) + 2  # each once
    assert set(names) == _everything(catalog) | set(TOOL_NAMES) | {FIND_TOOLS, CALL_TOOL}
    assert [len(p) for p in pages[:-1]] == [64] * (len(pages) - 1) and 0 < len(pages[-1]) <= 64


async def test_a_client_that_never_sends_a_cursor_gets_every_tool_in_the_first_page_by_default() -> None:
    """Several clients read only the first page: the default keeps what they had before pages."""
    catalog = _catalog()
    face = _face(catalog)
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode="legacy") as client:
            listed = await client.list_tools()
    assert listed.next_cursor is None
    assert len(listed.tools) == SERVERS * TOOLS + len(TOOL_NAMES) + 2 <= DEFAULT_PAGE_SIZE
    assert [t.name for t in listed.tools[: len(TOOL_NAMES)]] == list(TOOL_NAMES)  # the setup tools come first


async def test_a_first_page_smaller_than_the_list_starts_with_the_setup_tools_and_says_where_to_go_on() -> None:
    face = _face(_catalog(), tools_page_size=10)
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode="legacy") as client:
            first = await client.list_tools()
            second = await client.list_tools(cursor=first.next_cursor)
    assert [t.name for t in first.tools][: len(TOOL_NAMES)] == list(TOOL_NAMES) and len(first.tools) == 10
    assert first.next_cursor and second.next_cursor and second.next_cursor != first.next_cursor
    assert not {t.name for t in first.tools} & {t.name for t in second.tools}


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    ["not a cursor", "", "%%%", _b64("tools:0"), _b64("tools:-5"), _b64("tools:ten"), _b64("prompts:10"), "10"],
)
async def test_a_cursor_the_gateway_never_issued_is_an_invalid_params_error(cursor: str) -> None:
    face = _face(_catalog(2), tools_page_size=10)
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.list_tools(cursor=cursor)
            still = await client.list_tools()  # the session goes on
    assert caught.value.error.code == -32602 and "cursor" in caught.value.error.message.lower()
    assert len(still.tools) == 10


async def test_a_cursor_past_the_end_of_a_list_that_shrank_gives_an_empty_last_page() -> None:
    catalogs = [_catalog(), _catalog(1)]
    face = McpFace(early_catalog=lambda: catalogs[0], gateway_tools="all", tools_page_size=100)
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode="legacy") as client:
            first = await client.list_tools()
            second = await client.list_tools(cursor=first.next_cursor)
            catalogs.pop(0)  # most servers removed between two pages
            third = await client.list_tools(cursor=second.next_cursor)
    assert third.tools == [] and third.next_cursor is None


async def test_find_and_call_mode_lists_only_its_own_tools_in_one_page() -> None:
    face = _face(_catalog(), gateway_tools="discover", tools_page_size=DEFAULT_PAGE_SIZE)
    with anyio.fail_after(scaled(30)):
        async with Client(face.server, mode="legacy") as client:
            listed = await client.list_tools()
    assert [t.name for t in listed.tools] == [*TOOL_NAMES, FIND_TOOLS, CALL_TOOL] and listed.next_cursor is None
