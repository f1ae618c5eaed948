"""A bundle that puts a secret on the command line (``--token=${user_config.KEY}``).

``mcp_setup_get`` says so; a python server gets it moved into the environment (the value
reaches the server's ``sys.argv`` but never its ``/proc/<pid>/cmdline``); any other runner
is refused with ``argv_secret`` unless the user consented to that warning.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.launch import local_command, materialize
from setup_agent.setup import TestRequest
from setup_agent.setup.service import CallContext
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex, stub_manifest, stub_server_json

pytestmark = pytest.mark.anyio

PROTOCOL = "2025-06-18"  # the "secret": the stub answers initialize with the version in --protocol


def argv_bundle(tmp_path: Path, name: str, command: str) -> tuple[Path, str]:
    manifest = stub_manifest(expected_value=None, name=name)
    manifest["user_config"] = {
        "PROTO": {"type": "string", "title": "Token", "required": True, "sensitive": True},
    }
    config = manifest["server"]["mcp_config"]
    config["command"] = command
    config["args"] = ["${__dirname}/server/server.py", "--protocol=${user_config.PROTO}"]
    config["env"] = {"STUB_REQUIRE": "0"}
    path = tmp_path / "dist" / f"{name}.mcpb"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.write(SERVER_PY, "server/server.py")
    return path, sha256_hex(path.read_bytes())


@pytest.fixture
async def runtime(new_runtime, tmp_path: Path, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for name, command in (("py-argv", "python3"), ("node-argv", "node")):
        bundle, sha = argv_bundle(tmp_path, name, command)
        doc = stub_server_json(bundle.resolve().as_uri(), sha, name=f"io.test/{name}")
        doc["packages"][0]["environmentVariables"] = []
        (catalog / f"{name}.json").write_text(json.dumps(doc))
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(20)
    )
    rt = new_runtime(settings, keyring_backend=memory_keyring)
    yield rt
    await rt.aclose()


async def secret_ref(rt: Runtime, key: str, value: str) -> str:
    pending = rt.broker.open(key, "Token", None)
    rt.broker.answer(pending.prompt_id, value)
    return pending.ref


async def call(rt: Runtime, tool: str, ctx: CallContext | None = None, **args: Any) -> dict:
    return await rt.service.call(tool, args, ctx or CallContext())


async def test_get_warns_when_a_bundle_puts_a_secret_on_the_command_line(runtime: Runtime) -> None:
    got = await call(runtime, "mcp_setup_get", qualified_name="io.test/node-argv")
    assert got["warnings"] == [
        {"code": "argv_secret", "package": "mcpb", "keys": ["PROTO"], "message": got["warnings"][0]["message"]}
    ]
    assert "command line" in got["warnings"][0]["message"]


async def test_a_python_bundle_gets_its_argv_secret_through_the_environment_instead(runtime: Runtime) -> None:
    got = await call(runtime, "mcp_setup_get", qualified_name="io.test/py-argv")
    assert "warnings" not in got  # moved: nothing to warn about
    prepared = await runtime.service.preparer.prepare(
        TestRequest(qualified_name="io.test/py-argv", env_refs={"PROTO": await secret_ref(runtime, "PROTO", PROTOCOL)}),
        runtime.service.scratch_root / "inspect",
        _NoProgress(),
    )
    assert prepared.argv_secret_keys == []
    assert PROTOCOL not in repr(prepared)
    workdir = runtime.service.scratch_root / "inspect"
    launch = local_command(
        materialize(prepared.spec, prepared.values, dirname=str(prepared.bundle_dir), cwd=str(workdir)), sandbox=None
    )
    assert all(PROTOCOL not in a for a in [launch.command, *launch.args])  # what exec() sees
    assert launch.env["MCP_SETUP_ARGV_1"] == f"--protocol={PROTOCOL}"
    # ... and the server still got it in its sys.argv: it answers with that protocol version.
    # (Probed directly: through the service the value would be redacted as a live secret.)
    result = await runtime.prober.probe(prepared.spec, prepared.values, dirname=str(prepared.bundle_dir))
    assert result.protocol_version == PROTOCOL
    await runtime.prober.drain()  # a clean teardown drops the process group's ledger entry
    assert list((Path(runtime.settings.home) / "procs").glob("*.json")) == []


async def test_a_bundle_whose_argv_secret_cannot_be_moved_is_refused_without_consent(
    runtime: Runtime, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await secret_ref(runtime, "PROTO", canary)
    for tool in ("mcp_setup_test_connection", "mcp_setup_install_and_connect"):
        refused = await call(runtime, tool, qualified_name="io.test/node-argv", env_refs={"PROTO": ref})
        assert refused["ok"] is False
        assert refused["error"]["code"] == "argv_secret", refused
        assert refused["error"]["details"]["keys"] == ["PROTO"]
    assert await call(runtime, "mcp_setup_list_servers") == {"ok": True, "servers": []}
    # With the user's consent it goes ahead (and gets as far as the missing or present node).
    allowed = await call(
        runtime,
        "mcp_setup_test_connection",
        CallContext(allow_argv_secret=True),
        qualified_name="io.test/node-argv",
        env_refs={"PROTO": ref},
    )
    assert allowed.get("error", {}).get("code") != "argv_secret", allowed
    assert canary not in json.dumps([refused, allowed]) and canary not in caplog.text


class _NoProgress:
    stage = "resolving"

    async def __call__(self, stage: str, status: str, **extra: Any) -> None:
        pass


async def test_the_consent_step_shows_the_argv_warning_and_an_approval_that_accepts_it_lets_the_launch_run(
    runtime: Runtime, canary: str
) -> None:
    runtime.consents.mode = "ask"
    seen: list[Any] = []

    async def user_approves(pending: Any) -> dict:
        seen.append(pending.request)
        with pytest.raises(Exception, match="Accept the warnings"):
            runtime.consents.approve(pending.consent_id)  # not without ticking the warning
        runtime.consents.approve(pending.consent_id, accept_warnings=True)
        return {}

    ref = await secret_ref(runtime, "PROTO", canary)
    result = await call(
        runtime,
        "mcp_setup_test_connection",
        CallContext(present_consent=user_approves),
        qualified_name="io.test/node-argv",
        env_refs={"PROTO": ref},
    )
    assert [w.code for w in seen[0].warnings] == ["argv_secret"]
    assert result.get("error", {}).get("code") not in ("argv_secret", "consent_required"), result
    assert canary not in json.dumps(result)
