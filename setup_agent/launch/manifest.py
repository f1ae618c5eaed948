"""MCPB ``manifest.json``: the model, and what it means for launching and for settings.

``read_manifest`` parses it; ``spec_from_manifest(manifest, build_spec(package), home=...)``
completes the launch spec (``${__dirname}`` stays a template for
:func:`~setup_agent.launch.spec.materialize`, ``${user_config.KEY}`` becomes ``${KEY}``);
``required_keys_from_manifest`` turns ``user_config`` into settings the user must give.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from registry_clients.models import RequiredKey
from setup_agent.errors import BundleInvalid

from .spec import LaunchSpec, template_keys

__all__ = [
    "Manifest",
    "ManifestServer",
    "McpConfig",
    "McpConfigOverride",
    "UserConfigOption",
    "ARGV_ENV_PREFIX",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_DEPTH",
    "argv_secret_keys",
    "move_argv_secrets",
    "parse_manifest",
    "read_manifest",
    "required_keys_from_manifest",
    "spec_from_manifest",
    "user_config_aliases",
]


# --- manifest -------------------------------------------------------------------------


class _M(BaseModel):
    model_config = ConfigDict(extra="ignore")


class McpConfigOverride(_M):
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None


class McpConfig(_M):
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    platform_overrides: dict[str, McpConfigOverride] = Field(default_factory=dict)


class ManifestServer(_M):
    type: Literal["node", "python", "binary", "uv"]
    entry_point: str = ""
    mcp_config: McpConfig | None = None


class UserConfigOption(_M):
    type: str = "string"
    title: str = ""
    description: str = ""
    required: bool = False  # MCPB spec default
    sensitive: bool = False
    default: Any = None
    multiple: bool = False


class Manifest(_M):
    manifest_version: str | None = None
    name: str
    version: str
    display_name: str | None = None
    description: str = ""
    server: ManifestServer
    user_config: dict[str, UserConfigOption] = Field(default_factory=dict)


#: A manifest is a small file: anything larger, or nested deeper, is refused before parsing.
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_MANIFEST_DEPTH = 64
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON text (strings skipped), without recursion."""
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in ("[", "{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_MANIFEST_DEPTH:
                    break
        elif tok in ("]", "}"):
            depth -= 1
    return deepest


def parse_manifest(raw: bytes) -> Manifest:
    """Parse the bytes of a ``manifest.json``; too large, too deep or invalid raises BundleInvalid."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise BundleInvalid(f"The bundle's manifest.json is larger than the {MAX_MANIFEST_BYTES}-byte limit.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleInvalid("The bundle's manifest.json is not UTF-8 text.") from exc
    if _depth(text) > MAX_MANIFEST_DEPTH:
        raise BundleInvalid(f"The bundle's manifest.json is nested deeper than {MAX_MANIFEST_DEPTH} levels.")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleInvalid(f"The bundle's manifest.json is not valid JSON ({exc}).") from exc
    except RecursionError as exc:  # belt and braces: _depth already refused deep nesting
        raise BundleInvalid("The bundle's manifest.json is nested too deeply.") from exc
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'manifest'}: {err['msg']}" for err in exc.errors()[:3]
        )
        raise BundleInvalid(f"The bundle's manifest.json is invalid: {problems}.") from exc


def read_manifest(dir: Path) -> Manifest:
    """Parse ``dir/manifest.json``; a missing, oversized, too deep or invalid one raises BundleInvalid."""
    path = dir / "manifest.json"
    if not path.is_file():
        raise BundleInvalid("The bundle has no manifest.json at its top level.")
    with open(path, "rb") as fh:
        raw = fh.read(MAX_MANIFEST_BYTES + 1)
    return parse_manifest(raw)


# --- spec -----------------------------------------------------------------------------

_MCPB_VAR = re.compile(r"\$\{([^}]*)\}")
_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def _folders(home: Path) -> dict[str, str]:
    dirs = {"HOME": home, "DESKTOP": home / "Desktop", "DOCUMENTS": home / "Documents", "DOWNLOADS": home / "Downloads"}
    return {**{k: str(v) for k, v in dirs.items()}, "pathSeparator": os.sep, "/": os.sep}


def _convert(text: str, manifest: Manifest, folders: dict[str, str]) -> str:
    """MCPB placeholders → LaunchSpec templates; folders resolved now; ``$`` escaped."""
    out: list[str] = []
    pos = 0
    for m in _MCPB_VAR.finditer(text):
        out.append(text[pos : m.start()].replace("$", "$$"))
        name = m.group(1)
        if name == "__dirname":
            out.append("${__dirname}")
        elif name.startswith("user_config."):
            key = name.removeprefix("user_config.")
            if key not in manifest.user_config or not _KEY_NAME.match(key):
                raise BundleInvalid(
                    f"The bundle's mcp_config uses ${{{name}}}, which its user_config does not declare."
                )
            out.append("${" + key + "}")
        elif name in folders:
            out.append(folders[name].replace("$", "$$"))
        else:
            out.append(m.group(0).replace("$", "$$"))  # unknown: keep it literal
        pos = m.end()
    out.append(text[pos:].replace("$", "$$"))
    return "".join(out)


def _default_config(server: ManifestServer) -> McpConfig:
    entry = f"${{__dirname}}/{server.entry_point}"
    if server.type == "node":
        return McpConfig(command="node", args=[entry])
    if server.type == "python":
        return McpConfig(command="python3", args=[entry])
    if server.type == "uv":
        return McpConfig(command="uv", args=["run", "--directory", "${__dirname}", server.entry_point])
    return McpConfig(command=entry)


def _drop_omitted(args: list[str], omit: Collection[str]) -> list[str]:
    """Leave out args naming an omitted key, and a bare ``--flag`` just before such a value."""
    out: list[str] = []
    for arg in args:
        if omit and not template_keys(arg).isdisjoint(omit):
            if out and out[-1].startswith("-") and not template_keys(out[-1]) and "=" not in out[-1]:
                out.pop()
            continue
        out.append(arg)
    return out


def spec_from_manifest(
    manifest: Manifest,
    base: LaunchSpec,
    *,
    home: Path | None = None,
    platform: str = sys.platform,
    omit: Collection[str] = (),
) -> LaunchSpec:
    """Complete an mcpb ``base`` spec (from ``build_spec``) with the manifest's command.

    ``${__dirname}`` stays a template; ``${user_config.KEY}`` → ``${KEY}``; ``${HOME}``,
    ``${DESKTOP}``, ``${DOCUMENTS}``, ``${DOWNLOADS}`` (from ``home``), ``${pathSeparator}``
    and ``${/}`` are resolved now. ``platform_overrides[platform]`` applies. A command that
    is a path inside the bundle gets ``${__dirname}/`` in front and no runner; otherwise the
    runner is the command. The server should be spawned with cwd = the install dir.
    ``omit``: optional keys left unset, whose env vars and args are left out. Pass ``home``
    from Settings; ``None`` falls back to ``Path.home()``.
    """
    server = manifest.server
    config = server.mcp_config or _default_config(server)
    override = config.platform_overrides.get(platform)
    command = (override.command if override and override.command else None) or config.command
    raw_args = override.args if override and override.args is not None else config.args
    raw_env = {**config.env, **(override.env or {})} if override else dict(config.env)

    folders = _folders(home if home is not None else Path.home())
    cmd = _convert(command, manifest, folders)
    runner: str | None = cmd
    if not cmd.startswith("${") and not os.path.isabs(cmd) and ("/" in cmd or "\\" in cmd):
        cmd = "${__dirname}/" + cmd.replace("\\", "/")
    if cmd.startswith("${__dirname}") or os.path.isabs(cmd):
        runner = None
        if server.type == "binary" and platform == "win32" and not cmd.lower().endswith(".exe"):
            cmd += ".exe"
    args = _drop_omitted([_convert(a, manifest, folders) for a in raw_args], omit)
    env = dict(base.env)
    for name, value in raw_env.items():
        env[name] = _convert(value, manifest, folders)
    env = {k: v for k, v in env.items() if not (omit and not template_keys(v).isdisjoint(omit))}
    update = {
        "command": cmd,
        "args": args,
        "env": env,
        "runner": runner,
        "transport": "stdio",
        "package_type": "mcpb",
        "version": base.version or manifest.version,
        "needs_install_dir": True,
    }
    return base.model_copy(update=update)


def _default_text(value: Any, folders: dict[str, str] | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        value = value[0] if value else None  # one value per key: `multiple` is not expanded
        if value is None:
            return None
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if folders:
        text = _MCPB_VAR.sub(lambda m: folders.get(m.group(1), m.group(0)), text)
    return text


def user_config_aliases(manifest: Manifest, *, platform: str = sys.platform) -> dict[str, str]:
    """``{ENV_VAR: user_config_key}`` for each env var the manifest fills from exactly one
    ``${user_config.KEY}`` (``"env": {"STUB_API_KEY": "${user_config.api_key}"}``)."""
    config = manifest.server.mcp_config
    if config is None:
        return {}
    override = config.platform_overrides.get(platform)
    env = {**config.env, **((override.env or {}) if override else {})}
    out: dict[str, str] = {}
    for name, value in env.items():
        m = re.fullmatch(r"\$\{user_config\.([^}]*)\}", value.strip())
        if m and m.group(1) in manifest.user_config and _KEY_NAME.match(m.group(1)):
            out[name] = m.group(1)
    return out


def required_keys_from_manifest(
    manifest: Manifest, registry_keys: list[RequiredKey], *, home: Path | None = None
) -> list[RequiredKey]:
    """The bundle's ``user_config`` as keys, merged with the registry's keys by name.

    secret when ``sensitive`` (or the registry says secret; ``in_argv`` when a secret is put on
    the command line); required when the manifest says ``required: true`` and gives no
    default (MCPB's default for ``required`` is false); ``${HOME}``-style folders in defaults
    resolved from ``home``. Registry keys the manifest lacks are appended.

    One value, one key: when the registry lists an env var (``STUB_API_KEY``) that the
    manifest fills from a ``user_config`` key (``api_key``), the two are one key under the
    registry's name with the manifest's name in ``aliases``; a value given under either
    name satisfies both (the service fills both templates).
    """
    folders = _folders(home) if home is not None else None
    config = manifest.server.mcp_config
    in_args = (
        " ".join(config.args + [a for o in config.platform_overrides.values() for a in o.args or []] + [config.command])
        if config
        else ""
    )
    registry_names = {k.name for k in registry_keys}
    aliases = {env: uc for env, uc in user_config_aliases(manifest).items() if env in registry_names}
    merged: dict[str, RequiredKey] = {}
    for name, opt in manifest.user_config.items():
        default = _default_text(opt.default, folders)
        merged[name] = RequiredKey(
            name=name,
            description=": ".join(t for t in (opt.title.strip(), opt.description.strip()) if t),
            secret=opt.sensitive,
            required=opt.required and default is None,
            default=default,
            choices=["true", "false"] if opt.type == "boolean" else None,
            kind="user_config",
            format=opt.type if opt.type in ("directory", "file") else None,  # a path: granted to the sandbox
            in_argv=opt.sensitive and "${user_config.%s}" % name in in_args,
        )
    for key in registry_keys:
        uc = aliases.get(key.name)
        mine = merged.pop(uc) if uc is not None else merged.get(key.name)
        if mine is None:
            merged[key.name] = key.model_copy()
            continue
        if uc is not None:
            # the registry's name leads (the agent saw it in mcp_setup_get); the manifest's is an alias
            mine = mine.model_copy(update={"name": key.name, "aliases": [uc], "kind": key.kind})
            mine.required = mine.required or (key.required and key.default is None)
            merged[key.name] = mine
        mine.secret = mine.secret or key.secret
        mine.in_argv = mine.in_argv or key.in_argv
        if not mine.description:
            mine.description = key.description
    return list(merged.values())


# --- secrets on the command line --------------------------------------------------------------
#
# The rule: a secret must not be in a server's argv, where every local user sees it (``ps``,
# ``/proc/<pid>/cmdline``). Where the runner allows, the launch moves it out; where it cannot,
# the prepared launch lists the keys (``argv_secret_keys``) and the install is refused with
# ``argv_secret`` unless the user consented to that warning.
#
# Moved: an MCPB ``python``/``python3`` server started as ``python3 <script> ARGS``. It runs as
# ``python3 -c <bootstrap> <script> ARGS`` where each argument holding a secret is replaced by
# ``*`` and travels in ``MCP_SETUP_ARGV_<i>`` (the environment, readable by its owner only);
# the bootstrap puts it back into ``sys.argv`` in memory, drops the variable and runs the
# script as ``__main__``. (``docker`` already gets secrets as ``-e NAME``, see packages.py.)
# Not moved: every other runner (node, uv, binaries, npx, uvx …).

ARGV_ENV_PREFIX = "MCP_SETUP_ARGV_"
_PYTHON_BOOTSTRAP = (
    "import os,runpy,sys\n"
    "a=sys.argv[1:]\n"
    "for i in range(len(a)):\n"
    " a[i]=os.environ.pop('" + ARGV_ENV_PREFIX + "%d'%i,a[i])\n"
    "sys.argv=a\n"
    "sys.path[0]=os.path.dirname(os.path.abspath(a[0]))\n"
    "runpy.run_path(a[0],run_name='__main__')\n"
)
_PYTHONS = {"python", "python3"}


def argv_secret_keys(spec: LaunchSpec, secret_keys: Collection[str]) -> list[str]:
    """The secret keys the spec would put on the command line (its command or args)."""
    found: set[str] = set()
    for text in [spec.command or "", *spec.args]:
        found |= template_keys(text)
    return sorted(found & set(secret_keys))


def move_argv_secrets(spec: LaunchSpec, secret_keys: Collection[str]) -> LaunchSpec:
    """The spec with its argv secrets moved into the environment, where the runner allows
    (the rule above); otherwise the spec unchanged."""
    secret = set(secret_keys)
    if not argv_secret_keys(spec, secret):
        return spec
    if spec.package_type != "mcpb" or (spec.command or "") not in _PYTHONS or not spec.args:
        return spec
    script, *rest = spec.args
    if script.startswith("-") or template_keys(script) & secret:
        return spec  # an interpreter option or a secret script path: leave it to the user's consent
    args, env = ["-c", _PYTHON_BOOTSTRAP, script], dict(spec.env)
    for i, arg in enumerate(rest, start=1):
        if template_keys(arg) & secret:
            env[f"{ARGV_ENV_PREFIX}{i}"] = arg
            arg = "*"
        args.append(arg)
    return spec.model_copy(update={"args": args, "env": env})
