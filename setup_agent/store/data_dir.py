"""The data dir's own permissions: the home and the dirs that hold installs and
scratch copies are the user's alone (0700), also when they already existed looser.

A dir we own is tightened (it is ours: nothing else should read an install's files or a
probe's scratch copy); one we cannot tighten (another owner, a read-only mount) is reported,
and the caller logs the warning. Standard library only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["PRIVATE_SUBDIRS", "prepare_data_dir"]

#: Made 0700 under the home (``procs``: the process ledger, ``cache``: bundles by sha256).
PRIVATE_SUBDIRS = ("servers", "scratch", "procs", "cache", "logs")


def prepare_data_dir(home: Path, subdirs: tuple[str, ...] = PRIVATE_SUBDIRS) -> list[str]:
    """Create ``home`` and ``subdirs`` as 0700 (tightening looser existing ones); returns one
    warning (no value, only paths and modes) for each dir that was or stays loose."""
    warnings: list[str] = []
    for path in (home, *(home / name for name in subdirs)):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            mode = stat.S_IMODE(path.lstat().st_mode)
        except OSError:
            continue
        if not mode & 0o077:
            continue
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            warnings.append(
                f"{path} is readable by other users (mode {mode:04o}) and could not be made private "
                f"({exc.strerror or type(exc).__name__}): installs and scratch copies there may be read by others."
            )
        else:
            warnings.append(f"{path} was readable by other users (mode {mode:04o}); it is now 0700.")
    return warnings
