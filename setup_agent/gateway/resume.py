"""What a server's start checked, kept across its idle stop (:class:`Checked`), so that its
next start does not check it again when nothing it runs from could have changed.

A start lists the server's tools (and its prompts and resources) and records them against its
pins (store/tool_pins.py): about a sixth of a small server's start. An idle stop is the
gateway's own doing, invisible to the person: had the server kept running, nothing would have
been listed again until it said its lists changed. So the start after an idle stop takes the
tools the store holds, as the running session had them, when all of these are what the checked
start had:

- its launch (command line, environment templates, sandbox, network policy: the stored spec);
- its stored settings (the values' stamp: a replaced key restarts it anyway);
- the files it runs from (:func:`files_of`): its own folder, where the sandbox lets it write
  (an MCPB bundle is unpacked there), and the files and folders its command line names;
- for a package a runner fetches, an exact version (``1.2.3``, not a range or ``latest``): the
  runner's cache holds what the download phase put there, read-only to every server.

Anything else (a folder too large to look at cheaply, a remote server, a changed file) is
listed and checked as at a first start.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setup_agent.launch import LaunchSpec, ResolvedLaunch

__all__ = ["MAX_ENTRIES", "Checked", "files_of"]

#: Past this many files and folders, the files a start runs from are not looked at (every start
#: of such a server lists its tools): looking must stay far cheaper than listing.
MAX_ENTRIES = 5_000

#: Package types a runner fetches by name and version at a start (npx, uvx, dnx).
_FETCHED = frozenset({"npm", "pypi", "nuget"})
_RUNNERS = frozenset({"npx", "npm", "uvx", "uv", "dnx", "pipx", "bunx"})
_CONTAINERS = frozenset({"docker", "podman"})

#: A runner's package version that names one release (``2026.8.31``, ``1.2.3-rc.1``, ``0.4.0.post1``).
_EXACT = re.compile(r"^v?\d+(\.\d+)*([-+.][0-9A-Za-z][0-9A-Za-z.\-+]*)?$")


@dataclass(frozen=True)
class Checked:
    """What one start listed and recorded against the pins ran with: its stored launch, the
    stamp of its stored settings and the fingerprint of its files (:func:`files_of`)."""

    launch_spec: dict[str, Any]
    values_stamp: str
    files: str

    def holds_for(self, launch_spec: dict[str, Any], values_stamp: str, files: str | None) -> bool:
        """Whether a start with these would run what this one checked."""
        return files is not None and (launch_spec, values_stamp, files) == (
            self.launch_spec,
            self.values_stamp,
            self.files,
        )


def files_of(resolved: ResolvedLaunch, install_dir: Path) -> str | None:
    """A fingerprint of the files a local start of ``resolved`` runs from (module doc), or None
    when it cannot be told cheaply (a remote, a runner's package of no exact version, too many
    files). Reads names and ``stat``s only (a change of contents moves a file's ctime), never
    contents; symbolic links are not followed; a folder counts by the files and links in it."""
    spec = resolved.spec
    if not resolved.local or not _exact_release(spec):
        return None
    entries: list[str] = []
    roots = [install_dir, *(Path(p) for p in resolved.literal_paths)]
    if spec.command and os.path.isabs(spec.command):
        roots.append(Path(spec.command))
    left = MAX_ENTRIES
    for root in roots:
        left = _look(root, entries, left)
        if left < 0:
            return None
    return hashlib.sha256("\n".join(entries).encode("utf-8", "surrogateescape")).hexdigest()


def _exact_release(spec: LaunchSpec) -> bool:
    """A spec whose code is on this computer (a bundle, a local command), or a runner's package
    pinned to one release; never a container image (its tag may move, and it runs outside our
    sandbox)."""
    runner = Path(spec.runner or spec.command or "").name
    if spec.package_type == "oci" or runner in _CONTAINERS:
        return False
    if spec.package_type not in _FETCHED and runner not in _RUNNERS:
        return True
    return bool(spec.version and _EXACT.match(spec.version))


def _look(root: Path, entries: list[str], left: int) -> int:
    """Append each file and link under ``root`` (``root`` itself when it is one) as one line;
    returns how many of ``left`` entries are left to look at, below 0 when it cannot be told
    (unreadable, or too many)."""
    stack = [str(root)]
    while stack:
        path = stack.pop()
        left -= 1
        if left < 0:
            return left
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            entries.append(f"{path}\0missing")
            continue
        except OSError:
            return -1
        if stat.S_ISLNK(st.st_mode):
            entries.append(f"{path}\0link\0{os.readlink(path)}")
        elif stat.S_ISDIR(st.st_mode):  # by what it holds: the sandbox makes empty ones at a first start
            try:
                names = sorted(os.listdir(path), reverse=True)
            except OSError:
                return -1
            stack.extend(os.path.join(path, name) for name in names)
        else:  # its ctime too: a writer may set the mtime back, never the ctime
            entries.append(f"{path}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}")
    return left
