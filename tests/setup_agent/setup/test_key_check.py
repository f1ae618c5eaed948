"""The test checks the key when the server offers a read-only, argument-free tool (real stub
subprocesses that accept any key at start and check it only when a tool is called)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.errors import CredentialRejected
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets import SecretValue
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.key_check import UNCHECKED_NOTE, checking_tool, looks_like_auth_failure
from setup_agent.setup.probe import Prober
from setup_agent.setup.service import CallContext
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, build_stub_bundle, sha256_hex, stub_server_json

pytestmark = pytest.mark.anyio


def checks_on_call(expected: str, calls: Path, *, readonly_tool: bool = True) -> LaunchSpec:
    mode = "key_on_call,readonly_tool" if readonly_tool else "key_on_call"
    env = {
        "STUB_API_KEY": "${STUB_API_KEY}",
        "STUB_EXPECTED_SHA256": sha256_hex(expected),
        "STUB_MODE": mode,
        "STUB_CALLS_FILE": str(calls),
    }
    return LaunchSpec(command=sys.executable, args=[str(SERVER_PY)], env=env, runner="python3")


def called(calls: Path) -> list[str]:
    return calls.read_text().split() if calls.exists() else []


@pytest.fixture
async def prober(tmp_path: Path, canary: str) -> AsyncIterator[Prober]:
    redactor = Redactor()
    redactor.register(canary, "[secret:STUB_API_KEY]")
    prober = Prober(redactor, scratch_root=tmp_path / "scratch", timeout=scaled(10))
    (tmp_path / "scratch").mkdir()
    yield prober
    await prober.drain()


async def test_a_wrong_key_fails_the_test_as_credential_rejected_naming_the_key(
    prober: Prober, canary: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    with pytest.raises(CredentialRejected) as err:
        await prober.probe(checks_on_call("the-right-one", calls), {"STUB_API_KEY": SecretValue(canary)})
    assert err.value.code == "credential_rejected"
    assert "STUB_API_KEY" in err.value.message and "401" in err.value.message
    assert err.value.details["keys"] == ["STUB_API_KEY"]
    assert canary not in repr(err.value.to_dict())
    assert called(calls) == ["account"]  # once, and only the read-only, argument-free tool


async def test_the_right_key_passes_and_says_it_was_checked(prober: Prober, canary: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    result = await prober.probe(checks_on_call(canary, calls), {"STUB_API_KEY": SecretValue(canary)})
    assert {"account", "search", "purge"} <= {t["name"] for t in result.tools}
    assert result.key_check is not None and result.key_check.to_dict() == {"checked": True, "tool": "account"}
    assert called(calls) == ["account"]


async def test_a_server_without_a_read_only_tool_passes_with_the_note_and_no_tool_is_called(
    prober: Prober, canary: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    spec = checks_on_call("the-right-one", calls, readonly_tool=False)  # a wrong key, unseen until used
    result = await prober.probe(spec, {"STUB_API_KEY": SecretValue(canary)})
    assert result.key_check is not None and not result.key_check.checked
    assert result.key_check.note == UNCHECKED_NOTE
    assert "checks its key only when a tool is used" in UNCHECKED_NOTE
    assert called(calls) == []  # whoami needs no argument but does not say it is read-only


async def test_a_launch_without_a_secret_calls_no_tool(prober: Prober, canary: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    result = await prober.probe(checks_on_call(canary, calls), {"STUB_API_KEY": canary})
    assert result.key_check is None
    assert called(calls) == []


def test_only_a_tool_that_declares_itself_read_only_and_needs_no_argument_is_chosen() -> None:
    def tool(name: str, hint: object, required: list[str] | None = None) -> dict:
        schema: dict = {"type": "object", "properties": {"q": {"type": "string"}}}
        if required:
            schema["required"] = required
        return {"name": name, "inputSchema": schema, **({"annotations": {"readOnlyHint": hint}} if hint else {})}

    assert checking_tool([tool("whoami", None), tool("purge", False), tool("search", True, ["q"])]) is None
    assert checking_tool([tool("purge", "yes"), tool("list_users", True)]) == "list_users"


def test_authentication_failures_are_told_from_other_errors_in_the_servers_own_words() -> None:
    for text in (
        "Error: 401 Unauthorized",
        "API token is invalid.",
        "Request failed with status code 403",
        "invalid_api_key: Invalid API key provided",
        "Forbidden",
        "Authentication failed: check your token",
        "The provided key has expired",
    ):
        assert looks_like_auth_failure(text), text
    for text in ("Page not found", "Rate limit exceeded, retry in 30 s", "query must not be empty"):
        assert not looks_like_auth_failure(text), text


@pytest.fixture
async def runtime(tmp_path: Path, canary: str, new_runtime) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for name, mode in (("checks-key", "key_on_call,readonly_tool"), ("unchecked-key", "key_on_call")):
        bundle, sha = build_stub_bundle(tmp_path / "dist" / name, expected_value=canary, mode=mode, name=name)
        doc = stub_server_json(bundle.resolve().as_uri(), sha, name=f"io.test/{name}")
        (catalog / f"{name}.json").write_text(json.dumps(doc))
    settings = Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=10)
    runtime = new_runtime(settings)
    yield runtime
    await runtime.aclose()


async def connection_test(runtime: Runtime, name: str, value: str) -> dict:
    ref = runtime.refs.mint("STUB_API_KEY", value)
    args = {"qualified_name": f"io.test/{name}", "env_refs": {"STUB_API_KEY": ref}}
    return await runtime.service.call("mcp_setup_test_connection", args, CallContext(installed_by="agent"))


async def test_mcp_setup_test_connection_fails_a_wrong_key_and_says_when_it_could_not_check_one(
    runtime: Runtime, canary: str
) -> None:
    wrong = await connection_test(runtime, "checks-key", "a-made-up-key-0123456789")
    assert wrong["ok"] is False and wrong["error"]["code"] == "credential_rejected"
    assert "STUB_API_KEY" in wrong["error"]["message"]

    right = await connection_test(runtime, "checks-key", canary)
    assert right["ok"] is True and right["key_check"] == {"checked": True, "tool": "account"}

    unchecked = await connection_test(runtime, "unchecked-key", "a-made-up-key-0123456789")
    assert unchecked["ok"] is True and unchecked["key_check"]["note"] == UNCHECKED_NOTE
    assert canary not in json.dumps([wrong, right, unchecked])
