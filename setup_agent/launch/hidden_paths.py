"""A failure inside the sandbox that names a path the sandbox hides says so.

A server that cannot open a folder the person named (a vault, a project) fails with
``ENOENT`` or ``EACCES`` for a path that exists: the sandbox hides it. Its error output is read
for absolute paths on a line that says a file is missing or refused; the first that exists on
this computer and that the sandbox does not show is named, with the way to grant it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from setup_agent.errors import SetupError

__all__ = ["hidden_path", "note_hidden_path"]

#: A line that says a file was missing or refused (Node's codes, Python's and libc's words).
_REFUSED = re.compile(
    r"ENOENT|EACCES|EPERM|ENOTDIR|No such file or directory|Permission denied|Operation not permitted|"
    r"does not exist|not found|cannot access|FileNotFoundError|PermissionError",
    re.IGNORECASE,
)
#: An absolute path: quoted (any characters but the quote), or bare up to a space or punctuation.
_PATH = re.compile(r"""'(/[^'\n]+)'|"(/[^"\n]+)"|`(/[^`\n]+)`|(?<![\w.~/-])(/[\w.@+~%-][^\s'"`,;:()\[\]{}]*)""")
#: Shown read-only in every sandbox (setup_agent/launch/sandbox.py SYSTEM_PATHS, and the kernel's).
_ALWAYS_SHOWN = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/sys")


def hidden_path(
    stderr: str, shown: Iterable[str | Path], *, exists: Callable[[str], bool] = os.path.exists
) -> str | None:
    """The first path named by a failure line of ``stderr`` that exists here and is not under
    any of ``shown`` (what the sandbox shows the server: its folder, the grants)."""
    roots = [str(p).rstrip("/") or "/" for p in (*_ALWAYS_SHOWN, *shown)]
    for line in stderr.splitlines():
        if not _REFUSED.search(line):
            continue
        for match in _PATH.finditer(line):
            path = next(g for g in match.groups() if g).rstrip(".")
            if any(path == r or path.startswith(r + "/") for r in roots):
                continue
            if exists(path):
                return path
    return None


def note_hidden_path(exc: BaseException, shown: Iterable[str | Path], mechanism: str) -> None:
    """Add to a failed start (in place) which path the sandbox hid, and how to grant it."""
    if mechanism == "none" or not isinstance(exc, SetupError):
        return
    path = hidden_path(str(exc.details.get("stderr_tail") or ""), shown)
    if path is None:
        return
    folder = path if os.path.isdir(path) else str(Path(path).parent)
    exc.add_words(
        f" The sandbox hides {path}; grant "
        f"{'it' if folder == path else f'its folder {folder}'} in the consent "
        "(another folder it may read and write), then test again.",
        own=True,
        hidden_path=path,
    )
