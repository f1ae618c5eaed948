"""The floor for cold start: a minimal SDK stdio MCP server with one tool.

``python bench/minimal_server.py lowlevel`` — ``mcp.server.Server`` (what ``mcp-setup mcp`` is
built on); ``python bench/minimal_server.py mcpserver`` — the high-level ``MCPServer``.
"""

import sys


def lowlevel() -> None:
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    async def list_tools(ctx, params):  # noqa: ANN001
        return types.ListToolsResult(
            tools=[types.Tool(name="echo", description="Echo.", input_schema={"type": "object", "properties": {}})]
        )

    server = Server("minimal", version="0.0.1", on_list_tools=list_tools)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def mcpserver() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("minimal")

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    server.run("stdio")


if __name__ == "__main__":
    {"lowlevel": lowlevel, "mcpserver": mcpserver}[sys.argv[1] if len(sys.argv) > 1 else "lowlevel"]()
