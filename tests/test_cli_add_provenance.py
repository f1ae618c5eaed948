"""`mcp-setup add NAME` in a terminal is the person's own command: `show`/`list` and the
audit say the install was made `by cli` (as its removal and disable do), not `by agent`."""

from __future__ import annotations

import json
from pathlib import Path

import pexpect

from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.test_agent_support import STUB, make_catalog


def run_json(env: dict, *argv: str) -> dict:
    full = mcp_setup_argv(*argv)
    text = pexpect.run(" ".join(full), env=env, cwd=str(REPO), encoding="utf-8", timeout=60)
    return json.loads(text[text.index("{") :])


def test_a_terminal_add_is_recorded_as_installed_by_cli_in_show_and_the_audit(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    argv = mcp_setup_argv("add", STUB)
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=60, dimensions=(50, 200))
    child.expect(r"STUB_API_KEY \(hidden\): ")
    child.sendline(canary)
    child.expect("Tools now available")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    servers = run_json(env, "list", "--json")["servers"]
    assert [(s["qualified_name"], s["installed_by"]) for s in servers] == [(STUB, "cli")]
    audit = run_json(env, "audit", "--json")["audit"]
    assert [(r["event"], r["actor"]) for r in audit if r["event"] == "installed"] == [("installed", "cli")]
    assert canary not in json.dumps(servers) + json.dumps(audit)
