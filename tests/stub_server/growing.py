"""SDK-based stdio stub (low-level `mcp.server.Server`) whose tool list grows at runtime; both eras.

Tools: `grow` adds the tool `grown` and says the list changed (2025 era:
`notifications/tools/list_changed`; 2026-07-28: a `subscriptions/listen` event), `nap` reports
progress "napping" and sleeps `STUB_NAP_SECONDS` (300) before answering (a slow call to interrupt),
`touch` says its resource `growing://notes` changed (2026-07-28: to the listen streams that name it),
`more` adds the resource `growing://more` (in a file beside the grown one) and says the resource list changed, and once grown `grown`
answers "grown". Whether it grew is a file (`STUB_GROWN_FILE`), so every process of the stub
on one data dir (a stdio gateway's and `serve`'s) lists the same tools. Its pid goes to
`STUB_PID_FILE` when set; it logs only to stderr. `STUB_ERA=2025` refuses `server/discover`, so
that a client falls back to the 2025-11-25 handshake.

Run: `python tests/stub_server/growing.py` (needs the `mcp` SDK; ~1.5 s to start).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

NOTES = "growing://notes"
MORE_URI = "growing://more"
TOUCH = types.Tool(name="touch", description="Change the notes.", input_schema={"type": "object", "properties": {}})
MORE = types.Tool(name="more", description="Add a resource.", input_schema={"type": "object", "properties": {}})
BASE = [
    types.Tool(name="grow", description="Add the tool grown.", input_schema={"type": "object", "properties": {}}),
    types.Tool(name="nap", description="Answer after a long nap.", input_schema={"type": "object", "properties": {}}),
    TOUCH,
    MORE,
]
GROWN = types.Tool(name="grown", description="A tool added at runtime.", input_schema={"type": "object"})


def _grown_file() -> Path:
    return Path(os.environ.get("STUB_GROWN_FILE") or f"/tmp/mcp-setup-stub-grown-{os.getpid()}")


def _more_file() -> Path:
    return _grown_file().with_name(_grown_file().name + ".more")


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def build_server() -> Server[Any]:
    bus = InMemorySubscriptionBus()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[*BASE, GROWN] if _grown_file().exists() else BASE)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "grow":
            _grown_file().write_text("grown\n")
            await bus.publish(ToolsListChanged())  # 2026-07-28 listeners
            if str(ctx.session.protocol_version) < "2026":
                await ctx.session.send_tool_list_changed()
            return _text("grew")
        if params.name == "nap":
            await ctx.session.report_progress(0, None, "napping")  # the caller knows it is in flight
            await anyio.sleep(float(os.environ.get("STUB_NAP_SECONDS") or 300))
            return _text("rested")
        if params.name == "more":
            _more_file().write_text("more\n")
            await bus.publish(ResourcesListChanged())
            if str(ctx.session.protocol_version) < "2026":
                await ctx.session.send_resource_list_changed()
            return _text("more")
        if params.name == "touch":
            await bus.publish(ResourceUpdated(uri=NOTES))  # to the 2026-07-28 streams that named it
            return _text("touched")
        if params.name == "grown" and _grown_file().exists():
            return _text("grown")
        raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        more = [types.Resource(uri=MORE_URI, name="more")] if _more_file().exists() else []
        return types.ListResourcesResult(resources=[types.Resource(uri=NOTES, name="notes"), *more])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=NOTES, text="notes")])

    server: Server[Any] = Server(
        "mcp-setup-growing-stub",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscriptions_listen=ListenHandler(bus),
    )
    return server


async def _serve() -> None:
    server = build_server()
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        if os.environ.get("STUB_ERA") != "2025":
            await server.run(read, write, options)
            return
        # A 2025-era server: server/discover is answered "method not found" before the SDK's
        # loop sees it (which would commit the connection to 2026-07-28).
        inner_send, inner_read = anyio.create_memory_object_stream[Any](16)

        async def pump() -> None:
            async with inner_send:
                async for item in read:
                    message = getattr(getattr(item, "message", None), "root", getattr(item, "message", None))
                    if getattr(message, "method", None) == "server/discover":
                        error = types.JSONRPCError(
                            jsonrpc="2.0",
                            id=message.id,
                            error=types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found"),
                        )
                        await write.send(SessionMessage(error))
                        continue
                    await inner_send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await server.run(inner_read, write, options)
            tg.cancel_scope.cancel()


def main() -> int:
    pid_file = os.environ.get("STUB_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    print(f"growing-stub: started pid {os.getpid()}", file=sys.stderr, flush=True)
    anyio.run(_serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
