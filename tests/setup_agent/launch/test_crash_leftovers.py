"""What a SIGKILL of ``mcp-setup`` leaves behind, and the next start-up's sweep.

A real ``mcp-setup mcp`` subprocess starts a stub server (from a local-catalog bundle) that
blocks in ``initialize``; once the stub has told us (through a FIFO) that it runs, the face
is SIGKILLed. A second ``mcp-setup mcp`` on the same data dir must then end the stub's
grandchild and remove the install and scratch dirs, while a live owner's are kept.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from setup_agent.launch.procs import Owner, ProcessLedger, claim_dir, start_time, sweep_install_dirs
from setup_agent.launch.scratch import make_scratch_dir, sweep_scratch
from tests.helpers.mcp_face import REPO, face_env, real_mcp_setup_argv
from tests.helpers.processes import process_alive, wait_gone
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex, stub_manifest, stub_server_json
from tests.stub_server.procs import kill_and_wait

NAME = "io.test/stuck"


class PidPipe:
    """A FIFO the stub appends its pids to (``STUB_PID_FILE``); reads are event-driven and bounded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a reader always exists: writers never block
        self.buf = b""

    def pids(self, count: int, timeout: float = scaled(30.0)) -> list[int]:
        deadline = time.monotonic() + timeout
        while self.buf.count(b"\n") < count:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError(f"the stub wrote {self.buf!r}, expected {count} pids")
            self.buf += os.read(self.fd, 4096)
        return [int(x) for x in self.buf.split()[:count]]

    def close(self) -> None:
        os.close(self.fd)


def stuck_bundle_catalog(tmp_path: Path, pid_pipe: Path) -> Path:
    """A catalog with one bundle: the stub hangs in initialize and starts a grandchild."""
    manifest = stub_manifest(expected_value=None, mode="hang,grandchild", name="stuck")
    manifest["user_config"] = {}
    manifest["server"]["mcp_config"]["env"] = {
        "STUB_MODE": "hang,grandchild",
        "STUB_REQUIRE": "0",
        "STUB_PID_FILE": str(pid_pipe),
    }
    bundle = tmp_path / "dist" / "stuck.mcpb"
    bundle.parent.mkdir(parents=True)
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.write(SERVER_PY, "server/server.py")
    doc = stub_server_json(bundle.resolve().as_uri(), sha256_hex(bundle.read_bytes()), name=NAME)
    for package in doc["packages"]:
        package["environmentVariables"] = []
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "stuck.json").write_text(json.dumps(doc))
    return catalog


class RawFace:
    """``mcp-setup mcp`` as a subprocess spoken to in raw JSON-RPC lines (so its pid is ours)."""

    def __init__(self, env: dict[str, str], stderr: Path) -> None:
        self.errlog = open(stderr, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            real_mcp_setup_argv("mcp"),
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
            bufsize=0,
        )
        self.buf = b""
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        return self.next_id

    def reply(self, request_id: int, timeout: float = scaled(60.0)) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == request_id and ("result" in msg or "error" in msg):
                    return msg
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no reply to request {request_id}")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise EOFError("mcp-setup closed its stdout")
            self.buf += chunk

    def initialize(self) -> None:
        rid = self.send(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "crash-test", "version": "0"},
            },
        )
        assert "result" in self.reply(rid)
        self.send("notifications/initialized", notify=True)

    def call(self, tool: str, args: dict[str, Any]) -> int:
        return self.send("tools/call", {"name": tool, "arguments": args})

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(scaled(30))
            except subprocess.TimeoutExpired:
                kill_and_wait(self.proc.pid)
                self.proc.wait(scaled(5))
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self.errlog.close()


@pytest.fixture
def crashed(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, list[int]]]:
    """A face SIGKILLed while its stub server hangs in initialize: (env, data dir, [server, grandchild])."""
    pipe = PidPipe(tmp_path / "pids.fifo")
    catalog = stuck_bundle_catalog(tmp_path, pipe.path)
    # Sandbox off: the stub reports its pids through a FIFO beside the test (outside its folder), and
    # under bubblewrap they would be pids of its own namespace (which dies with mcp-setup anyway).
    env = face_env(
        tmp_path,
        MCP_SETUP_REGISTRIES="local",
        MCP_SETUP_CATALOG_DIR=str(catalog),
        MCP_SETUP_PROBE_TIMEOUT_SECONDS=str(scaled(120)),
        MCP_SETUP_SANDBOX="off",
    )
    pids: list[int] = []
    face = RawFace(env, tmp_path / "face1.log")
    try:
        face.initialize()
        face.call("mcp_setup_install_and_connect", {"qualified_name": NAME})
        pids = pipe.pids(2)  # the stub, then its grandchild: the install is under way
        server = pids[0]
        assert Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(face.proc.pid)
        kill_and_wait(face.proc.pid)  # SIGKILL: no cleanup of any kind runs
        face.proc.wait(scaled(5))
        yield env, Path(env["MCP_SETUP_HOME"]), pids
    finally:
        face.close()
        pipe.close()
        for pid in pids:  # never leave a stub behind, whatever the test found
            if process_alive(pid) and start_time(pid) is not None:
                kill_and_wait(pid)


def restart(env: dict[str, str], log: Path) -> None:
    """Start mcp-setup again and wait until its core is up (a tool call answers), then exit cleanly."""
    face = RawFace(env, log)
    try:
        face.initialize()
        reply = face.reply(face.call("mcp_setup_list_servers", {}))
        assert "result" in reply, reply
    finally:
        face.close()


def test_a_grandchild_of_a_server_outlives_a_killed_mcp_setup_only_until_the_next_start(
    crashed, tmp_path: Path
) -> None:
    env, data, (server, grandchild) = crashed
    assert wait_gone([server], timeout=scaled(10)) == []  # the stub exits at EOF on its stdin ...
    assert process_alive(grandchild)  # ... but its grandchild lives on
    records = list((data / "procs").glob("*.json"))
    assert [json.loads(r.read_text())["pgid"] for r in records] == [server]
    restart(env, tmp_path / "face2.log")
    assert wait_gone([grandchild], timeout=scaled(10)) == []
    assert list((data / "procs").glob("*.json")) == []


def test_a_killed_install_leaves_no_install_dir_or_scratch_dir_after_the_next_start(crashed, tmp_path: Path) -> None:
    env, data, _ = crashed
    assert [p.name[:4] for p in (data / "servers").iterdir()] == ["srv_"]  # the unpacked bundle
    assert any((data / "scratch").iterdir())  # the probe's workspace
    restart(env, tmp_path / "face2.log")
    assert list((data / "servers").iterdir()) == []
    assert list((data / "scratch").iterdir()) == []


# --- the sweeps never touch what a live process owns ----------------------------------------


def test_the_sweeps_keep_a_live_owners_dirs_and_the_committed_ones(tmp_path: Path) -> None:
    servers, scratch = tmp_path / "servers", tmp_path / "scratch"
    scratch.mkdir()
    mine = claim_dir(servers / "srv_live")  # owned by this (live) process
    committed = servers / "srv_done"
    committed.mkdir()
    orphan = servers / "srv_orphan"
    orphan.mkdir()  # no owner mark, no row: debris
    dead = Owner(os.getpid(), (start_time(os.getpid()) or 0) + 1)  # same pid, other start: not us
    stale = claim_dir(servers / "srv_dead", owner=dead)
    live_scratch = make_scratch_dir(scratch, "probe")
    dead_scratch = scratch / f"mcp-setup-probe-{dead.tag}-x"
    dead_scratch.mkdir()
    assert sorted(p.name for p in sweep_install_dirs(servers, {"srv_done"})) == ["srv_dead", "srv_orphan"]
    assert sweep_scratch(scratch) == [dead_scratch]
    assert mine.is_dir() and committed.is_dir() and live_scratch.is_dir()
    assert not stale.exists() and not orphan.exists()


def test_a_ledger_entry_whose_pid_now_belongs_to_another_process_is_never_signalled(tmp_path: Path) -> None:
    # A recorded group whose owner is dead, but whose pgid is now a different process (the
    # recorded leader start time does not match): the sweep must leave that process alone.
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ledger = ProcessLedger(tmp_path / "procs")
        real_start = start_time(victim.pid)
        assert real_start is not None
        entry = {
            "pgid": victim.pid,
            "leader_start": real_start - 1,
            "owner_pid": os.getpid(),
            "owner_start": (start_time(os.getpid()) or 0) + 1,
        }
        ledger.directory.mkdir()
        (ledger.directory / f"{victim.pid}.x.json").write_text(json.dumps(entry))
        assert ledger.sweep(timeout=1) == []
        assert victim.poll() is None and process_alive(victim.pid)
        # The same entry with the true start time: ended, and the entry dropped.
        entry["leader_start"] = real_start
        (ledger.directory / f"{victim.pid}.x.json").write_text(json.dumps(entry))
        assert ledger.sweep(timeout=scaled(10)) == [victim.pid]
        assert victim.wait(scaled(10)) == -signal.SIGKILL
        assert list(ledger.directory.glob("*.json")) == []
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(scaled(5))


def test_an_interrupt_ends_the_groups_this_process_recorded_at_once_and_no_other_owners(tmp_path: Path) -> None:
    mine = subprocess.Popen(["sleep", "60"], start_new_session=True)
    theirs = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ledger = ProcessLedger(tmp_path / "procs")
        ledger.record(mine.pid)
        other = Owner(os.getpid(), (start_time(os.getpid()) or 0) + 1)  # another (dead) owner's entry
        ProcessLedger(tmp_path / "procs", owner=other).record(theirs.pid)
        assert ledger.end_mine(timeout=scaled(10)) == [mine.pid]
        assert mine.wait(scaled(10)) == -signal.SIGKILL
        assert theirs.poll() is None and process_alive(theirs.pid)  # left to the next start's sweep
        assert [p.name.split(".")[0] for p in ledger.directory.glob("*.json")] == [str(theirs.pid)]
    finally:
        for proc in (mine, theirs):
            if proc.poll() is None:
                proc.kill()
                proc.wait(scaled(5))
