"""Every refusal says what to do: a secret on the command line with consent turned off names
how to allow it; a server that fails on a path the sandbox hides is told so, with the grant."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.errors import ServerExited
from setup_agent.launch.hidden_paths import hidden_path
from setup_agent.launch.sandbox import Sandbox
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from setup_agent.setup.service import CallContext
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex, stub_manifest, stub_server_json

pytestmark = pytest.mark.anyio


def node_argv_entry(root: Path) -> Path:
    """A catalog with one bundle that passes its token on node's command line (unmovable)."""
    manifest = stub_manifest(expected_value=None, name="node-argv")
    manifest["user_config"] = {"TOKEN": {"type": "string", "title": "Token", "required": True, "sensitive": True}}
    config = manifest["server"]["mcp_config"]
    config["command"] = "node"
    config["args"] = ["${__dirname}/server/server.py", "--token=${user_config.TOKEN}"]
    config["env"] = {"STUB_REQUIRE": "0"}
    bundle = root / "dist" / "node-argv.mcpb"
    bundle.parent.mkdir(parents=True)
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.write(SERVER_PY, "server/server.py")
    doc = stub_server_json(bundle.resolve().as_uri(), sha256_hex(bundle.read_bytes()), name="io.test/node-argv")
    doc["packages"][0]["environmentVariables"] = []
    catalog = root / "catalog"
    catalog.mkdir()
    (catalog / "node-argv.json").write_text(json.dumps(doc))
    return catalog


@pytest.fixture
async def runtime(tmp_path: Path, new_runtime) -> AsyncIterator[Runtime]:
    settings = Settings(
        home=tmp_path / "data",
        registries="local",
        catalog_dir=node_argv_entry(tmp_path),
        consent="never-ask",
        probe_timeout_seconds=scaled(10),
    )
    rt = new_runtime(settings)
    yield rt
    await rt.aclose()


async def test_a_secret_on_the_command_line_with_consent_off_is_refused_naming_how_to_allow_it(
    runtime: Runtime, canary: str
) -> None:
    pending = runtime.broker.open("TOKEN", "Token", None)
    runtime.broker.answer(pending.prompt_id, canary)
    args = {"qualified_name": "io.test/node-argv", "env_refs": {"TOKEN": pending.ref}}
    refused = await runtime.service.call("mcp_setup_test_connection", args, CallContext())
    assert refused["ok"] is False and refused["error"]["code"] == "argv_secret"
    message = refused["error"]["message"]
    assert "consent is turned off" in message
    assert "MCP_SETUP_CONSENT=ask" in message and "`mcp-setup approve`" in message
    assert refused["error"]["details"]["allow"] in message
    assert canary not in json.dumps(refused)


@pytest.mark.skipif(Sandbox("bwrap").mechanism != "bwrap", reason="bubblewrap does not work here")
async def test_a_server_failing_on_a_folder_the_sandbox_hides_is_told_to_grant_it(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("a note")
    (tmp_path / "scratch").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    sandbox = Sandbox("bwrap", hide=(tmp_path / "scratch",), user_home=home, host_env={"HOME": str(home)})
    prober = Prober(Redactor(), scratch_root=tmp_path / "scratch", timeout=scaled(10), sandbox=sandbox)
    env = {"STUB_REQUIRE": "0", "STUB_OPEN": str(vault / "note.md")}
    spec = LaunchSpec(command=sys.executable, args=[str(SERVER_PY)], env=env, runner="python3")
    try:
        with pytest.raises(ServerExited) as hidden:
            await prober.probe(spec, {})
        assert f"The sandbox hides {vault / 'note.md'}; grant its folder {vault} in the consent" in hidden.value.message
        assert "(another folder it may read and write)" in hidden.value.message
        assert hidden.value.details["hidden_path"] == str(vault / "note.md")
        # Granted, the same server starts.
        granted = spec.model_copy(update={"sandbox_grants": [str(vault)]})
        result = await prober.probe(granted, {})
        assert {t["name"] for t in result.tools} == {"echo", "whoami"}
    finally:
        await prober.drain()


def test_only_a_path_that_exists_here_and_the_sandbox_does_not_show_is_named(tmp_path: Path) -> None:
    there = tmp_path / "projects" / "site"
    there.mkdir(parents=True)
    node = f"Error: ENOENT: no such file or directory, scandir '{there}'\n    at Object.readdirSync (node:fs:1507:3)"
    assert hidden_path(node, shown=[tmp_path / "work"]) == str(there)
    python = f"PermissionError: [Errno 13] Permission denied: '{tmp_path}/nowhere/x.db'"
    assert hidden_path(python, shown=[]) is None  # it does not exist here either: not the sandbox's doing
    assert hidden_path(f"cannot access {there}: No such file or directory", shown=[]) == str(there)
    assert hidden_path(f"ENOENT: no such file or directory, open '{there}'", shown=[tmp_path]) is None  # shown
    assert hidden_path("ENOENT: no such file or directory, open '/etc/hosts'", shown=[]) is None  # the system is shown
    assert hidden_path(f"loaded config from {there}", shown=[]) is None  # not a failure line
    assert os.path.isdir(there)
