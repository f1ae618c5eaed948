"""The one ``mcp-setup serve`` of a data folder: its lock, and the page link it records for
``mcp-setup open``.

Two serves on one data folder would each start every installed server; the second one is refused
and told which one runs. ``<home>/serve.json`` (0600: the link's token is the person's
credential) holds the owner, as the process ledger writes it (its pid and that pid's start time,
which tells a live owner from a later process that reused the pid, :class:`setup_agent.launch.Owner`),
when it started, and, once it serves, its link. The serve holds an exclusive ``flock`` on the
file while it runs: taking it is atomic (two serves started at once cannot both win) and the
kernel lets go of it when the process dies, so the file a crashed serve left is taken over. At a
clean exit the file is removed.

Standard library only (and the owner's start time from ``/proc``): ``mcp-setup open`` stays fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import webbrowser
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from setup_agent.launch import Owner

__all__ = [
    "FILE_NAME",
    "AlreadyServing",
    "RunningServe",
    "ServeLock",
    "display_available",
    "open_in_browser",
    "running_serve",
]

FILE_NAME = "serve.json"


@dataclass(frozen=True)
class RunningServe:
    """The serve that runs on a data folder: its pid, when it started, and its link once it serves."""

    pid: int
    started_at: str
    url: str | None

    def words(self) -> str:
        return f"pid {self.pid}, started {self.started_at}"


class AlreadyServing(Exception):
    """Another serve holds this data folder."""

    def __init__(self, other: RunningServe | None) -> None:
        super().__init__("another mcp-setup serve runs on this data folder")
        self.other = other


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(data: Mapping[str, Any]) -> bool:
    """The recorded owner still runs (the same process, not a later one with its pid)."""
    try:
        pid, start = int(data["pid"]), data.get("start")
    except (KeyError, TypeError, ValueError):
        return False
    if start is not None:
        return Owner(pid, int(start)).alive()
    try:  # no /proc (macOS): the pid alone
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _described(data: Mapping[str, Any]) -> RunningServe:
    url = data.get("url")
    return RunningServe(int(data["pid"]), str(data.get("started_at") or "?"), url if isinstance(url, str) else None)


def running_serve(home: Path) -> RunningServe | None:
    """The serve running on the data folder ``home``, or None (none, or the one recorded has died)."""
    data = _read(Path(home) / FILE_NAME)
    return _described(data) if data is not None and _alive(data) else None


class ServeLock:
    """This process's hold on a data folder as its one serve, from :meth:`acquire` to :meth:`release`."""

    def __init__(self, path: Path, fd: int, record: dict[str, Any]) -> None:
        self.path = path
        self._fd = fd
        self._record = record

    @classmethod
    def acquire(cls, home: Path) -> ServeLock:
        """Hold ``home`` (made 0700 if missing); :class:`AlreadyServing` when another serve does."""
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = home / FILE_NAME
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                data = _read(path)
                raise AlreadyServing(_described(data) if data is not None and "pid" in data else None) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the serve before us removed the file while we opened it: take the new one
        owner = Owner.current()
        record = {
            "pid": os.getpid(),
            "start": owner.start if owner is not None else None,
            "started_at": datetime.now(UTC).astimezone().strftime("%Y-%m-%d %H:%M"),
        }
        lock = cls(path, fd, record)
        lock._write(record)
        return lock

    def _write(self, record: Mapping[str, Any]) -> None:
        data = json.dumps(record).encode()
        os.fchmod(self._fd, 0o600)
        os.pwrite(self._fd, data, 0)  # in place: the lock is on this file, a new one would not hold it
        os.ftruncate(self._fd, len(data))

    def publish(self, url: str) -> None:
        """Record the page link (``mcp-setup open`` reads it)."""
        self._write({**self._record, "url": url})

    def release(self) -> None:
        """Remove the file, then let go (a serve waiting for it finds a fresh one)."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)


def display_available(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether a browser can show up: macOS and Windows always; elsewhere only
    with an X11 or Wayland display (a headless Chromium would crash silently)."""
    if platform in ("darwin", "win32"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def open_in_browser(url: str) -> bool:
    """Open ``url`` in the person's browser; False when that failed (they open the printed link)."""
    try:
        return bool(webbrowser.open(url))
    except Exception:  # noqa: BLE001 - the URL is printed anyway
        return False
