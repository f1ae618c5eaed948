"""What a process of ours spawned and holds on disk, recorded so that a crash leaves nothing.

A SIGKILLed ``mcp-setup`` cannot clean up: its servers' grandchildren keep running, and a
half-done install leaves its unpacked bundle and scratch dirs. So every such thing is
recorded with its **owner** (our pid and that pid's start time from ``/proc/<pid>/stat``,
which tells a live owner from a later process that reused its pid), and the next start-up
ends or removes what belongs to owners that are dead:

- :class:`ProcessLedger` — a directory of small JSON files (written atomically, one per
  spawned process group: ``pgid``, the group leader's start time, the owner), removed at
  clean teardown. :meth:`ProcessLedger.sweep` ends the groups of dead owners, **by pid**:
  a process is signalled only while it is still in the recorded group and started no
  earlier than the recorded leader (through a pidfd, so a pid reused in between is never
  hit). Nothing is ever killed by name.
- :func:`claim_dir` — creates a directory atomically with an owner mark inside;
  :func:`sweep_install_dirs` removes ``srv_*`` install dirs without a committed row whose
  owner is not alive.

Linux only (``/proc``): elsewhere nothing is recorded and the sweeps do nothing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import select
import shutil
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "OWNER_FILE",
    "Owner",
    "ProcessLedger",
    "claim_dir",
    "dir_owner",
    "start_time",
    "sweep_install_dirs",
]

logger = logging.getLogger(__name__)

#: The owner mark inside a claimed directory.
OWNER_FILE = ".mcp-setup-owner"
_TAG = re.compile(r"^(\d+)\.(\d+)$")


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from field 3 (state) on; None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    try:
        return text.rsplit(")", 1)[1].split()
    except IndexError:
        return None


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _group_of(pid: int) -> tuple[int, int, int] | None:
    """(process group, session, start time) of a live ``pid``."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[2]), int(fields[3]), int(fields[19])


@dataclass(frozen=True)
class Owner:
    """A process, told apart from a later one with the same pid by its start time."""

    pid: int
    start: int

    @classmethod
    def current(cls) -> Owner | None:
        """This process (None without ``/proc``)."""
        start = start_time(os.getpid())
        return None if start is None else cls(os.getpid(), start)

    @classmethod
    def parse(cls, tag: str) -> Owner | None:
        m = _TAG.match(tag.strip())
        return cls(int(m.group(1)), int(m.group(2))) if m else None

    @property
    def tag(self) -> str:
        """``<pid>.<start>``: how an owner is written into a file or a directory name."""
        return f"{self.pid}.{self.start}"

    def alive(self) -> bool:
        return start_time(self.pid) == self.start


# --- spawned process groups -------------------------------------------------------------


class ProcessLedger:
    """One JSON file per spawned process group under ``directory``; swept at start-up."""

    def __init__(self, directory: Path, *, owner: Owner | None = None) -> None:
        self.directory = Path(directory)
        self._owner = owner

    def _me(self) -> Owner | None:
        return self._owner or Owner.current()

    def record(self, pgid: int) -> Path | None:
        """Note that we lead process group ``pgid``; returns the entry for :meth:`forget`."""
        owner, leader = self._me(), start_time(pgid)
        if owner is None or leader is None:
            return None
        entry = {"pgid": pgid, "leader_start": leader, "owner_pid": owner.pid, "owner_start": owner.start}
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.directory / f"{pgid}.{leader}.json"
        tmp = self.directory / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            tmp.write_text(json.dumps(entry))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            logger.warning("could not record process group %d", pgid)
            return None
        return path

    def forget(self, entry: Path | None) -> None:
        """The group is gone (clean teardown): drop its entry."""
        if entry is not None:
            entry.unlink(missing_ok=True)

    def entries(self) -> list[tuple[Path, dict]]:
        out: list[tuple[Path, dict]] = []
        if not self.directory.is_dir():
            return out
        for path in sorted(self.directory.glob("*.json")):
            try:
                data = json.loads(path.read_text())
                int(data["pgid"]), int(data["leader_start"]), int(data["owner_pid"]), int(data["owner_start"])
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)  # unreadable: nothing can be verified from it
                continue
            out.append((path, data))
        for stale in self.directory.glob(".*.tmp"):
            stale.unlink(missing_ok=True)
        return out

    def end_mine(self, *, timeout: float = 0.05) -> list[int]:
        """End every group this process recorded and has not forgotten, at once (SIGKILL, then a
        wait of at most ``timeout``): an interrupt, when no grace is left for a stop that asks
        first. Returns the pids that were signalled; the entries go with the groups."""
        me = self._me()
        ended: list[int] = []
        for path, data in self.entries():
            if me is None or Owner(int(data["owner_pid"]), int(data["owner_start"])) != me:
                continue
            ended += end_group(int(data["pgid"]), int(data["leader_start"]), timeout=timeout)
            path.unlink(missing_ok=True)
        if ended:
            logger.info("ended %d server process(es) at once (interrupted)", len(ended))
        return ended

    def sweep(self, *, timeout: float = 5.0) -> list[int]:
        """End every recorded group whose owner is dead; returns the pids that were signalled."""
        ended: list[int] = []
        for path, data in self.entries():
            if Owner(int(data["owner_pid"]), int(data["owner_start"])).alive():
                continue
            ended += end_group(int(data["pgid"]), int(data["leader_start"]), timeout=timeout)
            if not _members(int(data["pgid"]), int(data["leader_start"])):
                path.unlink(missing_ok=True)
        if ended:
            logger.info("ended %d leftover process(es) of a server group from a previous run", len(ended))
        return ended


def _members(pgid: int, leader_start: int) -> list[int]:
    """Live processes that are still of the recorded group: same group and session, and
    started no earlier than its leader (a reused pgid would have a newer leader)."""
    leader = _group_of(pgid)
    if leader is not None and leader[2] != leader_start:
        return []  # the pid now belongs to another process: not our group any more
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        info = _group_of(int(name))
        if info is not None and info[0] == pgid and info[1] == pgid and info[2] >= leader_start:
            found.append(int(name))
    return found


def end_group(pgid: int, leader_start: int, *, timeout: float = 5.0) -> list[int]:
    """SIGKILL each verified member of the recorded group through a pidfd; wait (bounded)."""
    fds: list[tuple[int, int]] = []
    try:
        for pid in _members(pgid, leader_start):
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            info = _group_of(pid)  # verified again now that the pidfd pins the process
            if info is None or info[0] != pgid or info[2] < leader_start:
                os.close(fd)
                continue
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                os.close(fd)
                continue
            fds.append((pid, fd))
        deadline = time.monotonic() + timeout
        for _pid, fd in fds:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        for _pid, fd in fds:
            os.close(fd)
    return [pid for pid, _ in fds]


# --- directories --------------------------------------------------------------------------


def claim_dir(path: Path, owner: Owner | None = None) -> Path:
    """Create ``path`` (which must not exist) with an owner mark, atomically: the directory
    never exists without its mark, so a concurrent sweep never takes a live one for debris."""
    owner = owner or Owner.current()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".claim-{secrets.token_hex(6)}"
    tmp.mkdir(mode=0o700)
    try:
        if owner is not None:
            (tmp / OWNER_FILE).write_text(owner.tag)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def dir_owner(path: Path) -> Owner | None:
    try:
        return Owner.parse((path / OWNER_FILE).read_text())
    except OSError:
        return None


def sweep_install_dirs(install_root: Path, committed: Collection[str]) -> list[Path]:
    """Remove install dirs (``srv_*``, and claims never renamed) that have no committed row
    and no live owner; returns what was removed."""
    removed: list[Path] = []
    if not install_root.is_dir():
        return removed
    for path in sorted(install_root.iterdir()):
        if not path.is_dir() or path.is_symlink():
            continue
        if not (path.name.startswith("srv_") or path.name.startswith(".claim-")) or path.name in committed:
            continue
        owner = dir_owner(path)
        if owner is not None and owner.alive():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        logger.info("removed %d install dir(s) left by an interrupted install", len(removed))
    return removed
