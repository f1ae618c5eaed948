"""Open an MCP client session to a resolved launch (stdio process or remote URL).

Used by the probe (test-connect) and by the connection manager (live servers), so both
speak to servers the same way: ``mode="auto"`` (2026-07-28 ``server/discover`` first, the
classic ``initialize`` handshake for older servers), our own stdio transport, and HTTP
transports that remember the last HTTP status (the SDK hides a 401 behind -32603). Every local
process is started by the launch (``start.py``), which alone fills in the values.

A *local package that serves HTTP* (a resolved launch with both a command and a URL) is
started first (:func:`serving_process`): its port is awaited (bounded by ``port_timeout``,
and by the probe's deadline around the whole call), then the client connects to the URL,
and the process (its whole group) is stopped when the connection closes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx2
from anyio.abc import Process
from mcp import Client
from mcp_types import Implementation, Tool

from setup_agent.errors import ProtocolError

from .direct import DirectStarts
from .lenient import read_leniently
from .listeners import own_listener_up, refuse_taken_port
from .net_record import NetRecord
from .procs import ProcessLedger
from .sandbox import Sandbox
from .spec import ResolvedLaunch
from .start import LocalCommand, local_command, remote_endpoint
from .transport import ProcessWatch, _read_stderr, _stop, _wait_exit, stdio_transport

__all__ = [
    "HttpWatch",
    "list_all_tools",
    "open_client",
    "serving_process",
    "tool_dicts",
]

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
    port_timeout: float = 60.0,
    sandbox: Sandbox | None = None,
    callbacks: Mapping[str, Any] | None = None,
    net_record: NetRecord | None = None,
    direct: DirectStarts | None = None,
) -> AsyncIterator[Client]:
    """An initialized ``mcp.Client`` for ``resolved``; leaving the block tears it down.

    With a ``sandbox``, a local process starts inside it (setup_agent/launch/sandbox.py), its
    working dir ``resolved.cwd`` the folder it may write. ``callbacks``: more ``mcp.Client``
    arguments (the gateway's relay of the server's requests). ``net_record``: where the proxy of a
    sandboxed local server records what it reached or tried (the probe shows it in the consent).
    ``direct``: where the download phase noted what a runner installed (``direct.py``): the
    server's own program starts with no runner beside it.

    ``auth`` (remotes only) signs the HTTP requests, e.g. :class:`setup_agent.oauth.sign_ins.GrantAuth`.
    A local package that serves HTTP (a command *and* a URL) is started first, and stopped
    with the connection.
    """
    # Both are made before anything starts: a missing runner or a forced sandbox that does not
    # work is an error of their own, not a failed connection.
    local = (
        local_command(resolved, sandbox=sandbox, host_env=host_env, record=net_record, direct=direct)
        if resolved.local
        else None
    )
    try:
        async with _client(
            resolved, local, mode, process_watch, http_watch, grace, http_timeout, ledger, auth, port_timeout, callbacks
        ) as client:
            yield client
    finally:
        if local is not None:
            await local.aclose()  # its proxy stops with the process


@asynccontextmanager
async def _client(
    resolved: ResolvedLaunch,
    local: LocalCommand | None,
    mode: Literal["auto", "legacy"],
    process_watch: ProcessWatch | None,
    http_watch: HttpWatch | None,
    grace: float,
    http_timeout: float,
    ledger: ProcessLedger | None,
    auth: httpx2.Auth | None,
    port_timeout: float,
    callbacks: Mapping[str, Any] | None,
) -> AsyncIterator[Client]:
    serving: AbstractAsyncContextManager[Any] = nullcontext()
    if resolved.transport == "stdio":
        assert local is not None
        transport: Any = stdio_transport(local.spawn, watch=process_watch, grace=grace, ledger=ledger)
        label = Path(resolved.spec.command or "server").name
    else:
        endpoint = remote_endpoint(resolved)
        if local is not None:
            serving = serving_process(
                local.spawn,
                url=endpoint.url,
                command=local.command,
                watch=process_watch if process_watch is not None else ProcessWatch(),
                grace=grace,
                port_timeout=port_timeout,
            )
        watch = http_watch if http_watch is not None else HttpWatch()
        if resolved.transport == "sse":
            from mcp.client.sse import sse_client

            def factory(headers: Any = None, timeout: Any = None, auth: Any = auth) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(
                    headers=headers, timeout=timeout, auth=auth, event_hooks={"response": [watch.on_response]}
                )

            transport = sse_client(endpoint.url, headers=dict(endpoint.headers), httpx_client_factory=factory)
        else:
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(
                headers=dict(endpoint.headers),
                timeout=http_timeout,
                auth=auth,
                event_hooks={"response": [watch.on_response]},
            )
            transport = _owned(streamable_http_client(endpoint.url, http_client=http), http)
        label = urlsplit(endpoint.url).hostname or "a server"
    async with serving:
        async with Client(transport, mode=mode, client_info=CLIENT_INFO, **(callbacks or {})) as client:
            # a tool schema a lenient client accepts is read with a note (lenient.py); the label names no URL query or argument (they may hold a secret)
            read_leniently(client, label)
            yield client


async def _read_stdout(process: Process, watch: ProcessWatch) -> None:
    """An HTTP server's stdout is only log output: kept with its stderr tail, never parsed."""
    assert process.stdout is not None  # spawned with pipes, as _read_stderr's stderr
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in process.stdout:
            watch.add_stderr(chunk)


@asynccontextmanager
async def serving_process(
    spawn: Callable[[], Awaitable[Process]],
    *,
    url: str,
    command: str,
    watch: ProcessWatch,
    grace: float = 0.5,
    port_timeout: float = 60.0,
) -> AsyncIterator[None]:
    """Run a local package that serves HTTP (``spawn``: the launch's, ``start.LocalCommand.spawn``;
    ``command``: what it runs, a container engine's port is its own) until its URL's port
    accepts; stop its group on exit.

    Raises ``ConnectionRefusedError`` when the process exits before the port opens (the
    probe reports it as ``exited`` with the stderr tail) and TimeoutError after
    ``port_timeout``. The port is this process tree's only (``listeners.py``): PortInUse when
    another program answers on it before the spawn (nothing is started) or listens on it after.
    """
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    await refuse_taken_port(host, port)  # another program on the port would get our requests
    process = await spawn()
    watch.pid = process.pid
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_stderr, process, watch)
        tg.start_soon(_read_stdout, process, watch)
        tg.start_soon(_wait_exit, process, watch)
        try:
            with anyio.fail_after(port_timeout):
                while True:
                    if watch.exited.is_set():
                        raise ConnectionRefusedError("the server exited before it opened its port")
                    if await own_listener_up(process.pid, host, port, command):  # PortInUse if foreign
                        break
                    await anyio.sleep(0.05)  # polling a port we do not own: no event to wait on
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process, watch, grace, 0.5)
            tg.cancel_scope.cancel()


@asynccontextmanager
async def _owned(transport: Any, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    async with http:
        async with transport as streams:
            yield streams


async def list_all_tools(client: Client, *, max_pages: int = 100) -> list[Tool]:
    """Every page of ``tools/list``; an answer the SDK cannot read is a
    :class:`~setup_agent.errors.ProtocolError` in words (the fields, never the answer's text)."""
    from pydantic import ValidationError

    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(max_pages):
        try:
            page = await client.list_tools(cursor=cursor)
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in e.get("loc", ())[:3]) or "(the result)" for e in exc.errors()})
            raise ProtocolError(
                f"The server answered tools/list with a list mcp-setup cannot read (not valid for its protocol "
                f"version {getattr(client, 'protocol_version', '?')}; look at: {', '.join(fields[:5])})."
            ) from None
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def tool_dicts(tools: list[Any]) -> list[dict[str, Any]]:
    """Tools as plain JSON with every field the server sent that the SDK knows (wire names:
    ``name, title?, description, inputSchema, outputSchema?, annotations?, execution?, icons?,
    _meta?``), so that the gateway lists them as sent."""
    out = []
    for tool in tools:
        item: dict[str, Any] = (
            tool.model_dump(mode="json", by_alias=True, exclude_none=True)
            if hasattr(tool, "model_dump")
            else dict(tool)
        )
        item["description"] = item.get("description") or ""
        if not item.get("title"):
            item.pop("title", None)
        item["inputSchema"] = _plain(item.get("inputSchema") or {"type": "object"})
        out.append(item)
    return out


def _plain(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict):
        return schema
    if hasattr(schema, "model_dump"):
        return schema.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(schema)
