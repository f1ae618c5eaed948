"""A server started from what its runner installed, with no runner left running beside it.

``npx -y pkg@1`` keeps ``npm exec`` (a Node process of about 90 MB) and ``sh -c`` running beside
the server for as long as it runs; ``uvx pkg==1`` keeps ``uv``. Once the download phase
(``fetch.py``) has filled the runner's cache and noted where (:class:`DirectStarts`), a start
(``start.py``: the one start of a test, of the gateway and of ``mcp-setup run``) runs the
server's own program instead (:func:`direct_start`):

- npm: the ``node`` the runner would use (the one npx's ``#!/usr/bin/env node`` finds on the
  start's PATH: the system's when new enough, else the bundled one, ``runners.py``) on the
  package's bin file inside npx's ``_npx/<hash>/node_modules``, picked as npx picks it (the only
  bin, else the one named like the package without its scope), its ``.bin`` link resolved;
- PyPI: ``<prefix>/bin/<command>`` of the environment uv made for ``uvx`` (the download phase
  prints its ``sys.prefix``), the command uvx would run (``--from``'s, else the package's name).

The arguments after the package and the working dir are the runner's; so is the environment,
with the runner's own additions that a server may use: PATH with the package's ``.bin`` (npm) or
the environment's ``bin`` (uv) first, as the runner gives it. What ``npm exec`` adds for a
package *script* (``npm_lifecycle_*``, ``npm_package_json``, ``npm_execpath``, ``npm_command``,
``INIT_CWD``, ``NODE``, ``COLOR``, ``EDITOR`` and its whole config as ``npm_config_*``) is left
out: a server is no script of a project, those name an npm that no longer runs and a
``package.json`` that does not exist. The ``npm_config_*`` the sandbox sets (the server's private
cache, the registry the person configured, ``prefer-offline``) stay: an ``npx`` the server starts
itself finds its registry and cache as before. uv's ``UV`` (the path of the uv that ran it) is
left out too: no uv ran it.

The sandbox is the same: it shows the runner's cache views (``sandbox.py``, read-only), which hold
what the direct start runs; a path they would not show is not started directly.

Where it cannot be resolved, the runner starts as before, and the log says why (the reason is
in :func:`direct_start`'s checks): no note (never fetched here, or fetched before this existed),
the cache entry or environment gone (pruned, or removed since), an option of the runner's we do
not read, a spec that is no registry name (a tarball, a git URL, an alias), a bin that is not a
Node script (a shell script, a binary, a ``#!`` with options), a package whose tree has its own
``node``, or a command uv's environment does not have.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .fetch_plans import fetch_plan, npx_entry_name
from .runners import runner_name
from .spec import LaunchSpec

__all__ = ["DirectStart", "DirectStarts", "direct_start"]

logger = logging.getLogger(__name__)

#: Does the sandbox show ``path`` to a start of runner ``name`` with these arguments (its cache views)?
Shows = Callable[[str, Sequence[str], Path], bool]


@dataclass(frozen=True)
class DirectStart:
    """What runs instead of the runner: ``command`` (absolute), its ``args`` and ``env``."""

    command: str
    args: list[str]
    env: dict[str, str]

    def __repr__(self) -> str:
        return f"DirectStart(command={self.command!r}, args=<{len(self.args)} items>, env=<keys {sorted(self.env)}>)"


class DirectStarts:
    """Where each download noted what its runner installed (an npx entry, a uv environment), one
    small file per package in ``folder`` (in the data dir: never shown to a server, nor written
    by a download, which may write only its scratch dir and the caches)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def _digest(key: Sequence[str]) -> str:
        return hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()

    def _file(self, key: Sequence[str]) -> Path:
        return self.folder / (self._digest(key)[:32] + ".json")

    def note(self, key: Sequence[str], path: Path) -> None:
        """Remember that the download of ``key`` (a fetch plan's) installed into ``path``."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        file = self._file(key)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        # the key's digest, not its text: a command line (a registry's URL) is not written out again
        tmp.write_text(json.dumps({"key": self._digest(key), "path": str(path)}))
        os.replace(tmp, file)

    def noted(self, key: Sequence[str]) -> Path | None:
        """Where the download of ``key`` installed, as it noted (None: no note)."""
        try:
            doc = json.loads(self._file(key).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("key") != self._digest(key) or not isinstance(doc.get("path"), str):
            return None
        return Path(doc["path"])


def direct_start(
    notes: DirectStarts | None,
    spec: LaunchSpec,
    runner: str,
    args: Sequence[str],
    env: Mapping[str, str],
    shows: Shows | None,
) -> DirectStart | None:
    """The start of ``spec`` (filled as ``args``, run by ``runner`` in ``env``) without its runner,
    or None where it cannot be done (logged with why): module docstring."""
    name = runner_name(runner)
    if name not in ("npx", "uvx") or notes is None:
        return None
    why: str
    plan = fetch_plan(spec)
    noted = notes.noted(plan.key) if plan is not None else None
    if plan is None or noted is None:
        why = "no download of it was noted here"
    elif shows is not None and not shows(name, list(args), noted):
        why = "the sandbox would not show what it installed"
    else:
        found = (_npm if name == "npx" else _uv)(noted, list(args), dict(env))
        if isinstance(found, DirectStart):
            return found
        why = found
    logger.info("a %s server starts through its runner: %s", name, why)
    return None


# --- npm --------------------------------------------------------------------------------------

#: npx options a direct start knows (all others: the runner starts it).
_NPX_OPTIONS = ("-y", "--yes")  # and --registry=URL
#: A registry package spec: ``name``, ``@scope/name``, with an optional ``@version`` or range.
_NPM_SPEC = re.compile(r"^(?P<name>(?:@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*)(?:@(?P<version>[^/:]+))?$", re.IGNORECASE)
#: A Node script's first line as npx runs it through ``sh``: node, with no option.
_NODE_SHEBANG = re.compile(rb"^#!\s*(?:/usr/bin/env\s+node|/\S*/node)\s*$")


def _npm(entry: Path, args: list[str], env: dict[str, str]) -> DirectStart | str:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] not in _NPX_OPTIONS and not args[i].startswith("--registry="):
            return "an option of npx's it does not read"  # (never named: a value may be a secret)
        i += 1
    if i >= len(args):
        return "no package on its command line"
    target, rest = args[i], args[i + 1 :]
    m = _NPM_SPEC.match(target)
    if m is None:
        return "its package is not a registry name (a tarball, a git URL, an alias or a path)"
    if entry.name != npx_entry_name(target):
        return "the noted folder is not npx's for this package"
    modules = entry / "node_modules"
    package = modules / m.group("name")
    try:
        manifest = json.loads((package / "package.json").read_text())
    except (OSError, ValueError):
        return "npx's cache entry is gone or unreadable (pruned, or removed since)"
    if not isinstance(manifest, dict) or manifest.get("name") != m.group("name"):
        return "npx's cache entry holds another package"
    bin_name = _npx_bin(manifest)
    if bin_name is None:
        return "npx could not tell which of its commands to run"
    if os.path.lexists(modules / ".bin" / "node"):
        return "its packages bring a node of their own"
    script = Path(os.path.realpath(modules / ".bin" / bin_name))
    if not script.is_file() or not _within(script, package):
        return "its command's link in node_modules/.bin is gone"
    try:
        with open(script, "rb") as f:
            first = f.readline(256).rstrip(b"\r\n")
    except OSError:
        return "its command cannot be read"
    if not _NODE_SHEBANG.match(first):
        return "its command is not a Node script (a shell script, a binary, or node options in its #! line)"
    node = shutil.which("node", path=env.get("PATH", ""))  # what its "#!/usr/bin/env node" finds, as under npx
    if node is None:
        return "no node on the start's PATH"
    path = os.pathsep.join(p for p in (str(modules / ".bin"), env.get("PATH", "")) if p)
    return DirectStart(os.path.abspath(node), [str(script), *rest], {**env, "PATH": path})


def _npx_bin(manifest: dict[str, object]) -> str | None:
    """The command npx runs of a package (libnpmexec's ``getBinFromManifest``): the only one (or
    the only file several names point to), else the one named like the package without its scope."""
    raw = manifest.get("bin")
    unscoped = str(manifest.get("name", "")).rsplit("/", 1)[-1]
    bins = {unscoped: raw} if isinstance(raw, str) else raw
    if not isinstance(bins, dict) or not bins:
        return None
    if len({posixpath.normpath(str(v)) for v in bins.values()}) == 1:  # as npm normalizes a bin's path
        return str(next(iter(bins)))
    return unscoped if unscoped in bins else None


# --- PyPI -------------------------------------------------------------------------------------

#: uvx options a direct start knows, with a value (``--opt value`` or ``--opt=value``), and flags.
_UVX_VALUED = (
    *("--from", "--default-index", "--index", "--index-url", "-i", "--extra-index-url"),
    *("--python", "-p", "--with", "-w"),
)
_UVX_FLAGS = ("--native-tls", "--system-certs")
_PYPI_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def _uv(prefix: Path, args: list[str], env: dict[str, str]) -> DirectStart | str:
    source: str | None = None
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, value = args[i].partition("=")
        if args[i] in _UVX_FLAGS:
            i += 1
            continue
        if name not in _UVX_VALUED:
            return "an option of uvx's it does not read"
        if not eq:
            if i + 1 >= len(args):
                return "an option of uvx without its value"
            value = args[i + 1]
            i += 1
        if name == "--from":
            source = value
        i += 1
    if i >= len(args):
        return "no command on its command line"
    first, rest = args[i], args[i + 1 :]
    command = first if source is not None else (m.group(0) if (m := _PYPI_NAME.match(first)) else "")
    if not command or "/" in command or not prefix.parent.name.startswith("archive-v"):
        return "uv's environment or its command is not one it can name"
    program = prefix / "bin" / command
    if not (program.is_file() and os.access(program, os.X_OK)) or not (prefix / "pyvenv.cfg").is_file():
        return "uv's environment is gone (pruned, or removed since), or has no such command"
    path = os.pathsep.join(p for p in (str(prefix / "bin"), env.get("PATH", "")) if p)
    return DirectStart(str(program), rest, {**env, "PATH": path})


def _within(inner: Path, outer: Path) -> bool:
    try:
        inner.relative_to(os.path.realpath(outer))
    except ValueError:
        return False
    return True
