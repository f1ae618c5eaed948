"""A hostile installed server that asks its clients things (tests/stub_server/asking.py), a real
stub process behind a real store, guard and gateway, with another installed server whose stored
secret it wants; and the MCP face served to the SDK's clients in process."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from mcp import Client

from app.mcp.face import McpFace
from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.relay_rules import RelayRules
from setup_agent.gateway.router import Gateway
from setup_agent.launch import LaunchSpec
from setup_agent.secrets.guard import GuessGuard
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.paths import STUB_DIR
from tests.helpers.timeouts import scaled

__all__ = ["ASK", "ASKING_PY", "FORM", "Relayed", "ask", "face", "relayed_gateway"]

ASKING_PY = STUB_DIR / "asking.py"
ASK = "asking__ask"
FORM = {"type": "object", "properties": {"colour": {"type": "string", "title": "Favourite colour"}}}


@dataclass
class Relayed:
    """One installed server behind a gateway, and what it and the user were told."""

    gateway: Gateway
    guard: GuessGuard
    manager: ConnectionManager
    record: Path  # every line the hostile server received
    told: list[str] = field(default_factory=list)  # what the user was told, in mcp-setup's voice
    heard: anyio.Event = field(default_factory=anyio.Event)  # set each time the user is told something

    def received(self) -> str:
        return self.record.read_text(encoding="utf-8") if self.record.exists() else ""


@asynccontextmanager
async def relayed_gateway(tmp_path: Path, canary: str, **manager: Any) -> AsyncIterator[Relayed]:
    """The asking server installed beside a victim holding ``canary`` as its stored token, its
    gateway started and its tools listed (``manager``: more arguments of the connection manager)."""
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    guard = GuessGuard(redactor)
    told: list[str] = []
    heard = [anyio.Event()]

    def tell(text: str) -> None:
        told.append(text)
        heard[0].set()

    rules = RelayRules(redactor, check=guard.check, holds_secret=guard.holds_secret, told=tell)
    connections = ConnectionManager(
        store,
        redactor,
        install_root=tmp_path / "servers",
        backoff=(),
        connect_timeout=scaled(15),
        relay_rules=rules,
        **manager,
    )
    record = tmp_path / "received.jsonl"
    launch = LaunchSpec(command=sys.executable, args=[str(ASKING_PY)], env={"ASKING_RECORD": str(record)})
    store.servers.install(  # another server, whose stored secret the hostile one wants
        qualified_name="io.test/victim",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=LaunchSpec(command=sys.executable, args=["-c", "pass"]).model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={"VICTIM_TOKEN": (canary, True)},
        title="Victim",
        tools=[{"name": "noop", "inputSchema": {"type": "object"}}],
    )
    asking = store.servers.install(
        qualified_name="io.test/asking",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=launch.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
        title="Asking",
        tools=None,
    )
    gw = Gateway(store, connections, redactor, eager=False, poll_interval=0.1, check_arguments=guard.check)
    changed = anyio.Event()

    async def heard_change() -> None:
        changed.set()

    gw.add_listener(heard_change)
    connections.add_status_listener(lambda _status: changed.set())
    await gw.start()
    with anyio.fail_after(scaled(20)):
        # The first connect records its tools; the watcher reloads the catalog, then the live record.
        while (
            ASK not in {t["name"] for t in gw.catalog.wire_tools()}
            or len(getattr(connections.connected_server(asking.server_id), "tools", ())) < 2
        ):
            await changed.wait()
            changed = anyio.Event()
    relayed = Relayed(gw, guard, connections, record, told, heard[0])
    try:
        yield relayed
    finally:
        await gw.aclose()
        await connections.aclose()
        store.close()


def face(gw: Gateway) -> McpFace:
    """The MCP face over ``gw`` (every installed tool listed)."""
    return McpFace(SimpleNamespace(gateway=gw, settings=SimpleNamespace(gateway_tools="all")))


async def ask(client: Client, method: str, params: dict[str, Any], **more: Any) -> dict[str, Any]:
    """The asking server's ``ask`` tool: what its request to the client got back."""
    result = await client.call_tool(ASK, {"method": method, "params": params, **more})
    assert not result.is_error, result
    answer: dict[str, Any] = json.loads(result.content[0].text)
    return answer
