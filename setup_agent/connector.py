"""Open an MCP client session to a resolved launch (stdio process or remote URL).

Used by the probe (test-connect) and by the connection manager (live servers), so both
speak to servers the same way: ``mode="auto"`` (2026-07-28 ``server/discover`` first, the
classic ``initialize`` handshake for older servers), our own stdio transport, and HTTP
transports that remember the last HTTP status (the SDK hides a 401 behind -32603).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp_types import Implementation

from .errors import CommandNotFound, RuntimeMissing
from .launch import ResolvedLaunch
from .procs import ProcessLedger
from .transport import ProcessWatch, minimal_environment, stdio_transport

__all__ = ["HttpWatch", "RUNTIME_HINTS", "check_command", "list_all_tools", "open_client", "tool_dicts"]

#: Runners we know, with how to get them: a missing one is ``runtime_missing``, not
#: ``command_not_found``.
RUNTIME_HINTS = {
    "npx": "Install Node.js (it brings npx): your package manager or https://nodejs.org.",
    "node": "Install Node.js: your package manager or https://nodejs.org.",
    "uvx": "Install uv (it brings uvx): `pip install uv` or https://docs.astral.sh/uv/.",
    "uv": "Install uv: `pip install uv` or https://docs.astral.sh/uv/.",
    "docker": "Install Docker and start its engine: https://docs.docker.com/get-docker/.",
    "dnx": "Install the .NET 10 SDK (it brings dnx): https://dotnet.microsoft.com/download.",
    "python3": "Install Python 3: your package manager or https://www.python.org.",
    "python": "Install Python 3: your package manager or https://www.python.org.",
}

CLIENT_INFO = Implementation(name="mcp-setup", version="0.1.0")

_RESOURCE_METADATA = re.compile(r'resource_metadata\s*=\s*(?:"([^"]+)"|([^\s,]+))', re.IGNORECASE)


@dataclass
class HttpWatch:
    """The last HTTP status seen on a remote connection, and an OAuth challenge if one came."""

    last_status: int | None = None
    statuses: list[int] = field(default_factory=list)
    #: ``resource_metadata`` of a 401's ``WWW-Authenticate: Bearer`` challenge (MCP authorization spec).
    resource_metadata: str | None = None

    async def on_response(self, response: httpx2.Response) -> None:
        self.last_status = response.status_code
        self.statuses.append(response.status_code)
        if response.status_code == 401:
            found = _RESOURCE_METADATA.search(response.headers.get("www-authenticate", ""))
            if found:
                self.resource_metadata = found.group(1) or found.group(2)

    def auth_refused(self) -> bool:
        return any(s in (401, 403) for s in self.statuses)


def check_command(command: str, env: Mapping[str, str]) -> str:
    """Resolve ``command`` on the child's PATH, or raise RuntimeMissing / CommandNotFound."""
    found = shutil.which(command, path=env.get("PATH"))
    if found:
        return found
    name = Path(command).name
    if name in RUNTIME_HINTS:
        raise RuntimeMissing(
            f"This server needs {name}, which is not installed on this machine. {RUNTIME_HINTS[name]}",
            details={"runtime": name},
        )
    raise CommandNotFound(f"The command {command!r} was not found on this machine.", details={"command": command})


@asynccontextmanager
async def open_client(
    resolved: ResolvedLaunch,
    *,
    mode: Literal["auto", "legacy"] = "auto",
    process_watch: ProcessWatch | None = None,
    http_watch: HttpWatch | None = None,
    host_env: Mapping[str, str] | None = None,
    grace: float = 0.5,
    http_timeout: float = 30.0,
    ledger: ProcessLedger | None = None,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[Client]:
    """An initialized ``mcp.Client`` for ``resolved``; leaving the block tears it down.

    ``auth`` (remotes only) signs the HTTP requests, e.g. :class:`setup_agent.oauth.GrantAuth`.
    """
    if resolved.transport == "stdio":
        assert resolved.command
        env = minimal_environment(resolved.env, host_env=host_env)
        command = check_command(resolved.command, env)
        transport: Any = stdio_transport(
            command, resolved.args, env=env, cwd=resolved.cwd, watch=process_watch, grace=grace, ledger=ledger
        )
    else:
        assert resolved.url
        watch = http_watch if http_watch is not None else HttpWatch()
        if resolved.transport == "sse":
            from mcp.client.sse import sse_client

            def factory(headers: Any = None, timeout: Any = None, auth: Any = auth) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(
                    headers=headers, timeout=timeout, auth=auth, event_hooks={"response": [watch.on_response]}
                )

            transport = sse_client(resolved.url, headers=dict(resolved.headers), httpx_client_factory=factory)
        else:
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(
                headers=dict(resolved.headers),
                timeout=http_timeout,
                auth=auth,
                event_hooks={"response": [watch.on_response]},
            )
            transport = _owned(streamable_http_client(resolved.url, http_client=http), http)
    async with Client(transport, mode=mode, client_info=CLIENT_INFO) as client:
        yield client


@asynccontextmanager
async def _owned(transport: Any, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    async with http:
        async with transport as streams:
            yield streams


async def list_all_tools(client: Client, *, max_pages: int = 100) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def tool_dicts(tools: list[Any]) -> list[dict[str, Any]]:
    """Tools as plain JSON (``{name, title?, description, inputSchema, outputSchema?, annotations?}``)."""
    out = []
    for tool in tools:
        item: dict[str, Any] = {"name": tool.name, "description": tool.description or ""}
        if getattr(tool, "title", None):
            item["title"] = tool.title
        item["inputSchema"] = _plain(tool.input_schema)
        output = getattr(tool, "output_schema", None)
        if output is not None:
            item["outputSchema"] = _plain(output)
        annotations = getattr(tool, "annotations", None)
        if annotations is not None:
            item["annotations"] = (
                annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                if hasattr(annotations, "model_dump")
                else dict(annotations)
            )
        out.append(item)
    return out


def _plain(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict):
        return schema
    if hasattr(schema, "model_dump"):
        return schema.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(schema)
