"""An installed server that adds a tool at runtime (tests/stub_server/growing.py, a real
process) behind a real store, connection manager and gateway: its ``list_changed`` (2025
era) or ``subscriptions/listen`` event (2026-07-28) makes the gateway list it again; the new
tool is held for the user by the pins, and once they approve it the gateway's listeners hear
of it once and the tool is callable."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.router import Gateway, UnknownTool
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.paths import REPO
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

GROWING = REPO / "tests" / "stub_server" / "growing.py"


class World:
    def __init__(self, store: Store, gateway: Gateway, server_id: str, era: str) -> None:
        self.store, self.gateway, self.server_id, self.era = store, gateway, server_id, era
        self.held = anyio.Event()  # the connection found a list that differs from the pin
        self.heard: list[frozenset[str]] = []  # what each announcement of the gateway said changed
        self.announced = anyio.Event()

    def on_held(self, server: Any) -> None:
        self.held.set()

    async def on_change(self) -> None:
        self.heard.append(self.gateway.last_changes)
        self.announced.set()


@pytest.fixture(params=["2025", "2026"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    env = {"STUB_GROWN_FILE": str(tmp_path / "grown"), "STUB_ERA": request.param}
    server = store.servers.install(
        qualified_name="io.test/growing",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=LaunchSpec(command=sys.executable, args=[str(GROWING)], env=env).model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
        title="Growing",
        tools=None,  # the first list the gateway reads is pinned
    )
    holder: list[World] = []
    manager = ConnectionManager(
        store,
        redactor,
        install_root=tmp_path / "servers",
        backoff=(),
        connect_timeout=scaled(20),
        on_tools_changed=lambda s: holder[0].on_held(s),
    )
    gw = Gateway(store, manager, redactor, eager=True, poll_interval=0.1)
    world = World(store, gw, server.server_id, request.param)
    holder.append(world)
    gw.add_listener(world.on_change)
    with anyio.fail_after(scaled(40)):
        await gw.start()
        while not _listed(gw):  # its first lists (tools, then its resource), recorded
            await world.announced.wait()
            world.announced = anyio.Event()
        await manager.wait_all_settled(scaled(30))
    world.heard.clear()
    try:
        yield world
    finally:
        await gw.aclose()
        await manager.aclose()
        store.close()


def _listed(gw: Gateway) -> bool:
    tools = {t["name"] for t in gw.catalog.wire_tools()}
    return "growing__grow" in tools and "growing://notes" in {r.get("uri") for r in gw.offers.resources}


async def test_a_tool_added_at_runtime_is_held_until_approved_then_announced_once_and_callable(world: World) -> None:
    gw = world.gateway
    assert gw.connections.status(world.server_id).status == "connected"
    with anyio.fail_after(scaled(30)):
        grew = await gw.call("growing__grow", {})
        assert grew["content"][0]["text"] == "grew"
        await world.held.wait()  # listed again at once: the new tool waits for the user
    record = world.store.servers.get(world.server_id)
    assert record is not None and record.tools_state == "changed"
    assert {t["name"] for t in record.live_tools} == {"grow", "nap", "touch", "more", "grown"}
    assert "growing__grown" not in {t["name"] for t in gw.catalog.wire_tools()}
    with pytest.raises(UnknownTool):
        await gw.call("growing__grown", {})
    assert world.heard == []  # nothing new to list yet

    world.store.pins.approve_tools(world.server_id, record.live_hash, actor="user:terminal")
    with anyio.fail_after(scaled(30)):
        await world.announced.wait()
        answer = await gw.call("growing__grown", {})
    assert answer["content"][0]["text"] == "grown" and not answer.get("isError")
    assert world.heard == [frozenset({"tools"})]  # once, and only the tool list


@pytest.mark.parametrize("world", ["2026"], indirect=True)  # 2025: resources/subscribe (test_gateway_offers.py)
async def test_a_2026_server_s_resource_a_client_subscribes_to_is_followed_on_its_listen_stream(world: World) -> None:
    gw, heard = world.gateway, anyio.Event()
    updates: list[tuple[str, str]] = []

    async def updated(server_id: str, uri: str) -> None:
        updates.append((server_id, uri))
        heard.set()

    gw.connections.resource_updated.listeners.append(updated)
    with anyio.fail_after(scaled(30)):
        assert await gw.subscribe("growing://notes") == (world.server_id, "growing://notes")
        for _ in range(3):
            await gw.call("growing__touch", {})
            await heard.wait()
            heard = anyio.Event()
        await gw.subscribe("growing://notes", on=False)
        touched = await gw.call("growing__touch", {})
        await gw.call("growing__grow", {})  # a later event on the same stream: the touch's update was not sent
        await world.held.wait()
    assert updates == [(world.server_id, "growing://notes")] * 3
    assert touched["content"][0]["text"] == "touched"


async def test_a_resource_added_at_runtime_is_listed_again_and_announced_once_as_a_resource_list_change(
    world: World,
) -> None:
    gw = world.gateway
    with anyio.fail_after(scaled(30)):
        assert (await gw.call("growing__more", {}))["content"][0]["text"] == "more"
        while "growing://more" not in {r.get("uri") for r in gw.offers.resources}:
            await world.announced.wait()
            world.announced = anyio.Event()
        await gw.call("growing__touch", {})  # a round trip after anything still on its way
    assert world.heard == [frozenset({"resources"})]
