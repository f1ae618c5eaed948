"""Streamable-HTTP MCP stub (SDK low-level `Server`) behind a header check, for remote tests.

The check hashes the *whole* header value (e.g. "Bearer tok123") with SHA-256 and
compares it with `expected_sha256`; a missing or wrong header gets HTTP 401 with the
JSON body {"error": "invalid token"} (not a JSON-RPC error). `expected_sha256=None`
disables the check. The MCP endpoint is `/mcp`.

In tests: `with serve_http_stub(expected_sha256=h) as url: ...`
By hand: `python -m tests.stub_server.http_server --port 8802 --expected-sha256 HEX`
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.shared.exceptions import MCPError

TOOLS: dict[str, types.Tool] = {
    "echo": types.Tool(
        name="echo",
        description="Echo the given text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    "whoami": types.Tool(
        name="whoami",
        description="Answer 'ok' when the caller is authorized.",
        input_schema={"type": "object", "properties": {}},
    ),
}


def sha256_hex(value: str) -> str:
    """SHA-256 hex of a UTF-8 string (what `expected_sha256` must be)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def build_mcp_server(tools: Sequence[str] = ("echo", "whoami")) -> Server[Any]:
    """A low-level SDK server offering the named tools (echo, whoami)."""
    unknown = set(tools) - set(TOOLS)
    if unknown:
        raise ValueError(f"unknown stub tools: {sorted(unknown)}")
    offered = [TOOLS[name] for name in tools]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=offered)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "echo" and "echo" in tools:
            text = str(args.get("text", ""))
        elif params.name == "whoami" and "whoami" in tools:
            text = "ok"
        else:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("mcp-setup-http-stub", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


class HeaderAuth:
    """ASGI middleware: 401 {"error": "invalid token"} unless sha256(header value) matches."""

    def __init__(self, app: Any, *, header: str, expected_sha256: str | None) -> None:
        self.app = app
        self.header = header.lower().encode("latin-1")
        self.expected = expected_sha256.lower() if expected_sha256 else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.expected is None:
            await self.app(scope, receive, send)
            return
        value = next((v for k, v in scope.get("headers", []) if k.lower() == self.header), None)
        if value is not None and hashlib.sha256(value).hexdigest() == self.expected:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "invalid token"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def build_app(
    *, header: str = "Authorization", expected_sha256: str | None = None, tools: Sequence[str] = ("echo", "whoami")
) -> Any:
    """The ASGI app: header check in front of the SDK's Starlette streamable-HTTP app."""
    server = build_mcp_server(tools)
    return HeaderAuth(server.streamable_http_app(), header=header, expected_sha256=expected_sha256)


class _ThreadedUvicorn(uvicorn.Server):
    """uvicorn.Server that signals readiness through a threading.Event."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()

    def run_in_thread(self, sock: socket.socket) -> None:
        try:
            self.run(sockets=[sock])
        finally:
            self.ready.set()


@contextmanager
def serve_http_stub(
    *,
    header: str = "Authorization",
    expected_sha256: str | None = None,
    tools: Sequence[str] = ("echo", "whoami"),
    startup_timeout: float = 10.0,
    shutdown_timeout: float = 5.0,
) -> Iterator[str]:
    """Serve the stub on 127.0.0.1:<ephemeral> in a daemon thread; yield the `/mcp` URL."""
    app = build_app(header=header, expected_sha256=expected_sha256, tools=tools)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so asyncio turns Nagle off
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, access_log=False)
    server = _ThreadedUvicorn(config)
    thread = threading.Thread(target=server.run_in_thread, args=(sock,), name=f"http-stub-{port}", daemon=True)
    thread.start()
    try:
        if not server.ready.wait(startup_timeout) or not server.started:
            raise RuntimeError(f"HTTP stub did not start on port {port} within {startup_timeout}s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(shutdown_timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(shutdown_timeout)
        sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8802)
    parser.add_argument("--header", default="Authorization")
    parser.add_argument("--expected-sha256", default=None, help="sha256 hex of the whole header value")
    parser.add_argument("--tools", default="echo,whoami")
    ns = parser.parse_args(argv)
    tools = [t for t in ns.tools.split(",") if t]
    app = build_app(header=ns.header, expected_sha256=ns.expected_sha256, tools=tools)
    print(f"http-stub: serving http://{ns.host}:{ns.port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host=ns.host, port=ns.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
