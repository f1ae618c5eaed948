"""The gateway over streamable HTTP: ``/mcp`` of ``mcp-setup serve``, with the SDK's client.

The same surface as ``mcp-setup mcp`` (setup tools + installed tools), the process token as
``Authorization: Bearer``, 401 without it or with a wrong one, 403 for a foreign Origin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from setup_agent.secrets.vault import Vault
from tests.browser.serve import make_catalog, serving, start_serve, stop_serve
from tests.helpers.timeouts import scaled
from tests.helpers.web_serve import install_stub

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def over_http(served: Any, tool: str, arguments: dict[str, Any]) -> tuple[set[str], str, str]:
    """Through ``/mcp`` with the SDK's client and a client token of its own: (tool names, the
    tool's text, list_servers' text)."""
    token = served.client_token()

    async def talk() -> tuple[set[str], str, str]:
        with anyio.fail_after(scaled(60)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(30))
            async with (
                http,
                Client(streamable_http_client(f"{served.base}/mcp", http_client=http), mode="legacy") as client,
            ):
                names = {t.name for t in (await client.list_tools()).tools}
                answered = await client.call_tool(tool, arguments)
                listed = await client.call_tool("mcp_setup_list_servers", {})
                return names, answered.content[0].text, listed.content[0].text

    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(talk)


def test_an_http_client_lists_and_calls_an_installed_tool_at_mcp(tmp_path: Path, canary: str) -> None:
    with serving(tmp_path, canary) as served:
        install_stub(served, canary)

        names, echoed, listed = over_http(served, "stub__echo", {"text": "over http"})
        assert {"mcp_setup_search", "stub__echo", "stub__whoami"} <= names
        assert echoed == "over http"
        assert '"status": "connected"' in listed
        assert canary not in listed


def test_mcp_refuses_no_token_a_wrong_one_and_the_page_links_key_with_401_and_a_foreign_origin_with_403(
    tmp_path: Path, canary: str
) -> None:
    with (
        serving(tmp_path, canary) as served,
        httpx.Client(base_url=served.base, timeout=scaled(10), trust_env=False) as http,
    ):
        token = served.client_token()
        none = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert none.status_code == 401 and none.headers["www-authenticate"].startswith("Bearer")
        wrong = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401
        # The page link's key is the person's: in every form it is refused here, saying what to do.
        for link_key in (
            {"Authorization": f"Bearer {served.token}"},
            {"X-MCP-Setup-Token": served.token},
            {"Cookie": f"mcp_setup_{served.port}={served.token}", "Origin": served.origin},
        ):
            refused = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **link_key})
            assert refused.status_code == 401, link_key
            assert "mcp-setup client connect" in refused.json()["error"]["message"]
        foreign = http.post(
            "/mcp",
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}", "Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403
        right = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
        assert right.status_code == 200, right.text
        assert "mcp-setup" in right.text
        # It sends notifications/tools/list_changed, so it says so (#29 item 1), as stdio does.
        answer = json.loads(next(line[5:] for line in right.text.splitlines() if line.startswith("data:")))
        assert answer["result"]["capabilities"]["tools"] == {"listChanged": True}


@pytest.fixture
def instances() -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    for served in started:
        stop_serve(served)


def test_two_serve_instances_on_one_database_serve_each_others_installs(
    tmp_path: Path, database_url: str | None, canary: str, instances: list[Any]
) -> None:
    """A team's two gateways (their own data dirs, one database, one data key): an install
    through A is connected by B, listed and callable through B's /mcp, without a restart."""
    team_key = tmp_path / "team.key"
    Vault.in_memory().export_key(team_key)
    shared_db = database_url or f"sqlite:///{tmp_path / 'team.db'}"
    catalog = make_catalog(tmp_path, canary)
    env = {"MCP_SETUP_DATABASE_URL": shared_db, "MCP_SETUP_DATA_KEY_FILE": str(team_key)}
    a = start_serve(tmp_path / "a", catalog, **env)
    instances.append(a)
    b = start_serve(tmp_path / "b", catalog, **env)
    instances.append(b)
    with b.websocket() as ws:

        def until_b_says(server_id: str, status: str) -> None:
            while True:  # each recv is bounded
                event = json.loads(ws.recv(timeout=scaled(20)))
                if event.get("server_id") == server_id and event.get("status") == status:
                    return

        json.loads(ws.recv(timeout=scaled(10)))  # hello
        server_id = install_stub(a, canary)
        until_b_says(server_id, "connected")  # B connects it on its own
        listed = b.rpc("servers.list")["result"]["servers"]
        assert [(s["server_id"], s["status"]) for s in listed] == [(server_id, "connected")]
        names, echoed, _ = over_http(b, "stub__echo", {"text": "via B"})
        assert "stub__echo" in names and echoed == "via B"
        assert a.rpc("servers.remove", {"server_id": server_id})["result"] == {"ok": True, "removed": True}
        until_b_says(server_id, "stopped")  # B saw the removal and stopped its copy
    names, _, _ = over_http(b, "mcp_setup_list_servers", {})
    assert "stub__echo" not in names
    assert not (tmp_path / "b" / "data" / "servers" / server_id).exists()
    for served in (a, b):
        assert canary not in served.stderr()
