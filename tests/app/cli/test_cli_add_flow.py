"""``mcp-setup add`` as a new user meets it (a real subprocess on a pty): an installed server
is said before anything is asked, Ctrl-C during the test cancels cleanly, the test shows its
stages, the secret prompt is one line, and the last line names the next commands."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pexpect
import pytest

from tests.helpers.add_flow import make_catalog
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled

STUB = "io.github.mcp-setup/stub"


def spawn_add(env: dict[str, str], name: str = "stub") -> pexpect.spawn:
    argv = mcp_setup_argv("add", name)
    return pexpect.spawn(
        argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(60), dimensions=(50, 250)
    )


def add_stub(env: dict[str, str], value: str) -> str:
    child = spawn_add(env)
    child.expect(r"\(hidden\): ")
    asked = child.before + child.after
    child.sendline(value)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return asked + "<<typed>>" + child.before


def finish(child: pexpect.spawn) -> tuple[int | None, str]:
    """Everything up to the end of ``child``, and its exit status (no question left open)."""
    index = child.expect([pexpect.EOF, r"Choose 1-\d+: ", r"\(hidden\): "])
    text = child.before
    if index:  # a question: the run would wait for the user; end it and fail below
        text += "<<asked: " + str(child.after) + ">>"
        child.sendcontrol("c")
        child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, text


def test_adding_an_installed_server_again_says_so_before_asking_anything_and_names_the_commands(
    tmp_path: Path, canary: str
) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    add_stub(env, canary)
    for typed in ("stub", STUB, "Stub"):
        code, out = finish(spawn_add(env, typed))
        assert code == 1, out
        assert (
            f'{STUB} is already installed as "stub". To reinstall: mcp-setup remove stub, then mcp-setup add {typed}. '
            "To change its key: mcp-setup rotate stub STUB_API_KEY." in out
        )
        assert "<<asked" not in out and "Try again" not in out and "(the name you gave)" not in out
        assert "mcp_setup_remove" not in out and canary not in out


def test_a_search_that_lands_on_an_installed_server_stops_with_no_retry_menu(tmp_path: Path, canary: str) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    add_stub(env, canary)
    code, out = finish(spawn_add(env, "the stub server"))  # words: found by search, not by name
    assert code == 1, out
    assert f'{STUB} is already installed as "stub"' in out and "mcp-setup remove stub" in out
    assert out.count("is already installed") == 1  # said once, not again as the summary
    assert "(hidden)" not in out  # nothing asked for a server that is installed
    assert "<<asked" not in out and "Try again" not in out and "(the name you gave)" not in out
    assert "mcp_setup_remove" not in out and canary not in out


def wait_for_pid(fifo: int, timeout: float = scaled(60.0)) -> int:
    """The pid the stub writes to its STUB_PID_FILE (a FIFO here: an event, not a poll)."""
    import select

    ready, _, _ = select.select([fifo], [], [], timeout)
    assert ready, "the stub never started"
    return int(os.read(fifo, 100).split()[0])


def test_ctrl_c_during_the_connection_test_cancels_with_exit_130_and_leaves_no_process(
    tmp_path: Path, canary: str
) -> None:
    from tests.helpers.processes import process_alive, processes_mentioning, wait_gone

    pid_file = tmp_path / "pids"
    os.mkfifo(pid_file)
    fifo = os.open(pid_file, os.O_RDONLY | os.O_NONBLOCK)
    try:
        catalog = make_catalog(tmp_path, canary, mode="hang", extra_env={"STUB_PID_FILE": str(pid_file)})
        # Sandbox off: the stub writes its pid to a FIFO beside the test, outside its own folder.
        env = face_env(
            tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_SANDBOX="off"
        )
        child = spawn_add(env)
        child.expect(r"\(hidden\): ")
        child.sendline(canary)
        pid = wait_for_pid(fifo)
        assert process_alive(pid)
        child.sendintr()
        code, out = finish(child)
    finally:
        os.close(fifo)
    assert code == 130, out
    assert "Cancelled by the user. Nothing was installed." in out
    assert "CancelledError" not in out and "WARNING" not in out and "connection test failed" not in out
    assert wait_gone([pid]) == [] and processes_mentioning(str(tmp_path)) == []


def test_the_connection_test_shows_one_line_per_stage_and_says_when_it_passed(tmp_path: Path, canary: str) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    out = add_stub(env, canary)
    lines = [line.strip() for line in out.splitlines()]
    for wanted in (
        "· preparing the connection test…",
        "✓ test passed: 2 tools",
        "· installing and connecting…",
        "✓ connected",
    ):
        assert wanted in lines, out
    assert any(line.startswith("· starting the server") for line in lines), out
    assert lines.index("✓ test passed: 2 tools") < lines.index("· installing and connecting…")


class _Out(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


async def _download_ticks(out: _Out, every: float, ticks: int) -> None:
    from app.cli.terminal import TerminalIO

    face = TerminalIO(broker=None, out=out)  # type: ignore[arg-type]
    face.DOWNLOAD_TICK_SECONDS = every
    event = {"type": "progress", "action": "mcp_setup_test_connection", "stage": "downloading"}
    await face.progress({**event, "status": "started"})
    for i in range(1, ticks + 1):
        await face.progress({**event, "status": "progress", "elapsed_seconds": float(i), "fetched": i * 10})
    await face.progress({**event, "status": "done", "fetched": ticks * 10})
    await face.say("next")


@pytest.mark.anyio
async def test_download_ticks_are_throttled_and_rewrite_one_line_only_on_a_terminal() -> None:
    piped = _Out(tty=False)
    await _download_ticks(piped, every=3600, ticks=200)  # a flood of ticks inside one interval: none shown
    assert piped.getvalue() == "· downloading the package…\n· downloaded (2000 packages)\nnext\n"
    piped = _Out(tty=False)
    await _download_ticks(piped, every=0, ticks=2)  # no terminal: whole lines, no \r
    assert "\r" not in piped.getvalue()
    assert "· downloading the package… 2 s, 20 packages\n" in piped.getvalue()
    tty = _Out(tty=True)
    await _download_ticks(tty, every=0, ticks=3)
    text = tty.getvalue()
    assert (
        text.count("\r") == 3
        and "\r\x1b[K· downloading the package… 3 s, 30 packages\n· downloaded (30 packages)\nnext\n" in text
    )


def test_the_secret_prompt_is_one_line_that_says_what_to_type_and_how_it_is_kept(tmp_path: Path, canary: str) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    asked = add_stub(env, canary).split("<<typed>>")[0]
    lines = [line.strip() for line in asked.splitlines() if line.strip()]
    assert lines[-2:] == [
        f"Enter STUB_API_KEY for {STUB} (API key for the stub server). Hidden as you type; stored encrypted.",
        "STUB_API_KEY (hidden):",
    ], asked
    assert "assistant" not in asked


def test_a_successful_add_ends_with_the_short_name_and_how_to_connect_a_client(tmp_path: Path, canary: str) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    out = add_stub(env, canary).split("<<typed>>")[1]
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    assert lines[-2].startswith(f"Installed {STUB} (srv_"), out
    assert lines[-1].startswith('Its short name is "stub": mcp-setup show stub, mcp-setup remove stub. '), out
    assert "mcp-setup client connect CLIENT (claude-desktop, " in lines[-1] and "cursor" in lines[-1], out


def test_ctrl_c_after_the_install_was_saved_says_it_is_installed_and_how_to_take_it_out(
    tmp_path: Path, canary: str
) -> None:
    # The test passes, the install is saved, then the server is slow to start again (no adoption):
    # a Ctrl-C there cannot undo the saved install, and the message must not say it did.
    catalog = make_catalog(tmp_path, canary, mode="slow", extra_env={"STUB_SLOW_SECONDS": "3"})
    env = face_env(
        tmp_path,
        MCP_SETUP_REGISTRIES="local",
        MCP_SETUP_CATALOG_DIR=str(catalog),
        MCP_SETUP_ADOPT_TESTED_SERVERS="false",
    )
    child = spawn_add(env)
    child.expect(r"\(hidden\): ")
    child.sendline(canary)
    child.expect("✓ saved; connecting…")
    child.sendintr()
    code, out = finish(child)
    assert code == 130, out
    assert "Cancelled by the user, after the install was saved: io.github.mcp-setup/stub" in out
    assert "mcp-setup remove stub" in out and "Nothing was installed" not in out
