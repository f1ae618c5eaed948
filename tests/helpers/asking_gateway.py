"""The asking stub (``tests/stub_server/asking.py``) installed beside a victim server, and behind a
started gateway: what the relay tests build.

The victim holds a stored secret the asking server must never get through an answer, a model's
text or a form. :func:`asking_gateway` opens a store on a temp data dir, installs both, starts the
gateway and waits (bounded) until the catalog lists ``asking__ask`` and the live connection has
the stub's tools; it closes the gateway, the connections and the store on the way out.
:func:`install_victim` and :func:`install_asking` are the two installs alone, for tests that build
the rest their own way (a member's session, ``mcp-setup serve``). :func:`face` serves a gateway to
the SDK's clients in process, and :func:`ask` calls the asking tool through one."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
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
from setup_agent.store import SAMPLING_DEFAULT, InstalledServer, Sampling
from setup_agent.store.database import Store
from tests.helpers.gateway import start_until
from tests.helpers.paths import STUB_DIR
from tests.helpers.timeouts import scaled

#: The asking stub's one tool as the gateway names it: it sends the request it is given to its client.
ASK = "asking__ask"
#: A harmless form a server may ask for.
FORM = {"type": "object", "properties": {"colour": {"type": "string", "title": "Favourite colour"}}}


def install_victim(store: Store, secret: str) -> InstalledServer:
    """Another installed server, holding ``secret`` as its stored ``VICTIM_TOKEN``."""
    return store.servers.install(
        qualified_name="io.test/victim",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=LaunchSpec(command=sys.executable, args=["-c", "pass"]).model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={"VICTIM_TOKEN": (secret, True)},
        title="Victim",
        tools=[{"name": "noop", "inputSchema": {"type": "object"}}],
    )


def install_asking(
    store: Store,
    env: Mapping[str, str],
    *,
    stored: Mapping[str, tuple[str, bool]] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    sampling: Sampling = SAMPLING_DEFAULT,
) -> InstalledServer:
    """``io.test/asking`` (title "Asking"), run with ``env`` in its launch spec and ``stored`` as its
    stored values (``{KEY: (value, secret)}``); ``tools``: as recorded at install (None: none yet)."""
    launch = LaunchSpec(command=sys.executable, args=[str(STUB_DIR / "asking.py")], env=dict(env))
    return store.servers.install(
        qualified_name="io.test/asking",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=launch.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env=dict(stored or {}),
        title="Asking",
        tools=tools,
        sampling=sampling,
    )


@dataclass
class AskingGateway:
    """The asking server connected behind a started gateway, and what it and the person were told."""

    store: Store
    manager: ConnectionManager
    gateway: Gateway
    guard: GuessGuard
    server_id: str
    record: Path  # every line the asking server received
    told: list[str] = field(default_factory=list)  # what the person was told, in mcp-setup's voice
    heard: anyio.Event = field(default_factory=anyio.Event)  # set once the person is told something

    def received(self) -> str:
        return self.record.read_text(encoding="utf-8") if self.record.exists() else ""


@asynccontextmanager
async def asking_gateway(
    root: Path,
    victim_secret: str,
    *,
    guarded: bool = True,
    sampling: Sampling = SAMPLING_DEFAULT,
    **manager_options: Any,
) -> AsyncIterator[AskingGateway]:
    """The victim (holding ``victim_secret``) and the asking server (under ``sampling``) installed in
    a store under ``root``, the gateway started and the asking server's tools live.

    ``guarded``: the guard checks the tools' arguments and the answers relayed to the server, and
    the relay rules tell the person in ``told``; without it, the relay has its default rules (the
    redactor alone) and the guard is left out of the flow. ``manager_options``: more arguments of
    the connection manager."""
    store = Store.for_data_dir(root / "data", Vault.in_memory())
    redactor = Redactor()
    guard = GuessGuard(redactor)
    told: list[str] = []
    heard = anyio.Event()

    def tell(text: str) -> None:
        told.append(text)
        heard.set()

    rules = RelayRules(redactor, check=guard.check, holds_secret=guard.holds_secret, told=tell)
    manager = ConnectionManager(
        store,
        redactor,
        install_root=root / "servers",
        backoff=(),
        connect_timeout=scaled(15),
        relay_rules=rules if guarded else None,
        **manager_options,
    )
    record = root / "received.jsonl"
    install_victim(store, victim_secret)
    asking = install_asking(store, {"ASKING_RECORD": str(record)}, sampling=sampling)
    gateway = Gateway(
        store, manager, redactor, eager=False, poll_interval=0.1, check_arguments=guard.check if guarded else None
    )
    try:
        await start_until(
            gateway,
            lambda: (
                ASK in {t["name"] for t in gateway.catalog.wire_tools()}
                and len(getattr(manager.connected_server(asking.server_id), "tools", ())) >= 2
            ),  # ask, log, need_url
        )
        yield AskingGateway(store, manager, gateway, guard, asking.server_id, record, told, heard)
    finally:
        await gateway.aclose()
        await manager.aclose()
        store.close()


def face(gateway: Gateway) -> McpFace:
    """The MCP face over ``gateway`` (every installed tool listed)."""
    return McpFace(SimpleNamespace(gateway=gateway, settings=SimpleNamespace(gateway_tools="all")))


async def ask(client: Client, method: str, params: dict[str, Any], **more: Any) -> dict[str, Any]:
    """The asking server's ``ask`` tool: what its request to the client got back."""
    result = await client.call_tool(ASK, {"method": method, "params": params, **more})
    assert not result.is_error, result
    answer: dict[str, Any] = json.loads(result.content[0].text)
    return answer
