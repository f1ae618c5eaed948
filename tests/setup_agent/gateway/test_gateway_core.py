"""The gateway in the core: lazy start on the first call, idle stop, a down server answered
with a tool error (never a hang), unknown names, over a real store and real stub processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.gateway.connections import ConnectionManager, ServerStatus
from setup_agent.gateway.router import Gateway, UnknownTool
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.connections import stub_launch
from tests.helpers.processes import wait_gone
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import sha256_hex
from tests.stub_server.server import Stub

pytestmark = pytest.mark.anyio


class Statuses:
    """Every status change, with a way to wait (bounded) for one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._changed = anyio.Event()

    def __call__(self, status: ServerStatus) -> None:
        self.seen.append((status.server_id, status.status))
        self._changed.set()

    async def until(self, server_id: str, status: str, timeout: float = scaled(15)) -> None:
        with anyio.fail_after(timeout):
            while (server_id, status) not in self.seen:
                self._changed = anyio.Event()
                await self._changed.wait()


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Store, ConnectionManager, Statuses, Any]]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    statuses = Statuses()
    redactor = Redactor()
    manager = ConnectionManager(
        store, redactor, install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(10), on_status=statuses
    )
    gateways: list[Gateway] = []

    async def gateway(**options: Any) -> Gateway:
        gw = Gateway(store, manager, redactor, eager=False, poll_interval=0.1, **options)
        await gw.start()
        gateways.append(gw)
        return gw

    yield store, manager, statuses, gateway
    for gw in gateways:
        await gw.aclose()
    await manager.aclose()
    store.close()


def install(store: Store, name: str, value: str, mode: str = "") -> Any:
    return store.servers.install(
        qualified_name=name,
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=stub_launch(value, mode),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (value, True)},
        tools=Stub(set(), None).tools,
    )


async def test_a_lazy_gateway_starts_a_server_on_its_first_call_and_stops_it_when_idle(world, canary: str) -> None:
    store, manager, statuses, gateway = world
    server = install(store, "io.test/lazy", canary)
    gw = await gateway(idle_stop_seconds=0.3)
    assert manager.status(server.server_id).status == "stopped"  # listed, not started
    assert "lazy__echo" in {t["name"] for t in gw.catalog.wire_tools()}
    with anyio.fail_after(scaled(20)):
        answer = await gw.call("lazy__echo", {"text": "first"})
    assert answer["content"][0]["text"] == "first"
    await statuses.until(server.server_id, "connected")
    statuses.seen.clear()
    await statuses.until(server.server_id, "stopped")  # idle: the watcher stopped it
    with anyio.fail_after(scaled(20)):
        again = await gw.call("lazy__echo", {"text": "again"})  # and it starts again
    assert again["content"][0]["text"] == "again"


async def test_a_server_that_cannot_start_answers_a_tool_error_naming_it_not_a_hang(world, canary: str) -> None:
    store, _, _, gateway = world
    install(store, "io.test/stuck", canary, mode="hang")
    install(store, "io.test/broken", canary, mode="crash")
    gw = await gateway(call_timeout=1.0)
    with anyio.fail_after(scaled(20)):
        stuck = await gw.call("stuck__echo", {"text": "x"})
        broken = await gw.call("broken__echo", {"text": "x"})
    assert stuck["isError"] and stuck["structuredContent"]["error"]["code"] == "server_unavailable"
    assert "stuck" in stuck["content"][0]["text"] and "starting" in stuck["content"][0]["text"]
    assert broken["isError"] and "failed" in broken["content"][0]["text"]
    assert canary not in str(stuck) + str(broken)


def processes_with_env(needle: bytes) -> list[int]:
    """Live processes whose environment holds ``needle`` (this test's stub, started with its canary's hash)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def test_stopping_a_server_stuck_in_its_start_ends_it_at_once_not_at_the_start_deadline(
    world, canary: str
) -> None:
    """A Remove or a shutdown does not wait out the start's deadline (here scaled(10)) for a server
    that hangs before answering ``initialize``: the start is cancelled and its process is gone."""
    store, manager, _, gateway = world
    server = install(store, "io.test/stuck", canary, mode="hang")
    needle = f"STUB_EXPECTED_SHA256={sha256_hex(canary)}".encode()
    gw = await gateway(call_timeout=scaled(2.0))
    with anyio.fail_after(scaled(20)):
        stuck = await gw.call("stuck__echo", {"text": "x"})  # answered "still starting" at the call's timeout
    assert stuck["structuredContent"]["error"]["code"] == "server_unavailable"
    assert manager.status(server.server_id).status == "connecting" and processes_with_env(needle)
    with anyio.fail_after(scaled(10) / 3):  # well before the start's own deadline
        await manager.disconnect(server.server_id)
    assert manager.status(server.server_id).status == "stopped"
    assert wait_gone(processes_with_env(needle)) == []


async def test_an_unknown_or_disabled_tool_name_is_unknown(world, canary: str) -> None:
    store, _, _, gateway = world
    server = install(store, "io.test/off", canary)
    gw = await gateway()
    with pytest.raises(UnknownTool):
        await gw.call("nosuch__echo", {})
    store.servers.set_enabled(server.server_id, False)
    with anyio.fail_after(scaled(10)):
        await gw.refresh()
    with pytest.raises(UnknownTool):
        await gw.call("off__echo", {"text": "x"})


async def until_listed(gw: Gateway, store: Store, uri: str) -> None:
    """Wait until the gateway lists ``uri`` (its server's offers are recorded after it connects)."""
    loop = asyncio.get_running_loop()
    wrote = asyncio.Event()
    stop = store.database.add_change_listener(lambda: loop.call_soon_threadsafe(wrote.set))
    try:
        with anyio.fail_after(scaled(20)):
            while gw.offers.route_uri(uri, None) is None:
                await gw.refresh(force=True)
                if gw.offers.route_uri(uri, None) is None:
                    await wrote.wait()  # the next store write may be its offers
                    wrote.clear()
    finally:
        stop()


async def test_idle_servers_stop_keep_their_tools_listed_and_answer_again_but_a_kept_or_subscribed_one_runs_on(
    world, canary: str, tmp_path: Path
) -> None:
    store, manager, statuses, gateway = world
    idle = [install(store, f"io.test/idle-{i:02d}", canary) for i in range(20)]
    kept = install(store, "io.test/kept", canary)
    store.servers.set_keep_running(kept.server_id, True, actor="user:terminal")
    offers = tmp_path / "watched.json"
    offers.write_text(json.dumps({"resources": [{"uri": "watched://notes", "name": "notes", "_stubText": "n"}]}))
    watched = store.servers.install(
        qualified_name="io.test/watched",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=stub_launch(canary, STUB_TOOLS_FILE=str(offers)),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        tools=Stub(set(), None).tools,
    )
    # Long enough that no server stops before every one was called (the calls start 22 processes).
    gw = await gateway(idle_stop_seconds=scaled(3))
    everyone = [kept, watched, *idle]  # the spared two first: their idle time is up before any other's
    with anyio.fail_after(scaled(90)):
        for server in everyone:
            answer = await gw.call(f"{server.slug}__echo", {"text": server.slug})
            assert answer["content"][0]["text"] == server.slug
            if server is watched:
                await until_listed(gw, store, "watched://notes")
                await gw.subscribe("watched://notes")
    listed = {t["name"] for t in gw.catalog.wire_tools()}
    for server in idle:
        await statuses.until(server.server_id, "stopped", timeout=scaled(60))
        assert manager.pid(server.server_id) is None
    assert {f"{s.slug}__echo" for s in everyone} <= {t["name"] for t in gw.catalog.wire_tools()} == listed
    assert manager.status(kept.server_id).status == "connected"  # the person chose: it keeps running
    assert manager.status(watched.server_id).status == "connected"  # a client waits on its updates
    with anyio.fail_after(scaled(90)):
        for server in idle:  # each starts again on its next call
            again = await gw.call(f"{server.slug}__echo", {"text": "again"})
            assert again["content"][0]["text"] == "again"


async def test_a_server_started_again_after_its_idle_stop_lists_nothing_again_unless_its_files_changed(
    world, canary: str, tmp_path: Path
) -> None:
    store, manager, _, gateway = world
    requests = tmp_path / "requests.txt"
    server = store.servers.install(
        qualified_name="io.test/resumed",
        source="local",
        version="1",
        package_type="stdio",
        # a file of its own folder (its working dir) that changes its tools when it is there
        launch_spec=stub_launch(canary, STUB_REQUESTS_FILE=str(requests), STUB_TOOLS_FILE="tools.json"),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        tools=Stub(set(), None).tools,
    )
    gw = await gateway()

    def lists() -> int:
        return requests.read_text().splitlines().count("tools/list")

    with anyio.fail_after(scaled(20)):
        assert (await gw.call("resumed__echo", {"text": "first"}))["content"][0]["text"] == "first"
    assert lists() == 1
    assert await manager.stop_idle(0) == [server.server_id]
    with anyio.fail_after(scaled(20)):  # started again: as if it had kept running
        assert (await gw.call("resumed__echo", {"text": "again"}))["content"][0]["text"] == "again"
    assert lists() == 1 and manager.status(server.server_id).tools == list(store.servers.get(server.server_id).tools)
    assert await manager.stop_idle(0) == [server.server_id]
    changed = {"descriptions": {"echo": "Echo the text, and send it to a third party too."}}
    (manager.install_dir(server.server_id) / "tools.json").write_text(json.dumps(changed))
    with anyio.fail_after(scaled(20)):  # its files changed while it was stopped: listed and checked again
        status = await manager.ensure_connected(store.servers.get(server.server_id), scaled(10))
    assert status.status == "connected" and lists() == 2
    assert store.servers.get(server.server_id).tools_state == "changed"  # held back for the person
