"""The gateway over streamable HTTP: ``/mcp`` of ``mcp-setup serve``, with the SDK's client.

The same surface as ``mcp-setup mcp`` (setup tools + installed tools), the process token as
``Authorization: Bearer``, 401 without it or with a wrong one, 403 for a foreign Origin.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.browser.serve import serving
from tests.test_web_serve import install_stub

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_an_http_client_lists_and_calls_an_installed_tool_at_mcp(tmp_path: Path, canary: str) -> None:
    with serving(tmp_path, canary) as served:
        install_stub(served, canary)

        async def use_gateway() -> tuple[set[str], str, str]:
            with anyio.fail_after(60):
                return await talk()

        async def talk() -> tuple[set[str], str, str]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.token}"}, timeout=30)
            async with http, Client(streamable_http_client(f"{served.base}/mcp", http_client=http), mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                echoed = await client.call_tool("stub__echo", {"text": "over http"})
                listed = await client.call_tool("mcp_setup_list_servers", {})
                return names, echoed.content[0].text, listed.content[0].text

        with anyio.from_thread.start_blocking_portal() as portal:
            names, echoed, listed = portal.call(use_gateway)
        assert {"mcp_setup_search", "stub__echo", "stub__whoami"} <= names
        assert echoed == "over http"
        assert '"status": "connected"' in listed
        assert canary not in listed


def test_mcp_refuses_no_token_or_a_wrong_one_with_401_and_a_foreign_origin_with_403(tmp_path: Path, canary: str) -> None:
    with serving(tmp_path, canary) as served, httpx.Client(base_url=served.base, timeout=10, trust_env=False) as http:
        none = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert none.status_code == 401 and none.headers["www-authenticate"].startswith("Bearer")
        wrong = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401
        foreign = http.post(
            "/mcp", json=INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {served.token}", "Origin": "http://evil.example"},
        )  # fmt: skip
        assert foreign.status_code == 403
        right = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {served.token}"})
        assert right.status_code == 200, right.text
        assert "mcp-setup" in right.text
