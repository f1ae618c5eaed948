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
UNTICK = r"Untick which tools\? Their numbers, e\.g\. 2 5-7 \(Enter for none\): "


def spawn(tmp_path: Path, catalog: Path) -> tuple[pexpect.spawn, io.StringIO, dict]:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask")
    argv = mcp_setup_argv("agent", "set up the stub server")
    child = pexpect.spawn(
        argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30), dimensions=(50, 200)
    )
    out = io.StringIO()
    child.logfile_read = out
    return child, out, env


def test_the_terminal_asks_to_test_then_to_install_with_numbered_tools_and_an_unticked_one_is_left_out(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    child.expect(HIDDEN)
    child.sendline(canary)
    child.expect(f"mcp-setup needs your approval to test {STUB}")
    child.expect(r"The setup assistant asked to test " + STUB.replace(".", r"\."))  # the asker named
    child.expect(r"Your settings:")  # the person's settings first, the package's internals last
    child.expect(r"STUB_API_KEY: your secret, never shown here: sent as environment variable STUB_API_KEY to this")
    child.expect(r"Sandbox:")
    child.expect(r"Technical details:")
    child.expect(r"Command line: python3 <its own folder>/server/server\.py")
    child.expect(ALLOW)  # nothing has run yet: no tools to choose
    child.sendline("y")
    child.expect(f"mcp-setup needs your approval to install {STUB}")  # now the test listed its tools (#29 item 10)
    child.expect(r"Its 2 tools add about \d+ tokens")
    child.expect(r"\[1\] echo \(about \d+ tokens\): Echo the given text back\.")
    child.expect(r"\[2\] whoami")
    child.expect(UNTICK)
    child.sendline("3")  # not one of them: asked again
    child.expect("Type numbers from 1 to 2")
    child.expect(UNTICK)
    child.sendline("2")
    child.expect("Left out: whoami.")
    child.expect(r"May ask your AI to write text:\s+\[1\] No\s+\[2\] Yes, without tools \(default\)")
    child.expect(r"Pick 1-3 \[2\]: ")
    child.sendline("1")  # the person's choice, stored with the server
    child.expect(ALLOW)
    child.sendline("y")
    child.expect("Tools now available: echo")
    assert finish(child) == 0
    text = out.getvalue()
    assert text.count("needs your approval") == 2 and canary not in text
    home = Path(env["MCP_SETUP_HOME"])
    servers = anyio.run(installed_servers, home, catalog)
    assert [s["qualified_name"] for s in servers] == [STUB]
    assert [s.sampling for s in read_sqlite_servers(home / "mcp-setup.db") or []] == ["no"]  # picked [1]
    early = read_sqlite_catalog(home / "mcp-setup.db")  # what every face lists: whoami held back
    assert early is not None and {t.name for t in early.tools()} == {"stub__echo"}


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
