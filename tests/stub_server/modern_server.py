"""SDK-based stdio stub (low-level `mcp.server.Server`): speaks both eras.

Answers `initialize` (2025-era handshake) and `server/discover` (2026-07-28 era).
One tool, `ping_modern`. The same required-variable check as `server.py`
(STUB_REQUIRED_ENV, STUB_EXPECTED_SHA256, STUB_REQUIRE=0) runs as middleware on
`initialize` and `server/discover` and raises MCPError(-32001, message).

Run: `python tests/stub_server/modern_server.py` (needs the `mcp` SDK; ~1.5 s to start).
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

AUTH_ERROR = -32001
GATED_METHODS = ("initialize", "server/discover")


def auth_error(environ: dict[str, str] | None = None) -> str | None:
    """Message for a missing/wrong required variable, or None when fine."""
    env = os.environ if environ is None else environ
    if env.get("STUB_REQUIRE", "1") == "0":
        return None
    key_name = env.get("STUB_REQUIRED_ENV") or "STUB_API_KEY"
    value = env.get(key_name)
    if not value:
        return f"missing {key_name}"
    expected = (env.get("STUB_EXPECTED_SHA256") or "").strip().lower()
    if expected and hashlib.sha256(value.encode()).hexdigest() != expected:
        return f"invalid API key for {key_name}"
    return None


async def _list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="ping_modern",
                description="Answer 'pong' from the SDK-based stub.",
                input_schema={"type": "object", "properties": {}},
            )
        ]
    )


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name != "ping_modern":
        raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])


def build_server(environ: dict[str, str] | None = None) -> Server[Any]:
    """The SDK server with the auth middleware installed (usable in-process too)."""
    server: Server[Any] = Server(
        "mcp-setup-modern-stub", version="1.0.0", on_list_tools=_list_tools, on_call_tool=_call_tool
    )

    async def require_env(ctx: Any, call_next: Any) -> Any:
        if ctx.method in GATED_METHODS:
            err = auth_error(environ)
            if err:
                print(f"modern-stub: rejecting {ctx.method}: {err}", file=sys.stderr, flush=True)
                raise MCPError(AUTH_ERROR, err)
        return await call_next(ctx)

    server.middleware.append(require_env)
    return server


async def _serve() -> None:
    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> int:
    pid_file = os.environ.get("STUB_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    print(f"modern-stub: started pid {os.getpid()}", file=sys.stderr, flush=True)
    anyio.run(_serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
