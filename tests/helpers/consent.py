"""A server entry whose consent names where a secret goes (a Jira-like host), and a listener to catch it."""

from __future__ import annotations

import asyncio
from typing import Any

JIRA = "io.test/jira"


SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"


def jira_entry() -> dict[str, Any]:
    """A remote whose host is a URL variable and whose secret travels in a header."""
    return {
        "$schema": SCHEMA,
        "name": JIRA,
        "description": "A Jira-like remote MCP server on the user's own host.",
        "version": "2.0.0",
        "remotes": [
            {
                "type": "streamable-http",
                "url": "http://{jira_host}/mcp",
                "variables": {"jira_host": {"description": "Your Jira host (host:port)", "isRequired": True}},
                "headers": [
                    {
                        "name": "Authorization",
                        "value": "Bearer {JIRA_TOKEN}",
                        "isRequired": True,
                        "isSecret": True,
                        "variables": {"JIRA_TOKEN": {"description": "API token", "isRequired": True, "isSecret": True}},
                    }
                ],
            }
        ],
    }


class Listener:
    """The agent's own loopback listener: records every connection and byte it receives."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Listener:
        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self.received += await reader.read(65536)
            writer.close()

        self.server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        self.host = "127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()
