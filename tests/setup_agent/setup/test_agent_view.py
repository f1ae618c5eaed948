"""What an agent gets back stays small and names servers as it knows them.

``mcp_setup_list_servers`` lists each installed server by name, slug, id and state, with its tools'
names and count (a server's descriptions and schemas only when the agent asks for that one), so
twenty servers of ten tools fit in a few thousand characters; ``mcp_setup_remove`` takes the
slug, the qualified name or the id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import keyring.backends.fail
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.setup import CallContext

pytestmark = pytest.mark.anyio


def _tool(server: int, n: int) -> dict[str, Any]:
    return {
        "name": f"action_{n:02d}",
        "description": f"Does thing {n} of server {server}, with a long description an agent rarely needs. " * 3,
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for, in words."}},
            "required": ["query"],
        },
    }


@pytest.fixture
async def runtime(tmp_path: Path, new_runtime) -> Any:
    runtime = new_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=tmp_path),
        keyring_backend=keyring.backends.fail.Keyring(),
    )
    await runtime.start(eager=False)
    for i in range(20):
        runtime.store.servers.install(
            qualified_name=f"io.github.example-org/server-number-{i:02d}",
            source="official",
            version="1.2.3",
            package_type="npm",
            launch_spec={"transport": "stdio", "command": "npx", "args": ["-y", f"@example/server-{i}"]},
            installed_by="mcp:claude-desktop",
            tools_hash="x" * 64,
            env={},
            title=f"Example server {i}",
            tools=[_tool(i, n) for n in range(10)],
        )
    try:
        yield runtime
    finally:
        await runtime.aclose()


async def call(runtime: Runtime, tool: str, **args: Any) -> dict[str, Any]:
    return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


async def test_twenty_servers_of_ten_tools_list_in_under_8000_characters(runtime: Runtime) -> None:
    listed = await call(runtime, "mcp_setup_list_servers")
    text = json.dumps(listed)
    assert len(listed["servers"]) == 20 and len(text) <= 8000, len(text)
    first = listed["servers"][0]
    assert first["tool_count"] == 10 and first["tools"][0] == "action_00"
    assert {"server_id", "qualified_name", "slug", "status", "installed_by"} <= set(first)
    assert "long description" not in text and "inputSchema" not in text


async def test_one_server_asked_for_by_slug_comes_with_its_tools_schemas(runtime: Runtime) -> None:
    slug = (await call(runtime, "mcp_setup_list_servers"))["servers"][3]["slug"]
    [one] = (await call(runtime, "mcp_setup_list_servers", server=slug))["servers"]
    assert one["slug"] == slug and one["tools"][0]["inputSchema"]["required"] == ["query"]
    unknown = await call(runtime, "mcp_setup_list_servers", server="no-such-server")
    assert unknown["error"]["code"] == "not_found"


async def test_a_server_is_removed_by_its_slug_its_qualified_name_or_its_id(runtime: Runtime) -> None:
    servers = (await call(runtime, "mcp_setup_list_servers"))["servers"]
    assert (await call(runtime, "mcp_setup_remove", server=servers[0]["slug"]))["removed"] is True
    assert (await call(runtime, "mcp_setup_remove", server=servers[1]["qualified_name"]))["removed"] is True
    assert (await call(runtime, "mcp_setup_remove", server_id=servers[2]["server_id"]))["removed"] is True
    left = {s["server_id"] for s in (await call(runtime, "mcp_setup_list_servers"))["servers"]}
    assert not left & {s["server_id"] for s in servers[:3]} and len(left) == 17
    again = await call(runtime, "mcp_setup_remove", server=servers[0]["slug"])
    assert again["error"]["code"] == "not_found"
    neither = await call(runtime, "mcp_setup_remove")
    assert neither["error"]["code"] == "invalid_input" and "slug" in neither["error"]["message"]
