"""Consent in ``mcp-setup agent`` (real pty, pexpect): the terminal prompt shows what will run and asks."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pexpect

from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.test_agent_support import STUB, make_catalog
from tests.test_agent_terminal import HIDDEN, finish, installed_servers
from tests.timeouts import scaled

ALLOW = r"Allow this\? \[y/N\]: "


def spawn(tmp_path: Path, catalog: Path) -> tuple[pexpect.spawn, io.StringIO, dict]:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask")
    argv = mcp_setup_argv("agent", "set up the stub server")
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30), dimensions=(50, 200))
    out = io.StringIO()
    child.logfile_read = out
    return child, out, env


def test_the_terminal_asks_consent_once_showing_the_launch_and_then_installs(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    child.expect(HIDDEN)
    child.sendline(canary)
    child.expect(f"mcp-setup needs your approval to test {STUB}")
    child.expect(r"Command line: python3 \$\{__dirname\}/server/server\.py")
    child.expect(r"Secret STUB_API_KEY: sent as environment variable STUB_API_KEY to this computer")
    child.expect(ALLOW)
    child.sendline("y")
    child.expect("Tools now available: echo, whoami")
    assert finish(child) == 0
    text = out.getvalue()
    assert text.count("needs your approval") == 1  # the install reused the remembered consent
    assert canary not in text
    servers = anyio.run(installed_servers, Path(env["MCP_SETUP_HOME"]), catalog)
    assert [s["qualified_name"] for s in servers] == [STUB]


def test_denying_in_the_terminal_runs_and_installs_nothing(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    child.expect(HIDDEN)
    child.sendline(canary)
    child.expect(ALLOW)
    child.sendline("n")
    child.expect("Not approved: nothing runs.")
    assert finish(child) == 1
    assert canary not in out.getvalue()
    assert anyio.run(installed_servers, Path(env["MCP_SETUP_HOME"]), catalog) == []
