"""``subscriptions/listen`` (2026-07-28) through the gateway: a resource URI a client names on its
stream is subscribed at the installed server that has it, and every update the server sends
reaches the stream, as ``resources/subscribe`` does on 2025-11-25. A real stub process (its
resources and a tool that says a resource changed, from its tools file) behind a real store and
gateway; the MCP face served to the SDK's 2026 client in process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged

from app.mcp import McpFace
from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.router import Gateway
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.connections import stub_launch
from tests.helpers.gateway import start_until
from tests.helpers.timeouts import scaled

pytestmark = [
    pytest.mark.anyio,
    # The gateway subscribes at the 2025-era stub with resources/subscribe, the spec's call there:
    # on purpose, so without the SDK's warning that 2026-07-28 removed it.
    pytest.mark.filterwarnings("error::mcp.shared.exceptions.MCPDeprecationWarning"),
]

NOTES = "alpha://notes"
OFFERS = {
    "resources": [{"uri": NOTES, "name": "notes", "_stubText": "notes"}],
    "extra": [
        {
            "name": "touch",
            "description": "Change the notes.",
            "inputSchema": {"type": "object", "properties": {}},
            "_stubNotify": [{"method": "notifications/resources/updated", "params": {"uri": NOTES}}],
        }
    ],
}


@pytest.fixture
async def gateway(tmp_path: Path, canary: str) -> AsyncIterator[Gateway]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    manager = ConnectionManager(
        store, redactor, install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(15)
    )
    offers = tmp_path / "alpha.json"
    offers.write_text(json.dumps(OFFERS))
    store.servers.install(
        qualified_name="io.test/alpha",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=stub_launch(canary, STUB_TOOLS_FILE=str(offers)),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        title="Alpha",
        tools=None,
    )
    gw = Gateway(store, manager, redactor, eager=True, poll_interval=0.1)
    await start_until(gw, lambda: "alpha__touch" in {t.name for t in gw.catalog.tools()} and _lists_notes(gw))
    await manager.wait_all_settled(scaled(15))
    try:
        yield gw
    finally:
        await gw.aclose()
        await manager.aclose()
        store.close()


def _lists_notes(gw: Gateway) -> bool:
    return NOTES in {r.get("uri") for r in gw.offers.resources}


def _face(gw: Gateway) -> McpFace:
    face = McpFace(SimpleNamespace(gateway=gw, settings=SimpleNamespace(gateway_tools="all")))
    gw.connections.resource_updated.listeners.append(face.offered.updated)
    return face


async def _next(subscription: Any) -> Any:
    with anyio.fail_after(scaled(15)):
        return await subscription.__anext__()


async def test_a_2026_client_hears_every_update_of_a_resource_it_names_on_its_listen_stream(gateway: Gateway) -> None:
    with anyio.fail_after(scaled(60)):
        async with Client(_face(gateway).server, mode="auto") as client:
            assert client.protocol_version >= "2026"
            async with client.listen(resource_subscriptions=[NOTES]) as stream:
                assert stream.honored.resource_subscriptions == [NOTES]
                heard = [await _next(stream)]  # the stub says it changed as it is subscribed
                for _ in range(3):
                    await client.call_tool("alpha__touch", {})
                    heard.append(await _next(stream))
            touched = await client.call_tool("alpha__touch", {})  # the stream is closed: unsubscribed
    assert heard == [ResourceUpdated(uri=NOTES)] * 4
    assert not touched.is_error


async def test_a_stream_that_names_no_resource_hears_no_update_and_a_uri_no_server_has_is_accepted(
    gateway: Gateway,
) -> None:
    face = _face(gateway)
    with anyio.fail_after(scaled(60)):
        async with Client(face.server, mode="auto") as client:
            async with (
                client.listen(tools_list_changed=True) as tools_only,
                client.listen(resource_subscriptions=["gamma://nothing"]) as nowhere,
            ):
                assert nowhere.honored.resource_subscriptions == ["gamma://nothing"]
                await client.call_tool("alpha__touch", {})
                await face.tools_changed(("tools",))  # something the first stream did ask for
                assert await _next(tools_only) == ToolsListChanged()  # and no resource update before it
    assert face.offered.listened == {}
