"""The tests' fork server (tests/helpers/prefork.py): a test's ``mcp-setup`` forked from it is the
program the test asked for, with its arguments, environment, folder and streams, and ends as the
program ended; what it cannot stand for is started the usual way."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.mcp_face import REPO, face_env
from tests.helpers.prefork import ForkServer, real_mcp_setup_argv
from tests.helpers.timeouts import scaled


@pytest.fixture
def fork_server() -> Iterator[ForkServer]:
    server = ForkServer()
    server.start()
    wait_until(lambda: os.path.exists(server.socket_path), "the fork server listens")
    yield server
    server.stop()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline, tick = time.monotonic() + scaled(timeout), threading.Event()
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        tick.wait(0.05)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def command_line(pid: int) -> str:
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()


def serve(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``serve`` started with ``argv``, once it printed its link."""
    proc = subprocess.Popen(
        [*argv, "serve", "--no-browser", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**env, "PYTHONUNBUFFERED": "1"},  # the link line as soon as it is printed
        cwd=REPO,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "http://127.0.0.1:" in line, line
    return proc, line


def test_a_forked_program_gets_the_tests_arguments_environment_and_streams_and_exits_with_its_code(
    fork_server: ForkServer, tmp_path: Path
) -> None:
    env = face_env(tmp_path)
    wrong = subprocess.run(
        fork_server.argv(real_mcp_setup_argv("lst")), env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert wrong.returncode == 2 and "Did you mean 'list'?" in wrong.stderr
    exported = subprocess.run(
        fork_server.argv(real_mcp_setup_argv("export", "--to", "servers.lock")),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "servers.lock").is_file()  # written in the test's folder
    (tmp_path / "blocker").write_text("")
    blocked = subprocess.run(
        fork_server.argv(real_mcp_setup_argv("list")),
        env={**env, "MCP_SETUP_HOME": str(tmp_path / "blocker" / "home")},
        capture_output=True,
        text=True,
    )
    assert blocked.returncode != 0 and str(tmp_path / "blocker") in blocked.stderr  # the test's environment


def test_a_served_program_is_forked_takes_the_signal_its_launcher_gets_and_the_launcher_ends_as_it_did(
    fork_server: ForkServer, tmp_path: Path
) -> None:
    assert fork_server.process is not None
    proc, link = serve(fork_server.argv(real_mcp_setup_argv()), face_env(tmp_path))
    try:
        (program,) = children(fork_server.process.pid)  # forked: not a new interpreter
        assert program != proc.pid and "prefork_launch.py" in command_line(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(scaled(30)) == 0  # serve's own exit on SIGTERM
        assert children(fork_server.process.pid) == []
    finally:
        proc.kill()


def test_a_program_that_dies_of_a_signal_ends_its_launcher_with_the_same_signal(
    fork_server: ForkServer, tmp_path: Path
) -> None:
    assert fork_server.process is not None
    proc, _ = serve(fork_server.argv(real_mcp_setup_argv()), face_env(tmp_path))
    try:
        (program,) = children(fork_server.process.pid)
        os.kill(program, signal.SIGKILL)
        assert proc.wait(scaled(30)) == -signal.SIGKILL
    finally:
        proc.kill()


def test_a_killed_launcher_takes_its_program_with_it(fork_server: ForkServer, tmp_path: Path) -> None:
    assert fork_server.process is not None
    proc, _ = serve(fork_server.argv(real_mcp_setup_argv()), face_env(tmp_path))
    (program,) = children(fork_server.process.pid)
    proc.kill()
    proc.wait(scaled(30))
    wait_until(lambda: program not in children(fork_server.process.pid), "the program is gone")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("socket", "extra"),
    [("listening", {"PYTHONWARNINGS": "error::DeprecationWarning"}), ("absent", {})],
    ids=["other-interpreter-settings", "no-fork-server"],
)
def test_a_program_the_fork_server_cannot_stand_for_is_started_the_usual_way(
    fork_server: ForkServer, tmp_path: Path, socket: str, extra: dict[str, str]
) -> None:
    argv = fork_server.argv(real_mcp_setup_argv())
    if socket == "absent":
        argv[4] = str(tmp_path / "no.sock")
    proc, _ = serve(argv, face_env(tmp_path, **extra))
    try:
        assert "mcp-setup serve" in command_line(proc.pid)  # the launcher became the program
        assert fork_server.process is not None and children(fork_server.process.pid) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(scaled(30)) == 0
