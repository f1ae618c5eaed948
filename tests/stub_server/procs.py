"""Test helpers around the stubs: pid-file cleanup, a raw JSON-RPC stdio client, error unwrapping.

Stdlib only (no SDK import), so any test module can use them cheaply.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers.timeouts import scaled

from . import bundle

OUR_MARKERS = ("stub_server", "time.sleep(3600)", "server.py")
INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def alive(pid: int) -> bool:
    """True if pid runs and is not a zombie (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def is_stub_process(pid: int) -> bool:
    """True if pid's command line looks like one of ours (guards against pid reuse)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return any(m in cmd for m in OUR_MARKERS)


def kill_and_wait(pid: int, timeout: float = scaled(5.0)) -> None:
    """SIGKILL pid and wait on a pidfd (no polling) until it has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        os.kill(pid, signal.SIGKILL)
        select.select([fd], [], [], timeout)
    except ProcessLookupError:
        pass
    finally:
        os.close(fd)


class PidFile:
    """A STUB_PID_FILE path; `cleanup()` kills every listed stub process still running."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def pids(self) -> list[int]:
        return [int(x) for x in self.path.read_text().split()] if self.path.exists() else []

    def cleanup(self) -> list[int]:
        """Kill leftovers; return the pids that were still running."""
        leftovers = [p for p in self.pids() if alive(p) and is_stub_process(p)]
        for pid in leftovers:
            kill_and_wait(pid)
        still = [p for p in leftovers if alive(p)]
        if still:
            raise RuntimeError(f"could not kill stub processes {still}")
        return leftovers


def first_error(exc: BaseException, kind: type[BaseException]) -> Any:
    """The first exception of `kind` inside (nested) exception groups, or None."""
    if isinstance(exc, kind):
        return exc
    for sub in getattr(exc, "exceptions", ()):
        found = first_error(sub, kind)
        if found is not None:
            return found
    return None


class RawStub:
    """The stdio stub as a subprocess spoken to with raw JSON-RPC lines; every read is bounded."""

    def __init__(self, pid_file: PidFile | None = None, argv_extra: tuple[str, ...] = (), **kw: Any) -> None:
        argv, env = bundle.stub_command(pid_file=pid_file.path if pid_file else None, **kw)
        base = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
        self.proc = subprocess.Popen(
            argv + list(argv_extra),
            env={**base, **env},
            bufsize=0,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.buf = b""
        self.next_id = 0

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = scaled(5.0)) -> Any:
        """Send a request; return the decoded reply, or None if none came within `timeout`."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        line = self.readline(timeout)
        return None if line is None else json.loads(line)

    def readline(self, timeout: float) -> bytes | None:
        """One stdout line (without newline), or None on timeout/EOF."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def close(self, timeout: float = scaled(5.0)) -> tuple[int, str]:
        """Close stdin (EOF) and wait for exit; return (exit code, stderr). Kills on timeout."""
        try:
            _, err = self.proc.communicate(timeout=timeout)  # closes stdin first
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(scaled(5))
        return self.proc.returncode, (err or b"").decode()
