"""Consent in ``mcp-setup agent`` (real pty, pexpect): the terminal prompt shows what will run and asks."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pexpect

from setup_agent.store import read_sqlite_catalog, read_sqlite_servers
from tests.helpers.agent import STUB, make_catalog
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.terminal import HIDDEN, finish, installed_servers
from tests.helpers.timeouts import scaled

ALLOW = r"Allow this\? \[y/N\]: "


def spawn(tmp_path: Path, catalog: Path) -> tuple[pexpect.spawn, io.StringIO, dict]:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask")
    argv = mcp_setup_argv("agent", "set up the stub server")
    child = pexpect.spawn(
        argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30), dimensions=(50, 200)
    )
    out = io.StringIO()
    child.logfile_read = out
    return child, out, env


def test_the_terminal_asks_once_for_the_test_and_the_install_which_keeps_every_tool_the_test_listed(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    child.expect(HIDDEN)
    child.sendline(canary)
    child.expect(f"mcp-setup needs your approval to test {STUB}")
    child.expect(r"The setup assistant asked to install " + STUB.replace(".", r"\."))  # the asker named
    child.expect(r"no second question")  # the test's approval covers the install
    child.expect(r"Your settings:")  # the person's settings first, the package's internals last
    child.expect(r"STUB_API_KEY: your secret, never shown here: sent as environment variable STUB_API_KEY to this")
    child.expect(r"Sandbox:")
    child.expect(r"Technical details:")
    child.expect(r"Command line: python3 <its own folder>/server/server\.py")
    child.expect(r"May ask your AI to write text:\s+\[1\] No\s+\[2\] Yes, without tools \(default\)")
    child.expect(r"Pick 1-3 \[2\]: ")
    child.sendline("1")  # the person's choice, stored with the server
    child.expect(ALLOW)
    child.sendline("y")
    child.expect("Tools now available: echo, whoami")
    assert finish(child) == 0
    text = out.getvalue()
    assert text.count("needs your approval") == 1 and "Untick which" not in text and canary not in text
    home = Path(env["MCP_SETUP_HOME"])
    servers = anyio.run(installed_servers, home, catalog)
    assert [s["qualified_name"] for s in servers] == [STUB]
    assert [s.sampling for s in read_sqlite_servers(home / "mcp-setup.db") or []] == ["no"]  # picked [1]
    listed = read_sqlite_catalog(home / "mcp-setup.db")  # what every face lists: every tool
    assert listed is not None and {t.name for t in listed.tools()} == {"stub__echo", "stub__whoami"}


def test_denying_in_the_terminal_runs_and_installs_nothing(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    child.expect(HIDDEN)
    child.sendline(canary)
    child.expect(r"Pick 1-3 \[2\]: ")
    child.sendline("")  # the default
    child.expect(ALLOW)
    child.sendline("n")
    child.expect("Not approved: nothing runs.")
    assert finish(child) == 1
    assert canary not in out.getvalue()
    assert anyio.run(installed_servers, Path(env["MCP_SETUP_HOME"]), catalog) == []
