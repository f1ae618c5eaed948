"""Test-connect against real subprocesses: the stdlib stub, an SDK (2026-era) stub, HTTP stub."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from setup_agent.errors import (
    CommandNotFound,
    ProbeTimeout,
    ProtocolError,
    RuntimeMissing,
    ServerExited,
    ServerRejected,
)
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from tests.helpers.paths import STUB_DIR
from tests.helpers.probe import stub_spec
from tests.helpers.processes import pids_in, process_alive
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import sha256_hex

pytestmark = pytest.mark.anyio

MODERN_PY = STUB_DIR / "modern_server.py"


@pytest.fixture
async def prober(tmp_path: Path, canary: str) -> AsyncIterator[Prober]:
    redactor = Redactor()
    redactor.register(canary, "[secret:STUB_API_KEY]")
    prober = Prober(redactor, scratch_root=tmp_path, timeout=scaled(10))
    yield prober
    await prober.drain()


async def test_a_right_value_lists_the_tools(prober: Prober, canary: str) -> None:
    result = await prober.probe(stub_spec(canary), {"STUB_API_KEY": canary})
    assert {t["name"] for t in result.tools} == {"echo", "whoami"}
    assert result.protocol_version == "2025-11-25"
    assert len(result.tools_hash) == 64


async def test_a_server_that_only_speaks_2024_11_05_is_accepted(prober: Prober, canary: str) -> None:
    result = await prober.probe(stub_spec(canary, STUB_PROTOCOL="2024-11-05"), {"STUB_API_KEY": canary})
    assert result.protocol_version == "2024-11-05"


async def test_a_2026_era_sdk_server_is_reached_through_discover(prober: Prober, canary: str) -> None:
    spec = LaunchSpec(
        command=sys.executable,
        args=[str(MODERN_PY)],
        env={"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(canary)},
    )
    result = await prober.probe(spec, {"STUB_API_KEY": canary}, timeout=scaled(30))
    assert "ping_modern" in {t["name"] for t in result.tools}
    assert result.protocol_version == "2026-07-28"


async def test_a_2026_era_server_rejecting_the_key_shows_its_own_reason(prober: Prober, canary: str) -> None:
    spec = LaunchSpec(
        command=sys.executable,
        args=[str(MODERN_PY)],
        env={"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex("another")},
    )
    with pytest.raises(ServerRejected) as err:
        await prober.probe(spec, {"STUB_API_KEY": canary}, timeout=scaled(30))
    assert "STUB_API_KEY" in err.value.message
    assert canary not in repr(err.value.to_dict())


async def test_a_wrong_value_is_rejected_without_echoing_it(prober: Prober, canary: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    with pytest.raises(ServerRejected) as err:
        await prober.probe(stub_spec("the-right-one", pid_file=pid_file), {"STUB_API_KEY": canary})
    assert err.value.code == "rejected"
    assert "invalid API key for STUB_API_KEY" in err.value.message
    assert canary not in repr(err.value.to_dict())
    await prober.drain()
    assert pids_in(pid_file) and not any(process_alive(p) for p in pids_in(pid_file))


async def test_a_crashing_server_reports_exited_with_its_code_and_stderr(prober: Prober, canary: str) -> None:
    with pytest.raises(ServerExited) as err:
        await prober.probe(stub_spec(canary, mode="crash"), {"STUB_API_KEY": canary})
    assert err.value.details["exit_code"] == 3
    assert "simulated crash" in err.value.message


async def test_a_hanging_server_times_out_within_the_deadline_plus_two_seconds(
    prober: Prober, canary: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    with anyio.fail_after(2.0 + scaled(2.0)):
        with pytest.raises(ProbeTimeout) as err:
            await prober.probe(stub_spec(canary, mode="hang", pid_file=pid_file), {"STUB_API_KEY": canary}, timeout=2.0)
    assert err.value.code == "timeout"
    await prober.drain()
    assert not any(process_alive(p) for p in pids_in(pid_file))


async def test_garbage_on_stdout_is_a_protocol_error(prober: Prober, canary: str) -> None:
    with pytest.raises(ProtocolError) as err:
        await prober.probe(stub_spec(canary, mode="garbage"), {"STUB_API_KEY": canary})
    assert "not MCP JSON-RPC" in err.value.message


async def test_a_tool_list_the_sdk_cannot_read_is_said_in_words_and_a_sloppy_2026_server_is_read_leniently(
    prober: Prober, canary: str, tmp_path: Path
) -> None:
    tools_file = tmp_path / "tools.json"
    tools_file.write_text('{"extra": [{"name": "no_schema", "description": "has no inputSchema"}]}')
    with pytest.raises(ProtocolError) as err:
        await prober.probe(stub_spec(canary, STUB_TOOLS_FILE=str(tools_file)), {"STUB_API_KEY": canary})
    assert (
        "tools/list" in err.value.message and "cannot read" in err.value.message and "inputSchema" in err.value.message
    )
    assert "validation error" not in err.value.message.lower() and "has no inputSchema" not in err.value.message
    # Negotiates 2026-07-28, then answers without resultType: read where the content is unambiguous (#29 item 6).
    result = await prober.probe(stub_spec(canary, mode="modern"), {"STUB_API_KEY": canary})
    assert result.protocol_version == "2026-07-28" and {t["name"] for t in result.tools} == {"echo", "whoami"}


async def test_tool_input_schemas_without_a_type_are_read_as_objects_with_a_note(
    prober: Prober, caplog: pytest.LogCaptureFixture
) -> None:
    """As npm mcp-obsidian 1.0.0 lists them: ``{"$schema": "…draft-07…"}``, which a lenient client accepts."""
    spec = LaunchSpec(command=sys.executable, args=[str(STUB_DIR / "schemaless.py")], runner="python3")
    with caplog.at_level("WARNING", logger="setup_agent.launch.lenient"):
        result = await prober.probe(spec, {})
    schemas = {t["name"]: t["inputSchema"] for t in result.tools}
    assert schemas == {
        name: {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
        for name in ("read_notes", "search_notes")
    }
    assert "input schema has no type (read_notes, search_notes)" in caplog.text


async def test_a_missing_command_and_a_missing_runtime_are_told_apart(prober: Prober) -> None:
    with pytest.raises(CommandNotFound):
        await prober.probe(LaunchSpec(command="no-such-server-binary-xyz"), {})
    with pytest.raises(RuntimeMissing) as err:
        await prober.probe(LaunchSpec(command="dnx", args=["x"]), {})
    assert ".NET" in err.value.message


async def test_a_grandchild_left_by_the_server_is_killed_at_teardown(
    prober: Prober, canary: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    await prober.probe(stub_spec(canary, mode="grandchild", pid_file=pid_file), {"STUB_API_KEY": canary})
    await prober.drain()
    pids = pids_in(pid_file)
    assert len(pids) == 2, pids
    assert not any(process_alive(p) for p in pids)


async def test_the_answer_does_not_wait_for_a_server_that_ignores_sigterm(
    prober: Prober, canary: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    await prober.probe(stub_spec(canary, mode="ignore_sigterm", pid_file=pid_file), {"STUB_API_KEY": canary})
    # The result came back while the teardown is still under way...
    assert prober.pending_teardowns == 1
    await prober.drain()
    # ...and the teardown still left nothing behind.
    assert prober.pending_teardowns == 0
    assert not any(process_alive(p) for p in pids_in(pid_file))


async def test_the_server_gets_a_minimal_environment_and_echoes_cannot_leak(
    prober: Prober, canary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_SETUP_TEST_HOST_ONLY", "host-variable-value")
    with pytest.raises(ServerRejected) as err:
        await prober.probe(stub_spec("expected-other", mode="echo_env"), {"STUB_API_KEY": canary})
    text = repr(err.value.to_dict())
    assert "STUB_API_KEY=[secret:STUB_API_KEY]" in text  # the echo happened, redacted
    assert "MCP_SETUP_TEST_HOST_ONLY" not in text
    assert canary not in text


async def test_a_tool_description_echoing_the_secret_is_redacted(prober: Prober, canary: str) -> None:
    result = await prober.probe(stub_spec(canary, mode="echo_env"), {"STUB_API_KEY": canary})
    assert canary not in repr(result.tools)
    assert any("[secret:STUB_API_KEY]" in t["description"] for t in result.tools)


async def test_the_scratch_workspace_is_removed_after_the_probe(prober: Prober, canary: str, tmp_path: Path) -> None:
    await prober.probe(stub_spec(canary), {"STUB_API_KEY": canary})
    await prober.drain()
    assert list(tmp_path.iterdir()) == []  # the scratch root: whatever the workspace was named


async def test_a_remote_that_refuses_connections_is_unreachable(prober: Prober) -> None:
    import socket

    from setup_agent.errors import Unreachable

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nothing listens there
    spec = LaunchSpec(
        transport="streamable-http", url=f"http://127.0.0.1:{port}/mcp", headers={"Authorization": "Bearer ${TOKEN}"}
    )
    with anyio.fail_after(scaled(20)):
        with pytest.raises(Unreachable) as err:
            await prober.probe(spec, {"TOKEN": "t"})
    assert err.value.code == "unreachable"


async def test_a_remote_that_refuses_the_token_is_rejected_with_the_http_status(prober: Prober, canary: str) -> None:
    from tests.stub_server.http_server import serve_http_stub

    with serve_http_stub(expected_sha256=sha256_hex("Bearer right")) as url:
        spec = LaunchSpec(transport="streamable-http", url=url, headers={"Authorization": "Bearer ${TOKEN}"})
        with anyio.fail_after(scaled(20)):
            with pytest.raises(ServerRejected) as err:
                await prober.probe(spec, {"TOKEN": canary})
            ok = await prober.probe(spec, {"TOKEN": "right"})
    assert "401" in err.value.message and canary not in repr(err.value.to_dict())
    assert {t["name"] for t in ok.tools} == {"echo", "whoami"}


async def test_concurrent_probes_are_bounded_and_the_rest_are_told_they_wait(tmp_path: Path, canary: str) -> None:
    # #24 item 15: 16 at once gave 16 children; now at most max_concurrent run, the rest queue
    redactor = Redactor()
    prober = Prober(redactor, scratch_root=tmp_path, timeout=scaled(20), max_concurrent=2)
    active, most, queued = 0, 0, 0

    async def one(n: int) -> None:
        nonlocal active, most, queued
        running = False

        async def on_stage(stage: str, status: str) -> None:
            nonlocal active, most, queued, running
            if stage == "queued":
                queued += 1
            elif not running:
                running = True
                active += 1
                most = max(most, active)

        try:
            result = await prober.probe(stub_spec(canary), {"STUB_API_KEY": canary}, on_stage=on_stage)
            assert result.tools
        finally:
            if running:
                active -= 1

    with anyio.fail_after(scaled(60)):
        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(one, n)
    await prober.drain()
    assert most == 2
    assert queued >= 3  # the four that found both slots taken (at least the last ones) said so
