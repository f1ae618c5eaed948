"""Scratch dirs: a test's, a sign-in's, a ``get``'s or a fetch's workspace, each named for its
owner (pid and start time) so that :func:`sweep_scratch` at start-up removes those of a process
that is gone (a crash) and leaves a live one's alone. A scratch dir may list, in
:data:`ALSO_REMOVE`, paths outside it that its owner made half-way and removes itself when it
finishes (a prefetch's npx cache entry, made without its install scripts): the sweep removes
those too."""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from pathlib import Path

from .procs import Owner

__all__ = ["ALSO_REMOVE", "make_scratch_dir", "sweep_scratch"]

logger = logging.getLogger(__name__)

#: In a scratch dir: absolute paths, one a line, that a crash of its owner leaves unfinished.
ALSO_REMOVE = ".also-remove"

_SCRATCH_PREFIX = "mcp-setup-"
_SCRATCH_OWNER = re.compile(r"^mcp-setup-[a-z]+-(\d+\.\d+)-")


def make_scratch_dir(root: Path | None, kind: str) -> Path:
    """A fresh scratch dir under ``root`` whose name carries its owner (pid and start time)."""
    owner = Owner.current()
    tag = f"{owner.tag}-" if owner is not None else ""
    return Path(tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{kind}-{tag}", dir=root))


def sweep_scratch(root: Path) -> list[Path]:
    """Remove the scratch dirs under ``root`` whose owner is dead (or unknown); keep live ones."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for path in sorted(root.iterdir()):
        if not path.name.startswith(_SCRATCH_PREFIX):
            continue
        m = _SCRATCH_OWNER.match(path.name)
        owner = Owner.parse(m.group(1)) if m else None
        if owner is not None and owner.alive():
            continue
        if path.is_dir() and not path.is_symlink():
            for left in _also_remove(path):
                shutil.rmtree(left, ignore_errors=True)
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    if removed:
        logger.info("removed %d scratch dir(s) left by a process that is gone", len(removed))
    return removed


def _also_remove(scratch: Path) -> list[Path]:
    try:
        lines = (scratch / ALSO_REMOVE).read_text().splitlines()
    except OSError:
        return []
    return [Path(line) for line in lines if line.strip() and Path(line).is_absolute()]
