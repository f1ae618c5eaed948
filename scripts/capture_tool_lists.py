"""Capture the tool lists of real MCP servers into tests/fixtures/tool_lists/ (the find_tools
ranking test reads them). Needs the network to npm and PyPI; run it when a server's tools change:

    .venv/bin/python scripts/capture_tool_lists.py            # every server below
    .venv/bin/python scripts/capture_tool_lists.py git time   # some of them
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tool_lists"
UVX = [shutil.which("uvx") or "uvx", "--native-tls"]
#: name -> the command that starts it (npm and PyPI servers that need no key).
SERVERS: dict[str, list[str]] = {
    "everything": ["npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"],
    "memory": ["npx", "-y", "@modelcontextprotocol/server-memory"],
    "filesystem": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "{tmp}"],
    "sequential-thinking": ["npx", "-y", "@modelcontextprotocol/server-sequential-thinking"],
    "time": [*UVX, "mcp-server-time"],
    "fetch": [*UVX, "mcp-server-fetch"],
    "git": [*UVX, "mcp-server-git"],
}
#: What a tool's definition carries that a listing does not need here.
DROPPED = ("outputSchema", "_meta", "execution")


async def capture(name: str, argv: list[str], tmp: str) -> int:
    argv = [a.replace("{tmp}", tmp) for a in argv]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "UV_NATIVE_TLS": "1"}
    async with stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], env=env)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await session.list_tools()).tools
            ]
    for tool in tools:
        for key in DROPPED:
            tool.pop(key, None)
    (OUT / f"{name}.json").write_text(json.dumps({"server": name, "tools": tools}, indent=1) + "\n")
    return len(tools)


def main(names: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(SERVERS):
            print(f"{name}: {asyncio.run(capture(name, SERVERS[name], tmp))} tools")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
