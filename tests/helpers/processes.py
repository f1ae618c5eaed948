"""Test helpers that look at real processes (Linux /proc and pidfds): nothing may be left behind."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

from tests.helpers.timeouts import scaled

__all__ = ["no_process_left", "pids_in", "process_alive", "processes_mentioning", "wait_gone"]


def _state(pid: int | str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def process_alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie counts as dead)."""
    return _state(pid) not in (None, "Z", "X")


def pids_in(pid_file: Path) -> list[int]:
    """The pids a stub wrote to its ``STUB_PID_FILE``."""
    if not pid_file.exists():
        return []
    return [int(line) for line in pid_file.read_text().split() if line.strip().isdigit()]


def processes_mentioning(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and process_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_gone(pids: list[int], timeout: float = scaled(10.0)) -> list[int]:
    """Wait on pidfds (no polling, bounded overall) for ``pids`` to exit; return those still alive."""
    deadline = time.monotonic() + timeout
    left = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
        if process_alive(pid):
            left.append(pid)
    return left


def no_process_left(marker: str, timeout: float = scaled(10.0)) -> bool:
    """True when no live process mentions ``marker`` (servers exit once their stdin closes)."""
    return not wait_gone(processes_mentioning(marker), timeout)
