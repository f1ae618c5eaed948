"""A live connection serves a 2025-era client on a 2025-11-25 session of a server it reaches in the
2026-07-28 era: the server's requests during the call (here sampling) reach that client, as they
would directly, while a 2026 client's calls stay on the 2026 session (where a server has no
back-channel for them). A local server runs a second process for that session only while a 2025
client's session lasts. Real stub servers (both eras) behind a real store and manager, and the MCP
face served in process to the SDK's clients of both eras."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.passthrough import modern
from setup_agent.gateway.router import Gateway
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.asking_gateway import face
from tests.helpers.paths import STUB_DIR
from tests.helpers.processes import pids_in, process_alive, wait_gone
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

STUB = STUB_DIR / "conformance_server.py"
PING = "modern__ping_modern"


class Caller:
    """A client of a call, of one era, that answers sampling."""

    def __init__(self, *, modern: bool) -> None:
        self.modern, self.principal = modern, "client:test"
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def can(self, capability: str) -> bool:
        return not self.modern and capability == "sampling"

    def declares(self, capability: str) -> bool:
        return capability == "sampling"

    def capabilities(self) -> dict[str, Any]:
        return {"sampling": {}}

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.asked.append((method, params))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    async def log(self, params: dict[str, Any]) -> None:
        pass


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[tuple[ConnectionManager, str]]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    server = store.servers.install(
        qualified_name="io.test/both-eras",
        source="local",
        version="1.0.0",
        package_type="stdio",
        launch_spec=LaunchSpec(command=sys.executable, args=[str(STUB)]).model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
    )
    manager = ConnectionManager(store, Redactor(), install_root=tmp_path / "servers", connect_timeout=scaled(30))
    try:
        yield manager, server.server_id
    finally:
        await manager.aclose()
        store.close()


async def test_a_2025_clients_call_goes_on_a_2025_session_where_the_server_can_ask_it_during_the_call(
    manager: tuple[ConnectionManager, str],
) -> None:
    connections, server_id = manager
    with anyio.fail_after(scaled(60)):
        await connections.start()
        assert connections.status(server_id).status == "connected"
        assert modern(connections.forwarding._get(server_id).client)  # the server speaks 2026-07-28

        classic = Caller(modern=False)
        result = await connections.call_tool(server_id, "test_sampling", {"prompt": "Capital?"}, caller=classic)
        assert result["content"][0]["text"] == "LLM response: Paris"
        assert [method for method, _ in classic.asked] == ["sampling/createMessage"]

        new = Caller(modern=True)
        result = await connections.call_tool(server_id, "test_sampling", {"prompt": "Capital?"}, caller=new)
        assert "no back-channel" in result["content"][0]["text"] and new.asked == []


async def test_a_server_whose_question_to_the_client_is_unanswered_is_not_stopped_when_idle(
    manager: tuple[ConnectionManager, str],
) -> None:
    """A form relayed to a 2025-era client during the call: the person may take longer than the
    idle time to answer it; the server is spared, and the call ends with their answer."""
    connections, server_id = manager
    asked, answer = anyio.Event(), anyio.Event()

    class Person(Caller):
        def can(self, capability: str) -> bool:
            return capability == "elicitation.form"

        async def request(self, method: str, params: dict[str, Any]) -> Any:
            asked.set()
            await answer.wait()
            return types.ElicitResult(action="accept", content={"response": "later"})

    done: list[dict[str, Any]] = []

    async def call() -> None:
        done.append(await connections.call_tool(server_id, "test_elicitation", {"message": "Sure?"}, caller=person))

    person = Person(modern=False)
    with anyio.fail_after(scaled(60)):
        await connections.start()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await asked.wait()
            assert await connections.stop_idle(0) == []  # its idle time is long past
            answer.set()
    assert "later" in done[0]["content"][0]["text"]
    assert await connections.stop_idle(0) == [server_id]  # once answered, it stops as any idle server


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[Gateway, Path]]:
    """tests/stub_server/modern_server.py (both eras, stdio) installed behind a gateway, its tools
    listed; every process of it writes its pid to the file."""
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    pid_file = tmp_path / "pids"
    launch = LaunchSpec(
        command=sys.executable,
        args=[str(STUB_DIR / "modern_server.py")],
        env={"STUB_REQUIRE": "0", "STUB_PID_FILE": str(pid_file)},
    )
    store.servers.install(
        qualified_name="io.test/modern",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=launch.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
        tools=None,
    )
    redactor = Redactor()
    connections = ConnectionManager(store, redactor, install_root=tmp_path / "servers", connect_timeout=scaled(30))
    gw = Gateway(store, connections, redactor, eager=False, poll_interval=0.1)
    changed = anyio.Event()

    async def heard() -> None:
        changed.set()

    gw.add_listener(heard)
    await gw.start()
    try:
        with anyio.fail_after(scaled(30)):
            while PING not in {t["name"] for t in gw.catalog.wire_tools()}:
                await changed.wait()
                changed = anyio.Event()
        yield gw, pid_file
    finally:
        await gw.aclose()
        await connections.aclose()
        store.close()


def _running(pid_file: Path) -> list[int]:
    """The server's processes alive now (from /proc)."""
    return [pid for pid in pids_in(pid_file) if process_alive(pid)]


async def _pong(client: Client) -> None:
    result = await client.call_tool(PING, {})
    assert not result.is_error and result.content[0].text == "pong", result  # type: ignore[union-attr]


async def test_a_second_process_runs_only_while_a_2025_clients_session_lasts_beside_a_2026_client(
    gateway: tuple[Gateway, Path],
) -> None:
    gw, pid_file = gateway
    served = face(gw)
    with anyio.fail_after(scaled(60)):
        async with Client(served.server) as new:
            assert str(new.session.protocol_version) >= "2026"
            await _pong(new)
            (first,) = _running(pid_file)  # one process for the 2026 client

            async with Client(served.server, mode="legacy") as old:
                await _pong(old)
                await _pong(new)
                both = _running(pid_file)
                # A stdio connection speaks one era: the 2025 client's session is a second process.
                assert len(both) == 2 and first in both
            (second,) = [pid for pid in both if pid != first]
            assert await anyio.to_thread.run_sync(wait_gone, [second]) == []  # its session ended: it stops
            assert _running(pid_file) == [first]
            await _pong(new)

            async with Client(served.server, mode="legacy") as again:  # started again, only when needed
                assert _running(pid_file) == [first]
                await _pong(again)
                third = [pid for pid in _running(pid_file) if pid not in (first, second)]
                assert len(third) == 1
        assert await anyio.to_thread.run_sync(wait_gone, third) == []
