"""What-if for the cold start (item 3), not product code: ``mcp-setup mcp`` answering
``initialize`` before it imports the core and builds the runtime.

Same SDK layer and tool list as ``app/mcp/face.py`` (``TOOL_SPECS``, which is cheap to
import); the core (``app.runtime``, ``app.mcp.face``: SQLAlchemy, Alembic, the service…) is
imported in a worker thread once ``initialize`` is answered, and the runtime built on the
loop. Tool calls and resources wait for it, then go to the real
``McpFace``. ``bench/section_coldstart.py`` times it beside the real command to show what the
change recommended in bench/README.md would give, in the same run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from setup_agent.setup.tool_specs import TOOL_SPECS  # noqa: E402

_state: dict[str, Any] = {}


async def _face() -> Any:
    await _state["ready"].wait()
    return _state["face"]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=s["name"], description=s["description"], input_schema=s["inputSchema"]) for s in TOOL_SPECS
        ]
    )


async def call_tool(ctx: Any, params: Any) -> Any:
    return await (await _face())._call_tool(ctx, params)


async def list_resources(ctx: Any, params: Any) -> Any:
    return await (await _face()).offered.list_resources(ctx, params)


def _import_core() -> None:
    import importlib

    for name in ("app.runtime", "app.mcp.face"):
        importlib.import_module(name)


async def main() -> None:
    _state["ready"] = anyio.Event()
    server = Server(
        "mcp-setup", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources
    )
    answered = anyio.Event()

    async def after_handshake(ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover"):
            answered.set()
        return result

    server.middleware.append(after_handshake)

    async def boot() -> None:
        # The import holds the GIL for most of ~1 s: start it once the handshake is answered
        # (or after 1 s without one), so the answer is not slowed by it.
        with anyio.move_on_after(1.0):
            await answered.wait()
        await anyio.sleep(0.005)  # let the answer reach stdout first
        await anyio.to_thread.run_sync(_import_core)
        from app.mcp.face import McpFace
        from app.runtime import build_runtime
        from app.settings import Settings

        runtime = build_runtime(Settings())
        _state["runtime"] = runtime
        _state["face"] = McpFace(runtime)
        _state["ready"].set()
        await runtime.start()

    async with anyio.create_task_group() as tg:
        tg.start_soon(boot)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()
    if "runtime" in _state:
        await _state["runtime"].aclose()


if __name__ == "__main__":
    anyio.run(main)
