"""``mcp-setup update NAME``: a newer registry version is swapped in only when it answers
with the stored settings; otherwise the installed one stays and still works."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from keyring.backends import fail

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.service import CallContext
from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

STUB = "io.github.mcp-setup/stub"


def publish(root: Path, catalog: Path, version: str, expected: str) -> None:
    bundle, sha = build_stub_bundle(root / f"dist-{version}", expected_value=expected)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, version=version)))


async def install_v1(home: Path, catalog: Path, value: str) -> str:
    runtime = build_runtime(Settings(home=home, registries="local", catalog_dir=catalog), keyring_backend=fail.Keyring())
    try:
        with anyio.fail_after(60):
            ref = runtime.refs.mint("STUB_API_KEY", value)
            result = await runtime.service.install_and_connect(
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}, CallContext()
            )
        assert result["status"] == "connected"
        return result["server_id"]
    finally:
        await runtime.aclose()


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcp_setup_argv(*argv), env=env, cwd=REPO, capture_output=True, text=True, timeout=120)


def installed(env: dict[str, str]) -> list[dict]:
    return json.loads(run(env, "list", "--json").stdout)["servers"]


def test_update_swaps_in_a_version_that_answers_and_keeps_the_old_one_when_the_new_one_does_not(
    tmp_path: Path, canary: str
) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    home = Path(env["MCP_SETUP_HOME"])
    publish(tmp_path, catalog, "1.0.0", canary)
    anyio.run(install_v1, home, catalog, canary)

    done = run(env, "update", "stub")
    assert done.returncode == 0 and "already at 1.0.0" in done.stdout

    publish(tmp_path, catalog, "2.0.0", canary)  # answers with the stored key
    done = run(env, "update", "stub", "--version", "9.9.9")
    assert done.returncode == 1 and "2.0.0 only" in done.stderr
    done = run(env, "update", "stub")
    assert done.returncode == 0, done.stderr
    assert "from 1.0.0 to 2.0.0" in done.stdout and canary not in done.stdout + done.stderr
    [server] = installed(env)
    assert server["version"] == "2.0.0" and server["slug"] == "stub"
    kept_id = server["server_id"]

    publish(tmp_path, catalog, "3.0.0", "another-key-" + canary[::-1])  # rejects the stored key
    done = run(env, "update", "stub")
    assert done.returncode == 1 and "2.0.0 stays installed" in done.stderr
    assert canary not in done.stdout + done.stderr
    [server] = installed(env)
    assert (server["server_id"], server["version"]) == (kept_id, "2.0.0")
    doctor = json.loads(run(env, "doctor", "--json").stdout)
    assert next(c for c in doctor["checks"] if c["name"] == "server stub")["ok"] is True  # the old one still answers
