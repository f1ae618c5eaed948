"""Lists stay live across processes: an installed server adds a tool while it runs.

The growing stub (tests/stub_server/growing.py) is installed in a data dir; ``mcp-setup
serve`` runs on it and a client talks to its ``/mcp``, while another client runs ``mcp-setup
mcp`` over stdio. The stdio client's call makes the server add a tool: the new tool waits for
the user (pinning), and when they approve it (as ``mcp-setup tools-review`` does) each client
hears ``notifications/tools/list_changed`` once and calls the new tool through its gateway.
An install through the setup tools is announced once too, as a tool-list change only.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from setup_agent.secrets.vault import Vault
from tests.browser.serve import start_serve, stop_serve
from tests.helpers.gateway import STUB, ListChanges, lists_tool, make_catalog
from tests.helpers.growing import install_growing
from tests.helpers.mcp_face import Browser, Recorder, call, elicitation_answering, face_env, mcp_setup_client
from tests.helpers.processes import no_process_left
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


async def test_a_tool_a_server_adds_reaches_a_stdio_and_an_http_client_once_each_after_the_user_approves_it(
    tmp_path: Path,
) -> None:
    key = tmp_path / "data.key"
    Vault.in_memory().export_key(key)
    env = face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key))
    home = Path(env["MCP_SETUP_HOME"])
    server_id, store = install_growing(home, key)
    served = start_serve(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key))
    heard_stdio, heard_http = ListChanges(), ListChanges()
    try:
        token = served.client_token("http-client")
        with anyio.fail_after(scaled(120)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(60))
            transport = streamable_http_client(f"{served.base}/mcp", http_client=http)
            async with contextlib.AsyncExitStack() as stack:
                await stack.enter_async_context(http)
                over_http = await stack.enter_async_context(
                    Client(transport, mode="legacy", message_handler=heard_http)
                )
                # serve started the server and pinned its first list: once it lists it, so does the store.
                await heard_http.until(lambda: lists_tool(over_http, "growing__grow"), scaled(60))
                # The stdio face starts after that, its first look at the store holding the tool. (Started
                # before, it may list the tool from the store and be told of that same change by its
                # half-second watch of the store just after the count below is reset.)
                over_stdio = await stack.enter_async_context(
                    mcp_setup_client(tmp_path, tmp_path / "stdio.log", Recorder(), env=env, message_handler=heard_stdio)
                )
                await heard_stdio.until(lambda: lists_tool(over_stdio, "growing__grow"), scaled(60))
                heard_stdio.count = heard_http.count = 0

                with served.websocket() as page:  # the person's page: it shows the change to approve
                    grew = await over_stdio.call_tool("growing__grow", {})
                    assert grew.content[0].text == "grew"
                    shown = await anyio.to_thread.run_sync(_tools_change_shown, page, abandon_on_cancel=True)
                assert shown["consent"]["tools_change"]["diff"]["added"] == ["grown"]
                record = store.servers.get(server_id)
                assert record is not None and record.tools_state == "changed"
                assert not await lists_tool(over_stdio, "growing__grown")  # held for the user
                assert not await lists_tool(over_http, "growing__grown")
                with pytest.raises(MCPError, match="Unknown tool"):
                    await over_http.call_tool("growing__grown", {})

                store.pins.approve_tools(server_id, record.live_hash, actor="user:terminal")
                await heard_stdio.until(lambda: lists_tool(over_stdio, "growing__grown"))
                await heard_http.until(lambda: lists_tool(over_http, "growing__grown"))
                by_stdio = await over_stdio.call_tool("growing__grown", {})
                by_http = await over_http.call_tool("growing__grown", {})
                assert by_stdio.content[0].text == by_http.content[0].text == "grown"
                assert (await over_stdio.call_tool("growing__grow", {})).content[0].text == "grew"  # nothing new
                await over_http.list_tools()  # a round trip after anything either gateway could still send
            assert (heard_stdio.count, heard_http.count) == (1, 1)
    except BaseException:
        print((tmp_path / "stdio.log").read_text(errors="replace")[-4000:])
        for log in home.glob("logs/*"):
            print(log, log.read_text(errors="replace")[-2000:])
        print(served.stderr()[-3000:])
        raise
    finally:
        store.close()
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert "Traceback" not in served.stderr()
    assert no_process_left(str(home))


def _tools_change_shown(page: Any) -> dict[str, Any]:
    """The page's next ``consent_request`` for a changed tool list (the stdio process opened it)."""
    while True:
        event = json.loads(page.recv(timeout=scaled(10)))
        if event.get("type") == "consent_request" and event["consent"].get("action") == "tools_change":
            return event


async def test_an_install_is_announced_to_the_client_once_and_only_as_a_tool_list_change(
    tmp_path: Path, canary: str
) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    recorder, changes = Recorder(), ListChanges()
    with anyio.fail_after(scaled(90)):
        async with mcp_setup_client(
            tmp_path,
            tmp_path / "stdio.log",
            recorder,
            env=env,
            message_handler=changes,
            elicitation_callback=elicitation_answering(Browser(), [canary]),
        ) as client:
            await client.list_tools()
            asked = await call(client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key"})
            installed = await call(
                client,
                "mcp_setup_install_and_connect",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": asked["ref"]}},
            )
            assert installed["status"] == "connected", installed
            await changes.until(lambda: lists_tool(client, "stub__echo"))
            for _ in range(3):  # round trips after anything the gateway could still send
                await client.call_tool("stub__echo", {"text": "after"})
    methods = [json.loads(m).get("method") for m in recorder.messages]
    assert [m for m in methods if m and m.endswith("/list_changed")] == ["notifications/tools/list_changed"]


async def test_a_2026_http_client_hears_every_update_of_a_resource_it_names_on_its_listen_stream(
    tmp_path: Path,
) -> None:
    key = tmp_path / "data.key"
    Vault.in_memory().export_key(key)
    home = Path(face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key))["MCP_SETUP_HOME"])
    _server_id, store = install_growing(home, key, listed=True)
    store.close()
    served = start_serve(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key))
    heard: list[Any] = []
    try:
        token = served.client_token("http-client")
        with anyio.fail_after(scaled(120)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(60))
            transport = streamable_http_client(f"{served.base}/mcp", http_client=http)
            async with http, Client(transport, mode="auto") as client:
                assert client.protocol_version >= "2026"
                while "growing://notes" not in {str(r.uri) for r in (await client.list_resources()).resources}:
                    async with client.listen(resources_list_changed=True) as changes:  # serve is still connecting
                        if "growing://notes" not in {str(r.uri) for r in (await client.list_resources()).resources}:
                            await changes.__anext__()
                async with client.listen(resource_subscriptions=["growing://notes"]) as stream:
                    for _ in range(3):
                        await client.call_tool("growing__touch", {})
                        with anyio.fail_after(scaled(15)):
                            heard.append(await stream.__anext__())
    finally:
        code = stop_serve(served)
    assert [getattr(event, "uri", None) for event in heard] == ["growing://notes"] * 3
    assert code == 0, served.stderr()
    assert no_process_left(str(home))
