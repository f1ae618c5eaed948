"""npm's settings as npm reads them for a download: what its registries (``registries.py``) and
their logins (``registry_credentials.py``) are decided from.

npm takes a setting from, highest first: the command line (``--key=value``), ``npm_config_<key>``
variables (any case), the project's npmrc (none here: a download runs in a private dir holding a
bare ``package.json``), the user's (``userconfig``: ``npm_config_userconfig``, else
``~/.npmrc``), the global one (``globalconfig``, else ``<prefix>/etc/npmrc``, the prefix being
``prefix``'s setting, else ``$PREFIX``, else the folder above the bin dir of the ``node`` that
runs npm) and npm's builtin one (``npmrc`` in npm's own folder, where a distribution may set
``globalconfig``). A file's ``${VAR}`` references are read from the host's environment now, and a
line naming a variable that is not set is left out, as npm refuses it.

The global and builtin files sit in the system's folders, which the sandbox shows read-only: npm
inside it reads them itself (their ``cafile=`` is what it needs behind a TLS-inspecting proxy), so
what they set for a registry must be known here too, or its host would be no destination of the
download. A login written in them is shown to a sandboxed server too, with the rest of the
system's folders (most often readable by every user of the computer anyway): ``~/.npmrc``, hidden
from servers, is where one belongs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NpmConfig", "npm_config"]

#: npm's ``${VAR}`` (``${VAR?}``: empty when unset) in a config line.
_ENV_REF = re.compile(r"(?<!\\)\$\{([^${}?]+)(\?)?\}")
_PREFIX = "npm_config_"


@dataclass(frozen=True)
class NpmConfig:
    """npm's settings for one run: ``cli`` and ``env`` (by key), and each config file's lines
    (``(key, value)``, ``${VAR}`` filled), the lowest file first."""

    cli: Mapping[str, str]
    env: Mapping[str, str]
    files: tuple[tuple[Path, tuple[tuple[str, str], ...]], ...]

    def get(self, key: str) -> str | None:
        """``key``'s value as npm would take it (module docstring), None when nothing sets it."""
        if key in self.cli:
            return self.cli[key]
        if key in self.env:
            return self.env[key]
        for _path, lines in reversed(self.files):
            for written, value in reversed(lines):
                if written == key:
                    return value
        return None

    def file_settings(self) -> dict[str, str]:
        """Every key the files set, with the value npm takes (a later, higher file wins)."""
        out: dict[str, str] = {}
        for _path, lines in self.files:
            out.update(lines)
        return out


def npm_config(runner: str, args: Sequence[str], host_env: Mapping[str, str]) -> NpmConfig:
    """npm's settings for ``runner`` (npm or npx, as found) run with ``args``, from the host's
    files and ``host_env`` now."""
    if os.sep not in runner:  # a name: the one on the host's PATH
        runner = shutil.which(runner, path=host_env.get("PATH", "")) or runner
    cli = _cli(args)
    # npm's reading of a variable's name: ``npm_config_foo_bar`` is ``foo-bar`` (a leading ``_`` kept)
    env = {
        re.sub(r"(?!^)_", "-", k[len(_PREFIX) :]).lower(): v
        for k, v in host_env.items()
        if k.lower().startswith(_PREFIX) and v
    }
    builtin = _lines(_builtin_npmrc(runner), host_env)
    user_path = cli.get("userconfig") or env.get("userconfig")
    home = host_env.get("HOME")
    user_file = Path(user_path).expanduser() if user_path else (Path(home) / ".npmrc" if home else None)
    user = _lines(user_file, host_env)
    partial = NpmConfig(cli, env, tuple(f for f in (builtin, user) if f is not None))
    global_file = _global_npmrc(partial, runner, host_env)
    files = tuple(f for f in (builtin, _lines(global_file, host_env), user) if f is not None)
    return NpmConfig(cli, env, files)


def _cli(args: Sequence[str]) -> dict[str, str]:
    """The command line's ``--key=value`` settings: npm's, up to the package (``npx``'s first
    argument that is no option; ``npm exec``'s command), after which the arguments are the server's."""
    out: dict[str, str] = {}
    for i, arg in enumerate(args):
        if arg == "--" or (not arg.startswith("-") and not (i == 0 and arg in ("exec", "x"))):
            break
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            out[key] = value
    return out


def _builtin_npmrc(runner: str) -> Path | None:
    """``npmrc`` in npm's own folder: the runner is a link to ``<npm>/bin/npm-cli.js`` (or npx's)."""
    real = Path(os.path.realpath(runner))
    return real.parent.parent / "npmrc" if real.parent.name == "bin" and real.suffix == ".js" else None


def _global_npmrc(config: NpmConfig, runner: str, host_env: Mapping[str, str]) -> Path | None:
    named = config.get("globalconfig")
    if named:
        return Path(named).expanduser()
    prefix = config.get("prefix") or host_env.get("PREFIX")
    if not prefix:
        # the node that runs npm: beside the runner (a bundled one), else on PATH
        beside = os.path.dirname(os.path.abspath(runner))
        node = shutil.which("node", path=os.pathsep.join([beside, host_env.get("PATH", "")]))
        if node is None:
            return None
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(node)))
    return Path(prefix).expanduser() / "etc" / "npmrc"


def _lines(path: Path | None, host_env: Mapping[str, str]) -> tuple[Path, tuple[tuple[str, str], ...]] | None:
    """The settings of npmrc ``path`` (None: no such file), as npm's ini reader takes them."""
    if path is None:
        return None
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        written, eq, raw = line.strip().partition("=")
        if not eq or written.startswith((";", "#", "[")):
            continue
        key = substituted(written.strip(), host_env)
        value = substituted(ini_value(raw), host_env)
        if key and value is not None:
            out.append((key, value))
    return path, tuple(out)


def ini_value(raw: str) -> str:
    """A value as npm's ini reader takes it: a quoted one unquoted, else up to a comment."""
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        with contextlib.suppress(ValueError):
            loaded = json.loads(text)
            if isinstance(loaded, str):
                return loaded
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1]
    out, escaped = [], False
    for ch in text:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ";#":
            break
        else:
            out.append(ch)
    return "".join(out).strip()


def substituted(text: str, host_env: Mapping[str, str]) -> str | None:
    """``text`` with npm's ``${VAR}`` references read from the host's environment now; None
    when one names a variable that is not set (npm would refuse the line)."""
    missing = False

    def value(m: re.Match[str]) -> str:
        nonlocal missing
        found = host_env.get(m.group(1))
        if found is None and not m.group(2):
            missing = True
        return found or ""

    out = _ENV_REF.sub(value, text)
    return None if missing else out
