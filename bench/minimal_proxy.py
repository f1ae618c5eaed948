"""The floor for a proxied call: a minimal SDK stdio server that forwards ``tools/call`` to one
upstream stdio server through an SDK ``ClientSession`` (no catalog, no redaction, no store).

``python bench/minimal_proxy.py <command> [args…]`` — the upstream is started with this
process's environment. It lists the upstream's tools under their own names.
"""

import sys


def main() -> None:
    import os

    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    upstream = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))

    async def run() -> None:
        async with stdio_client(upstream) as (r, w), ClientSession(r, w) as session:
            await session.initialize()

            async def list_tools(ctx, params):  # noqa: ANN001
                return await session.list_tools()

            async def call_tool(ctx, params):  # noqa: ANN001
                return await session.call_tool(params.name, params.arguments or {})

            server = Server("minimal-proxy", version="0.0.1", on_list_tools=list_tools, on_call_tool=call_tool)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
