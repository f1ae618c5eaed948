"""Test helpers that look at real processes (Linux /proc and pidfds): nothing may be left behind."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

from tests.helpers.timeouts import scaled

__all__ = [
    "ancestors",
    "command_line",
    "descendants",
    "no_process_left",
    "pids_in",
    "process_alive",
    "processes_mentioning",
    "runner_processes",
    "runners_above",
    "wait_gone",
]


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


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def command_line(pid: int) -> list[str]:
    """``pid``'s argv as /proc shows it (a process that renamed itself shows its new name)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def ancestors(pid: int, *, below: int) -> list[int]:
    """The parents of ``pid`` up to (not including) ``below``, nearest first."""
    out = []
    parent = _parent(pid)
    while parent not in (None, 0, 1, below):
        assert parent is not None
        out.append(parent)
        parent = _parent(parent)
    return out


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (its children, theirs…)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and process_alive(int(entry.name)):
            parent = _parent(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


#: A runner's wrapper: npm (``npm exec`` renames itself so), npx, uv, uvx, or Node on npm's scripts.
_RUNNERS = {"npm", "npx", "uv", "uvx", "npm-cli.js", "npx-cli.js"}


def runner_processes(pids: list[int]) -> list[str]:
    """The command lines of those of ``pids`` that are a package runner (``npm exec``, ``npx``,
    ``uv tool run``, ``uvx``)."""
    out = []
    for pid in pids:
        argv = command_line(pid)
        words = argv[0].split() if len(argv) == 1 else argv  # a renamed process: one string
        names = {Path(w).name for w in words[:2]}
        if names & _RUNNERS or " ".join(words[:2]) in ("npm exec", "uv tool"):
            out.append(" ".join(argv))
    return out


def runners_above(pids: list[int]) -> list[str]:
    """The runner processes (:func:`runner_processes`) among the parents of ``pids``, up to this
    process."""
    return runner_processes(sorted({a for pid in pids for a in ancestors(pid, below=os.getpid())}))
