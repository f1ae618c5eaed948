"""A proxied result is capped and a notification flood ends the call (#24 item 5): a server can no
longer flood the agent's context or hold the gateway's loop for seconds."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.result_cap import cap_result, result_size
from setup_agent.gateway.router import Gateway
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.connections import stub_launch
from tests.helpers.timeouts import scaled
from tests.stub_server.server import Stub

pytestmark = pytest.mark.anyio


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[Any]:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    managers: list[ConnectionManager] = []
    gateways: list[Gateway] = []

    async def gateway(mode: str = "", **options: Any) -> Gateway:
        manager = ConnectionManager(
            store,
            redactor,
            install_root=tmp_path / f"servers{len(managers)}",
            backoff=(),
            connect_timeout=scaled(10),
            **options,
        )
        managers.append(manager)
        store.servers.install(
            qualified_name=f"io.test/cap{len(managers)}",
            source="local",
            version="1",
            package_type="stdio",
            launch_spec=stub_launch("v" * 12, mode, STUB_FLOOD_COUNT="2000"),
            installed_by="agent",
            tools_hash="x",
            env={"STUB_API_KEY": ("v" * 12, True)},
            tools=Stub(set(), None).tools,
        )
        gw = Gateway(store, manager, redactor, eager=False, poll_interval=0.1, call_timeout=scaled(30))
        await gw.start()
        gateways.append(gw)
        return gw

    yield gateway, redactor
    for gw in gateways:
        await gw.aclose()
    for manager in managers:
        await manager.aclose()
    store.close()


async def test_a_result_over_the_cap_is_cut_with_a_note_saying_how_much(world) -> None:
    gateway, _ = world
    gw = await gateway(max_result_chars=100_000)
    with anyio.fail_after(scaled(30)):
        answer = await gw.call("cap1__echo", {"text": "x" * 300_000})
    texts = [b["text"] for b in answer["content"]]
    assert texts[0] == "x" * 100_000 and len(texts) == 2
    assert re.search(r"\b200,000 of 300,0\d\d characters were left out", texts[1]), texts[1]  # keys count too
    assert result_size(answer) < 101_000


async def test_a_result_within_the_cap_is_unchanged(world) -> None:
    gateway, _ = world
    gw = await gateway()
    with anyio.fail_after(scaled(30)):
        answer = await gw.call("cap1__echo", {"text": "y" * 500_000})
    assert [b["text"] for b in answer["content"]] == ["y" * 500_000]


async def test_a_notification_flood_ends_the_call_with_a_tool_error(world) -> None:
    gateway, _ = world
    gw = await gateway("flood", max_call_notifications=200)
    started = time.monotonic()
    with anyio.fail_after(scaled(30)):
        answer = await gw.call("cap1__echo", {"text": "hi"})
    assert answer["isError"] is True and answer["structuredContent"]["error"]["code"] == "protocol_error"
    assert "more than 200 notifications" in answer["content"][0]["text"]
    assert time.monotonic() - started < 15
    with anyio.fail_after(scaled(30)):  # the session survives (and the rest of the flood is read)
        assert (await gw.call("cap1__whoami", {}))["content"][0]["text"] == "ok"


def test_the_cut_keeps_blocks_in_order_drops_what_no_longer_fits_and_never_splits_a_secret() -> None:
    redactor = Redactor()
    secret = "s3cr3t-value-" + "9" * 10
    redactor.register(secret, "[secret:K]")
    result = {
        "content": [
            {"type": "text", "text": "a" * 50},
            {"type": "text", "text": "b" * 40 + secret + "c" * 100},
            {"type": "image", "data": "Z" * 1000, "mimeType": "image/png"},
        ],
        "structuredContent": {"big": "d" * 5000},
        "_meta": {"k": "m"},
    }
    out = cap_result(redactor.redact_obj(result), 100)
    assert [b.get("type") for b in out["content"]] == ["text", "text", "text"]
    assert out["content"][0]["text"] == "a" * 50
    assert out["content"][1]["text"].startswith("b" * 30) and "s3cr" not in out["content"][1]["text"]
    assert "structuredContent" not in out and out["_meta"] == {"k": "m"}
    assert "characters were left out" in out["content"][2]["text"]
    assert cap_result(result, 0) is result


async def test_a_flood_of_log_messages_during_a_call_is_relayed_up_to_its_bound_then_dropped() -> None:
    """#24 item 5 with #29's relay: a server's log messages reach the caller, a thousand at most per call."""
    import mcp_types as types

    from setup_agent.gateway.relay import MAX_LOGS_PER_CALL, InFlight, relay_callbacks
    from setup_agent.secrets.redact import Redactor

    class Caller:
        def __init__(self) -> None:
            self.logs = 0

        def can(self, capability: str) -> bool:
            return True

        async def request(self, method: str, params: dict) -> None:
            raise AssertionError("no request expected")

        async def log(self, params: dict) -> None:
            self.logs += 1

    inflight, caller = InFlight(), Caller()
    log = relay_callbacks(inflight, Redactor(), "flooder")["logging_callback"]
    message = types.LoggingMessageNotificationParams(level="info", data="line")
    with inflight.add(caller):
        for _ in range(MAX_LOGS_PER_CALL + 500):
            await log(message)
    assert caller.logs == MAX_LOGS_PER_CALL
    with inflight.add(caller):  # the next call starts its own count
        await log(message)
    assert caller.logs == MAX_LOGS_PER_CALL + 1
