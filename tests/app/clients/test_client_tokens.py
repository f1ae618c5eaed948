"""Each HTTP client has its own credential; only the person holds the one that approves.

``mcp-setup client connect CLIENT --http`` writes a new client token, named for the client, into
that client's config; ``/mcp`` refuses the page link's key; a client token calls tools and
approves nothing, so an agent holding one cannot approve its own launch."""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.exceptions import InvalidStatus

from tests.browser.serve import STUB, Served, make_catalog, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled


def cli(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        mcp_setup_argv(*args), env=face_env(home), cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
    )
    if ok:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def bearer_of(entry: dict[str, Any]) -> str:
    headers = entry.get("headers") or entry.get("http_headers")
    scheme, _, token = headers["Authorization"].partition(" ")
    assert scheme == "Bearer"
    return token


@pytest.mark.parametrize(
    ("client", "file_name", "url_key", "extra"),
    [
        ("claude-code", "claude.json", "url", {"type": "http"}),
        ("cursor", "mcp.json", "url", {}),
        ("vscode", "mcp.json", "url", {"type": "http"}),
        ("gemini", "settings.json", "httpUrl", {}),
        ("windsurf", "mcp_config.json", "serverUrl", {}),
        ("codex", "config.toml", "url", {}),
    ],
)
def test_client_connect_http_writes_a_new_client_token_of_that_clients_own_in_its_format(
    tmp_path: Path, client: str, file_name: str, url_key: str, extra: dict[str, str]
) -> None:
    config = tmp_path / file_name
    cli(tmp_path, "client", "connect", client, "--http", "--config", str(config))
    text = config.read_text()
    doc = tomllib.loads(text) if file_name.endswith(".toml") else json.loads(text)
    servers = doc.get("mcp_servers") or doc.get("mcpServers") or doc.get("servers")
    entry = servers["mcp-setup"]
    assert entry[url_key] == "http://127.0.0.1:8765/mcp"
    assert all(entry[k] == v for k, v in extra.items())
    token = bearer_of(entry)
    assert token.startswith("mcps_")
    listed = cli(tmp_path, "token", "list").stdout
    assert f"{client}\t" in listed and "\tclient" in listed and token not in listed
    assert cli(tmp_path, "client", "list").returncode == 0


def test_reconnecting_a_client_revokes_its_old_token_and_a_dry_run_makes_none(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    dry = cli(tmp_path, "client", "connect", "cursor", "--http", "--dry-run", "--config", str(config))
    assert "<a new client token>" in dry.stdout and not config.exists()
    assert "cursor" not in cli(tmp_path, "token", "list").stdout  # nothing was made
    cli(tmp_path, "client", "connect", "cursor", "--http", "--config", str(config))
    first = bearer_of(json.loads(config.read_text())["mcpServers"]["mcp-setup"])
    cli(tmp_path, "client", "connect", "cursor", "--http", "--config", str(config))
    second = bearer_of(json.loads(config.read_text())["mcpServers"]["mcp-setup"])
    assert first != second
    from setup_agent.secrets import Vault
    from setup_agent.store import Store

    with Store.for_data_dir(tmp_path / "data", Vault.in_memory()) as store:
        tokens = store.tokens
        assert tokens.lookup(first) is None  # the old one is refused from now on
        found = tokens.lookup(second)
        assert found is not None and found.kind == "client" and not found.admin


def test_claude_desktop_is_told_it_takes_only_local_servers_and_nothing_is_made(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    done = cli(tmp_path, "client", "connect", "claude-desktop", "--http", "--config", str(config), ok=False)
    assert done.returncode == 1
    assert "takes only local servers" in done.stderr and "without --http" in done.stderr
    assert not config.exists() and "claude-desktop" not in cli(tmp_path, "token", "list").stdout


def test_a_member_token_of_the_same_name_is_never_replaced_by_a_client_connect(tmp_path: Path) -> None:
    member = cli(tmp_path, "token", "create", "cursor").stdout.split()[0]
    done = cli(tmp_path, "client", "connect", "cursor", "--http", "--config", str(tmp_path / "m.json"), ok=False)
    assert done.returncode == 1 and "already exists" in done.stderr
    from setup_agent.secrets import Vault
    from setup_agent.store import Store

    with Store.for_data_dir(tmp_path / "data", Vault.in_memory()) as store:
        found = store.tokens.lookup(member)
        assert found is not None and found.kind == "member"


@pytest.fixture
def asking(tmp_path: Path, canary: str) -> Iterator[Served]:
    """``serve`` with consent on."""
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        yield served
    finally:
        code = stop_serve(served)
        log = served.stderr()
        assert code == 0 and "Traceback" not in log, log
        assert canary not in log and served.token not in log


def _next(ws: Any, kind: str) -> dict[str, Any]:
    while True:
        event = json.loads(ws.recv(timeout=scaled(60)))
        if event.get("type") == kind:
            return event


def _over_mcp(served: Served, token: str, tool: str, arguments: dict[str, Any]) -> str:
    """One tool call through ``/mcp`` with the SDK's client under ``token``: everything it got, as text."""

    async def talk() -> str:
        with anyio.fail_after(scaled(90)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(60))
            transport = streamable_http_client(f"{served.base}/mcp", http_client=http)
            async with http, Client(transport, mode="legacy") as client:
                listed = await client.list_tools()
                called = await client.call_tool(tool, arguments)
                return json.dumps([listed.model_dump(mode="json"), called.model_dump(mode="json")])

    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(talk)


def test_an_agent_with_a_client_token_cannot_approve_its_own_launch_at_any_step(
    asking: Served, canary: str, tmp_path: Path
) -> None:
    served = asking
    config = tmp_path / "claude.json"
    done = subprocess.run(
        mcp_setup_argv("client", "connect", "claude-code", "--http", "--config", str(config)),
        env=served.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert done.returncode == 0, done.stderr
    entry = json.loads(config.read_text())["mcpServers"]["mcp-setup"]
    assert entry["url"] == f"{served.base}/mcp"  # the running serve's address
    token = bearer_of(entry)
    agent = {"Authorization": f"Bearer {token}"}
    received: list[str] = []
    with served.websocket() as user_ws, served.client() as http:
        # The agent asks for the key; the person types it on the one-time page.
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "mcp_setup_request_secret",
            "params": {"key_name": "STUB_API_KEY", "prompt": "k", "server": STUB},
        }
        asked = http.post("/rpc", json=body, headers=agent)
        assert asked.status_code == 200, asked.text
        received.append(asked.text)
        prompt = asked.json()["result"]
        key = prompt["url"].rsplit("?t=", 1)[1]
        assert http.post(f"/secrets/{prompt['prompt_id']}", data={"t": key, "value": canary}).status_code == 200

        # Its launch waits for the person; what the agent gets holds no consent id or link.
        args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
        tested = http.post("/rpc", json={**body, "method": "mcp_setup_test_connection", "params": args}, headers=agent)
        received.append(tested.text)
        assert tested.json()["error"]["data"]["code"] == "consent_required", tested.text
        consent_id = _next(user_ws, "consent_request")["consent_id"]
        received.append(_over_mcp(served, token, "mcp_setup_list_servers", {}))  # /mcp takes its token

        # Step by step, what the review's agent did with the printed link's key:
        with pytest.raises(InvalidStatus) as refused_ws:  # the person's websocket, with a hand-set Origin
            served.websocket(Authorization=f"Bearer {token}", **{"X-MCP-Setup-Token": ""}).close()
        assert refused_ws.value.response.status_code == 403
        page = http.get("/", headers=agent)
        assert page.status_code == 403 and "set-cookie" not in page.headers
        approve = {"approve": True, "accept_warnings": True, "paths": [str(Path.home())]}
        refused = http.post(f"/api/consents/{consent_id}", json=approve, headers={**agent, "Origin": served.origin})
        assert refused.status_code == 403
        for route in ("servers.enable", "servers.disable"):
            changed = http.post(
                "/rpc", json={"jsonrpc": "2.0", "id": 2, "method": route, "params": {"server_id": STUB}}, headers=agent
            )
            received.append(changed.text)
            assert "tool_not_allowed" in changed.text or changed.status_code == 403, changed.text

        # The launch is still waiting: nothing ran.
        still = http.post("/rpc", json={**body, "method": "mcp_setup_test_connection", "params": args}, headers=agent)
        received.append(still.text)
        assert still.json()["error"]["data"]["code"] == "consent_required", still.text
    for text in received:
        assert consent_id not in text and served.token not in text and canary not in text
        assert "/secrets/consents/" not in text


def test_the_page_links_key_never_opens_mcp_but_still_opens_the_page(asking: Served) -> None:
    served = asking
    with httpx.Client(base_url=served.base, timeout=scaled(10), trust_env=False) as http:
        assert http.get("/", params={"t": served.token}).status_code == 200
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "a", "version": "0"},
            },
        }
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {served.token}"}
        refused = http.post("/mcp", json=body, headers=headers)
        assert refused.status_code == 401
        assert "client connect" in refused.json()["error"]["message"]
