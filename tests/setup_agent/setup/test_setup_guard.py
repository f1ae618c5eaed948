"""The setup tools' arguments pass the guessing guard and the size bounds (#24 item 1): a server
that reflects a setting can no longer turn `env` (or a query, a package, a key) into an oracle."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.setup.service import CallContext
from setup_agent.setup.tool_args import MAX_ARGUMENTS_CHARS, MAX_VALUE_CHARS
from tests.helpers.processes import processes_mentioning
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

pytestmark = pytest.mark.anyio

PIN = "4821"


@pytest.fixture
async def runtime(new_runtime, tmp_path: Path, canary: str, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary, mode="echo_env", name="stub-echo")
    (catalog / "stub.json").write_text(
        json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, name="io.test/stub-echo"))
    )
    settings = Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=5)
    rt = new_runtime(settings, keyring_backend=memory_keyring)
    yield rt
    await rt.aclose()


async def _call(rt: Runtime, tool: str, principal: str = "agent-1", **args) -> dict:
    return await rt.service.call(tool, args, CallContext(installed_by="agent", principal=principal))


#: Where an agent-supplied value goes in a setup tool's arguments, each carrying the PIN.
CARRIERS = {
    "env_value": (
        "mcp_setup_test_connection",
        {"qualified_name": "io.test/stub-echo", "env": {"CFG": " ".join(f"{i:04d}" for i in range(4810, 4830))}},
    ),
    "env_key": ("mcp_setup_install_and_connect", {"qualified_name": "io.test/stub-echo", "env": {f"PIN {PIN}": "1"}}),
    "url_variable_split": (
        "mcp_setup_test_connection",
        {"qualified_name": "io.test/stub-echo", "env": {"TENANT": "48", "REGION": "21"}},
    ),
    "package": ("mcp_setup_get", {"qualified_name": "io.test/stub-echo", "package": f"npm:{PIN}"}),
    "query": ("mcp_setup_search", {"query": f"pin {PIN}"}),
    "query_as_exponent": ("mcp_setup_search", {"query": "4.821e3"}),
    "prompt": ("mcp_setup_request_secret", {"key_name": "K", "prompt": f"is it {PIN}?"}),
}


@pytest.mark.parametrize("carrier", list(CARRIERS))
async def test_a_live_secret_in_any_setup_argument_is_refused_before_anything_runs(
    runtime: Runtime, carrier: str
) -> None:
    runtime.refs.mint("PIN", PIN)  # the user answered a prompt: a live value
    tool, args = CARRIERS[carrier]
    result = await _call(runtime, tool, **args)
    assert result == {"ok": False, "error": result["error"]}
    assert result["error"]["code"] == "arguments_refused"
    assert PIN not in json.dumps(result)
    assert runtime.guard is not None and runtime.guard.refusals("agent-1") == 1
    assert not processes_mentioning(str(runtime.settings.home))


async def test_a_stored_secret_is_guarded_like_a_live_one_and_the_second_guess_locks(
    runtime: Runtime, canary: str
) -> None:
    runtime.redactor.register(canary, "[secret:STORED]")  # an installed server's stored value
    first = await _call(runtime, "mcp_setup_search", query=canary.upper())
    assert first["error"]["code"] == "arguments_refused"
    second = await _call(
        runtime,
        "mcp_setup_test_connection",
        qualified_name="io.test/stub-echo",
        env={"A": canary[:10], "B": canary[10:]},
    )
    assert second["error"]["code"] == "arguments_refused"
    assert runtime.guard is not None and runtime.guard.locked() == ["agent-1"]
    for tool, args in (("mcp_setup_search", {"query": "weather"}), ("mcp_setup_list_servers", {})):
        assert (await _call(runtime, tool, **args))["error"]["code"] == "session_locked"
    assert (await _call(runtime, "mcp_setup_search", principal="agent-2", query="weather"))["ok"] is True
    runtime.guard.unlock("agent-1")
    assert (await _call(runtime, "mcp_setup_search", query="weather"))["ok"] is True


async def test_the_first_refusal_tells_the_user_in_the_log_without_the_value(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    runtime.refs.mint("PIN", PIN)
    heard: list[str] = []
    runtime.gateway.incident_listeners.append(heard.append)  # as a face's page or terminal would
    with caplog.at_level(logging.WARNING):
        await _call(runtime, "mcp_setup_search", query=PIN)
    assert heard == ["agent-1"]
    said = [r.getMessage() for r in caplog.records if r.name == "app.runtime"]
    assert any("protects" in m and "refused" in m for m in said), said
    assert PIN not in caplog.text


@pytest.mark.parametrize(
    "args",
    [
        {"qualified_name": "io.test/stub-echo", "env": {"CFG": "x" * (MAX_VALUE_CHARS + 1)}},
        {"qualified_name": "io.test/stub-echo", "env": {"K" * (MAX_VALUE_CHARS + 1): "v"}},
        {
            "qualified_name": "io.test/stub-echo",
            "env": {f"K{i}": "y" * 1000 for i in range(MAX_ARGUMENTS_CHARS // 1000 + 1)},
        },
        {"qualified_name": "io.test/stub-echo", "env": {"deep": [[[[["z" * 900] * 20]]]]}},
    ],
    ids=["long_value", "long_key", "large_total", "large_nested"],
)
async def test_oversized_arguments_are_invalid_input_and_never_quoted(runtime: Runtime, args: dict) -> None:
    result = await _call(runtime, "mcp_setup_test_connection", **args)
    assert result["error"]["code"] == "invalid_input"
    assert "xxxxxxxx" not in json.dumps(result) and "yyyyyyyy" not in json.dumps(result)
    assert "KKKKKKKK" not in json.dumps(result) and "zzzzzzzz" not in json.dumps(result)
    assert runtime.guard is not None and runtime.guard.refusals("agent-1") == 0
