"""``mcp-setup apply`` reads what ``mcp-setup export`` writes: a registry server, a server imported
from Claude Desktop (a launch-spec entry, ``"source": "import:claude-desktop"``) and the tools a
person left out round-trip to a fresh data dir; an entry that cannot be used is reported with why,
and the others are installed all the same.

Real subprocesses throughout: ``import`` of a planted Claude Desktop config, ``export``, and
``apply`` on a pty answering its hidden prompts; the stub server checks the key it is given.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pexpect
from keyring.backends import fail

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.setup import CallContext, InstallRequest
from tests.helpers.add_flow import make_catalog
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex

STUB = "io.github.mcp-setup/stub"  # the catalog's stub bundle (tests/stub_server/bundle.py)
IMPORTED = "notes"


def machine(root: Path, catalog: Path) -> dict[str, str]:
    return face_env(root, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        mcp_setup_argv(*argv),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        stdin=subprocess.DEVNULL,
    )


def install_from_registry(env: dict[str, str], value: str) -> None:
    async def go() -> None:
        settings = Settings(home=env["MCP_SETUP_HOME"], registries="local", catalog_dir=env["MCP_SETUP_CATALOG_DIR"])
        runtime = build_runtime(settings, keyring_backend=fail.Keyring())
        try:
            with anyio.fail_after(scaled(60)):
                ref = runtime.refs.mint("STUB_API_KEY", value)
                request = InstallRequest(qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
                result = await runtime.service.install_and_connect(request, CallContext(installed_by="cli"))
            assert result["status"] == "connected", result
        finally:
            await runtime.aclose()

    anyio.run(go)


def import_from_claude_desktop(env: dict[str, str], root: Path, value: str) -> None:
    """A Claude Desktop config with a plain-text key, moved into mcp-setup by ``import --yes``."""
    config = root / "claude_desktop_config.json"
    entry = {
        "command": "python3",
        "args": [str(SERVER_PY)],
        "env": {"STUB_API_KEY": value, "STUB_EXPECTED_SHA256": sha256_hex(value)},
    }
    config.write_text(json.dumps({"mcpServers": {IMPORTED: entry}}, indent=2))
    done = run(env, "import", "claude-desktop", "--config", str(config), "--yes")
    assert done.returncode == 0, done.stdout + done.stderr


def apply(env: dict[str, str], lock: Path, value: str) -> tuple[int | None, str]:
    """``mcp-setup apply`` on a pty, typing at each hidden prompt the key's value: ``value``, or
    its digest for the imported entry's ``STUB_EXPECTED_SHA256``."""
    argv = mcp_setup_argv("apply", str(lock))
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(90))
    out = ""
    while child.expect([r"(\w+) for \S+ \(hidden\): ", pexpect.EOF]) == 0:
        out += child.before + child.after
        child.sendline(sha256_hex(value) if child.match.group(1) == "STUB_EXPECTED_SHA256" else value)
    out += child.before
    child.close()
    return child.exitstatus, out


def export(env: dict[str, str], to: Path) -> dict:
    done = run(env, "export", "--to", str(to))
    assert done.returncode == 0, done.stderr
    return json.loads(to.read_text())


def listed(env: dict[str, str]) -> dict[str, dict]:
    return {s["qualified_name"]: s for s in json.loads(run(env, "list", "--json").stdout)["servers"]}


def test_export_then_apply_on_a_fresh_data_dir_round_trips_a_registry_server_an_imported_one_and_tools_left_out(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path / "published", canary)
    laptop = machine(tmp_path / "laptop", catalog)
    install_from_registry(laptop, canary)
    import_from_claude_desktop(laptop, tmp_path, canary)
    assert run(laptop, "disable", IMPORTED, "--tool", "whoami").returncode == 0
    doc = export(laptop, tmp_path / "servers.lock.json")
    by_name = {e["qualified_name"]: e for e in doc["servers"]}
    assert by_name[STUB]["registry"] == "local"
    imported = by_name[IMPORTED]
    assert (imported["registry"], imported["source"]) == (None, "import:claude-desktop")
    assert imported["launch"]["command"] == "python3" and imported["launch"]["args"] == [str(SERVER_PY)]
    assert sorted(imported["secrets"]) == ["STUB_API_KEY", "STUB_EXPECTED_SHA256"]
    assert imported["tools"]["left_out"] == ["whoami"]

    fresh = machine(tmp_path / "fresh", catalog)
    code, out = apply(fresh, tmp_path / "servers.lock.json", canary)
    assert code == 0, out
    assert f"✓ {STUB} 1.0.0 installed, connected (2 tools) as stub" in out, out
    assert f"✓ {IMPORTED} installed, connected (1 tools) as {IMPORTED}" in out, out
    assert "2 installed, 0 already installed identically, 0 failed." in out
    here = listed(fresh)
    assert here[IMPORTED]["left_out_by_user"] == ["whoami"] and here[IMPORTED]["tools"] == ["echo"]
    assert here[IMPORTED]["source"] == "import:claude-desktop"
    again = export(fresh, tmp_path / "again.lock.json")
    assert again["servers"] == doc["servers"]  # what apply installed exports as the same file
    code, out2 = apply(fresh, tmp_path / "servers.lock.json", canary)
    assert code == 0 and "2 already installed identically" in out2, out2
    for text in (out, out2, json.dumps(doc)):
        assert canary not in text


def test_one_entry_apply_cannot_use_is_reported_with_why_and_the_others_are_installed(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path / "published", canary)
    laptop = machine(tmp_path / "laptop", catalog)
    import_from_claude_desktop(laptop, tmp_path, canary)
    doc = export(laptop, tmp_path / "servers.lock.json")
    doc["servers"] += [
        {"qualified_name": "io.example/elsewhere", "registry": "npmjs", "package": {"type": "npm"}, "launch": {}},
        {"qualified_name": "io.example/broken", "registry": "local"},
        {**doc["servers"][0], "registry": "import:claude-desktop"},  # as an older export wrote it: listed twice
    ]
    del doc["servers"][0]["source"]
    doc["servers"][0]["registry"] = "import:claude-desktop"  # an older export's launch-spec entry reads the same
    lock = tmp_path / "mixed.lock.json"
    lock.write_text(json.dumps(doc))
    fresh = machine(tmp_path / "fresh", catalog)
    code, out = apply(fresh, lock, canary)
    assert code == 1, out
    assert (
        "The lock file names an unknown registry for io.example/elsewhere: 'npmjs' (mcp-setup knows official, "
        "smithery, local); it was left out." in out
    )
    assert 'The lock file\'s server 3 (io.example/broken) cannot be used: "package" must be an object' in out
    assert f"The lock file lists {IMPORTED} twice: server 4 was left out." in out
    assert f"✓ {IMPORTED} installed, connected (2 tools) as {IMPORTED}" in out, out
    assert listed(fresh)[IMPORTED]["source"] == "import:claude-desktop"
    assert "Traceback" not in out and canary not in out
