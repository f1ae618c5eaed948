"""Issue 26 item 1: a local package that serves HTTP is reached only on its own socket.

Another program already listening on the package's port (a *squatter*) must never get a
request: when it answers before the spawn the package is not started; when it starts
listening after the spawn (before the package binds) the package is stopped. Real
subprocesses, real loopback sockets; the squatter counts every byte it is sent.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from setup_agent.launch.listeners import classify, listening_inodes, tree_pids
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from tests.helpers.paths import REPO
from tests.helpers.processes import no_process_left
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

ROOT = str(REPO)
CANARY = "Bearer squatter-canary-7f3a91"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Squatter:
    """A foreign listener on ``port``: accepts, records what it is sent, answers nothing."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.connections = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self, port: int) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while chunk := await reader.read(4096):
                self.received += chunk
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def package_spec(port: int, marker: str, args: list[str] | None = None) -> LaunchSpec:
    return LaunchSpec(
        transport="streamable-http",
        command=sys.executable,
        runner=sys.executable,
        package_type="pypi",
        args=args or ["-m", "tests.stub_server.http_server", "--port", str(port), "--header", marker],
        env={"PYTHONPATH": ROOT},
        url=f"http://127.0.0.1:{port}/mcp",
        headers={"Authorization": CANARY},
    )


async def test_a_package_whose_port_already_answers_is_not_started_and_the_squatter_gets_nothing(
    tmp_path: Path,
) -> None:
    port = free_port()
    squatter = Squatter()
    await squatter.start(port)
    marker = f"X-Squat-First-{port}"
    try:
        prober = Prober(Redactor(), scratch_root=tmp_path, timeout=scaled(30))
        with pytest.raises(Exception) as info:
            await prober.probe(package_spec(port, marker), {})
        await prober.drain()
    finally:
        await squatter.stop()
    assert getattr(info.value, "code", None) == "port_in_use"
    assert f"Port {port}" in info.value.message and "not started" in info.value.message
    assert bytes(squatter.received) == b"", "the foreign listener was sent a request"
    assert no_process_left(marker)


async def test_a_squatter_that_starts_listening_after_the_spawn_gets_nothing_and_the_package_is_stopped(
    tmp_path: Path,
) -> None:
    """The child tells a control socket it has started; only then does the squatter bind, and
    the child never binds: the port answers, but from a process outside the child's tree."""
    port = free_port()
    squatter = Squatter()
    bound = asyncio.Event()

    async def control(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await squatter.start(port)
        bound.set()
        writer.write(b"go\n")
        await writer.drain()
        await reader.read()  # until the child goes
        writer.close()

    ctl = await asyncio.start_server(control, "127.0.0.1", 0)
    ctl_port = ctl.sockets[0].getsockname()[1]
    marker = f"X-Squat-Later-{port}"
    child = (
        "import socket, sys, time\n"
        f"c = socket.create_connection(('127.0.0.1', {ctl_port})); c.recv(3)\n"
        "time.sleep(60)\n"
    )
    try:
        prober = Prober(Redactor(), scratch_root=tmp_path, timeout=scaled(30))
        with pytest.raises(Exception) as info:
            await prober.probe(package_spec(port, marker, ["-c", child, marker]), {})
        await prober.drain()
    finally:
        ctl.close()
        await squatter.stop()
    assert bound.is_set()
    assert getattr(info.value, "code", None) == "port_in_use"
    assert "package was stopped" in info.value.message
    assert bytes(squatter.received) == b"", "the foreign listener was sent a request"
    assert no_process_left(marker)


async def test_a_package_whose_server_is_a_grandchild_behind_a_shell_is_accepted(tmp_path: Path) -> None:
    port = free_port()
    marker = f"X-Grandchild-{port}"
    script = f"{sys.executable} -m tests.stub_server.http_server --port {port} --header {marker}; exit 0"
    spec = package_spec(port, marker).model_copy(update={"command": "/bin/sh", "args": ["-c", script]})
    prober = Prober(Redactor(), scratch_root=tmp_path, timeout=scaled(30))
    result = await prober.probe(spec, {})
    assert {t["name"] for t in result.tools} >= {"echo"}
    await prober.drain()
    assert no_process_left(marker)


def test_a_listening_socket_is_ours_for_our_tree_and_foreign_for_another_process() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_inodes(port, "localhost")
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        try:
            assert child.pid in tree_pids(os.getpid())
            mine = classify(os.getpid(), "127.0.0.1", port)
            theirs = classify(child.pid, "localhost", port)
        finally:
            child.communicate(b"")
    assert mine is not None and mine.ours and not mine.foreign
    assert theirs is not None and theirs.foreign and not theirs.ours


def test_a_listener_on_another_address_does_not_serve_the_urls_host() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_inodes(port, "127.0.0.1") == set()
        assert listening_inodes(port, "127.0.0.2")
