"""``mcp-setup mcp`` over stdio with 20 installed servers of 20 tools each, in pages of 64: the
SDK's client follows ``nextCursor`` to every tool, and a cursor the gateway never issued is a
``-32602`` error (tests/app/mcp/test_paging.py has the rest of the rules, in process)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import MCPError

from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.vault import Vault
from setup_agent.setup import TOOL_NAMES
from setup_agent.store.database import Store
from tests.helpers.mcp_face import Recorder, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

SERVERS, TOOLS, PAGE = 20, 20, 64


def _install_many(home: Path, key: Path) -> None:
    spec = LaunchSpec(command=sys.executable, args=["-c", "pass"]).model_dump(mode="json")  # never started here
    with Store.for_data_dir(home, Vault.from_key_file(key), None) as store:
        for s in range(SERVERS):
            store.servers.install(
                qualified_name=f"io.test/server-{s:02d}",
                source="local",
                version="1.0.0",
                package_type="stdio",
                launch_spec=spec,
                installed_by="agent",
                tools_hash="x",
                env={},
                title=f"Server {s}",
                tools=[
                    {"name": f"tool_{t:02d}", "description": f"Tool {t}.", "inputSchema": {"type": "object"}}
                    for t in range(TOOLS)
                ],
            )


async def test_a_stdio_client_that_follows_next_cursor_lists_every_tool_of_twenty_servers(tmp_path: Path) -> None:
    key = tmp_path / "data.key"
    Vault.in_memory().export_key(key)
    # Every tool listed (no context budget): the pages are what this test follows.
    env = face_env(
        tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key), MCP_SETUP_TOOLS_PAGE_SIZE=str(PAGE), MCP_SETUP_TOOLS_BUDGET="0"
    )
    _install_many(Path(env["MCP_SETUP_HOME"]), key)
    names: list[str] = []
    pages = 0
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(tmp_path, tmp_path / "stdio.log", Recorder(), env=env) as client:
            cursor = None
            while True:
                listed = await client.list_tools(cursor=cursor)
                names += [t.name for t in listed.tools]
                pages += 1
                if (cursor := listed.next_cursor) is None:
                    break
            with pytest.raises(MCPError) as bad:
                await client.list_tools(cursor="no-such-cursor")
    installed = [n for n in names if "__tool_" in n]
    assert len(installed) == len(set(installed)) == SERVERS * TOOLS
    assert names[: len(TOOL_NAMES)] == list(TOOL_NAMES)
    assert pages == -(-len(names) // PAGE)
    assert bad.value.error.code == -32602
