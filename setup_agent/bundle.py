"""MCPB bundles: download and verify, unpack safely, read ``manifest.json``, build the spec.

Flow: ``fetch_bundle`` (``https://``, or ``file://``; SHA-256 checked) → ``unpack_bundle``
into the server's install dir (no member may escape it) → ``read_manifest`` →
``spec_from_manifest(manifest, build_spec(package), home=...)``. The spec keeps
``${__dirname}`` for :func:`~setup_agent.launch.materialize` to fill at spawn time, and
``${user_config.KEY}`` becomes the key template ``${KEY}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import zipfile
from collections.abc import AsyncIterator, Collection
from contextlib import aclosing
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio
import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from registry_clients.models import RequiredKey

from .errors import BundleInvalid
from .launch import LaunchSpec, template_keys

__all__ = [
    "DEFAULT_MAX_BYTES", "DEFAULT_MAX_UNPACKED", "Manifest", "ManifestServer", "McpConfig", "UserConfigOption",
    "fetch_bundle", "file_sha256", "read_manifest", "required_keys_from_manifest", "spec_from_manifest",
    "unpack_bundle",
]

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
DEFAULT_MAX_UNPACKED = 1024 * 1024 * 1024
_CHUNK = 64 * 1024
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_SHA = re.compile(r"^[0-9a-f]{64}$")


# --- download -------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file (to pin a bundle whose registry entry gave none)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK):
        return
    raise BundleInvalid(f"Bundles are fetched over https:// or from file:// only, not from {url}.")


def _too_big(url: str, max_bytes: int) -> BundleInvalid:
    return BundleInvalid(f"The bundle from {url} is larger than the {max_bytes}-byte limit.")


async def _chunks(url: str, http: httpx.AsyncClient | None, max_bytes: int) -> AsyncIterator[bytes]:
    """The bundle's bytes, from a local file (read in a worker thread) or over HTTP."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise BundleInvalid(f"file:// bundle URLs must name a local path, not {url}.")
        src = Path(url2pathname(parts.path))
        if not src.is_file():
            raise BundleInvalid(f"No bundle file at {src}.")
        with open(src, "rb") as fh:
            while chunk := await anyio.to_thread.run_sync(fh.read, _CHUNK):
                yield chunk
        return
    _check_url(url)
    client = http or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=120.0))
    try:
        async with client.stream("GET", url, follow_redirects=True) as resp:
            _check_url(str(resp.url))
            if resp.status_code >= 400:
                raise BundleInvalid(f"Could not download the bundle from {url}: HTTP {resp.status_code}.")
            length = resp.headers.get("content-length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise _too_big(url, max_bytes)
            async for chunk in resp.aiter_bytes(_CHUNK):
                yield chunk
    except httpx.HTTPError as exc:
        raise BundleInvalid(f"Could not download the bundle from {url}: {type(exc).__name__}.") from exc
    finally:
        if http is None:
            await client.aclose()


async def fetch_bundle(
    url: str,
    expected_sha256: str | None,
    dest: Path,
    *,
    http: httpx.AsyncClient | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Path:
    """Download (or copy, for ``file://``) a bundle to ``dest/bundle.mcpb`` and verify it.

    ``https://`` anywhere, ``http://`` only on loopback, redirects followed. A SHA-256
    mismatch or a bundle over ``max_bytes`` raises :class:`BundleInvalid` and leaves no file
    behind. With ``expected_sha256=None`` nothing is verified: pin it with :func:`file_sha256`.
    """
    expected = expected_sha256.strip().lower() if expected_sha256 else None
    if expected is not None and not _SHA.match(expected):
        raise BundleInvalid(f"The published SHA-256 for {url} is not a 64-digit hex digest.")
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "bundle.mcpb"
    part = dest / "bundle.mcpb.part"
    digest, size = hashlib.sha256(), 0
    try:
        with open(part, "wb") as out:
            async with aclosing(_chunks(url, http, max_bytes)) as chunks:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > max_bytes:
                        raise _too_big(url, max_bytes)
                    digest.update(chunk)
                    out.write(chunk)
        got = digest.hexdigest()
        if expected is not None and got != expected:
            raise BundleInvalid(
                f"The bundle from {url} does not match its published SHA-256: expected {expected}, got {got}."
            )
        os.replace(part, target)
        return target
    except BaseException:
        part.unlink(missing_ok=True)
        raise


# --- unpack ---------------------------------------------------------------------------


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _escapes(name: str) -> BundleInvalid:
    return BundleInvalid(f"The bundle member '{name}' points outside the bundle; refusing to unpack it.")


def _member_path(name: str, root: Path) -> Path:
    """Where a zip member lands under ``root``, or BundleInvalid if it would escape."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise _escapes(name)
    target = root.joinpath(*[p for p in parts if p not in ("", ".")])
    if not _inside(target.resolve(), root):
        raise _escapes(name)
    return target


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, root: Path, budget: int) -> int:
    """Extract one member safely; return the bytes written."""
    dest = _member_path(info.filename, root)
    mode = info.external_attr >> 16
    if info.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not _inside(dest.parent.resolve(), root):
        raise _escapes(info.filename)
    if dest.is_symlink() or dest.is_file():
        dest.unlink()  # never write through an existing link
    if stat.S_ISLNK(mode):
        link = zf.read(info).decode("utf-8", "replace")
        lexical = Path(os.path.normpath(dest.parent / link))
        if os.path.isabs(link) or not _inside(lexical, root) or not _inside((dest.parent / link).resolve(), root):
            raise BundleInvalid(f"The bundle member '{info.filename}' is a symlink pointing outside the bundle.")
        os.symlink(link, dest)
        return 0
    written = 0
    with zf.open(info) as src, open(dest, "wb") as out:
        for chunk in iter(lambda: src.read(_CHUNK), b""):
            written += len(chunk)
            if written > budget:
                raise BundleInvalid("The bundle unpacks to more than the size limit; refusing it.")
            out.write(chunk)
    os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
    return written


def unpack_bundle(archive: Path, target_dir: Path, *, max_bytes: int = DEFAULT_MAX_UNPACKED) -> Path:
    """Extract ``archive`` into ``target_dir`` and return ``target_dir``.

    Refuses (BundleInvalid, naming the member) absolute paths, ``..`` and symlinks that
    point outside ``target_dir``; keeps executable bits (0o755) and drops every other mode
    bit. A ``binary`` server's entry point is made executable even if the zip lost its mode.
    On failure ``target_dir`` may hold a partial tree: the caller removes it.
    """
    target_dir.mkdir(parents=True, exist_ok=True)
    root = target_dir.resolve()
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleInvalid("The bundle is not a valid zip archive.") from exc
    budget = max_bytes
    with zf:
        for info in zf.infolist():
            try:
                budget -= _extract(zf, info, root, budget)
            except (OSError, zipfile.BadZipFile, EOFError) as exc:
                raise BundleInvalid(f"Could not unpack the bundle member '{info.filename}': {exc}.") from exc
    _make_entry_executable(root)
    return target_dir


def _make_entry_executable(root: Path) -> None:
    try:
        manifest = read_manifest(root)
    except BundleInvalid:
        return  # read_manifest reports it properly later
    if manifest.server.type == "binary" and manifest.server.entry_point:
        entry = (root / manifest.server.entry_point).resolve()
        if _inside(entry, root) and entry.is_file():
            os.chmod(entry, entry.stat().st_mode | 0o755)


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


def read_manifest(dir: Path) -> Manifest:
    """Parse ``dir/manifest.json``; a missing or invalid one raises BundleInvalid."""
    path = dir / "manifest.json"
    if not path.is_file():
        raise BundleInvalid("The bundle has no manifest.json at its top level.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleInvalid(f"The bundle's manifest.json is not valid JSON ({exc}).") from exc
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'manifest'}: {err['msg']}" for err in exc.errors()[:3]
        )
        raise BundleInvalid(f"The bundle's manifest.json is invalid: {problems}.") from exc


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
                raise BundleInvalid(f"The bundle's mcp_config uses ${{{name}}}, which its user_config does not declare.")
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
    update = {"command": cmd, "args": args, "env": env, "runner": runner, "transport": "stdio",
              "package_type": "mcpb", "version": base.version or manifest.version, "needs_install_dir": True}
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


def required_keys_from_manifest(
    manifest: Manifest, registry_keys: list[RequiredKey], *, home: Path | None = None
) -> list[RequiredKey]:
    """The bundle's ``user_config`` as keys, merged with the registry's keys by name.

    secret when ``sensitive`` (or the registry says secret; ``in_argv`` when a secret is put on
    the command line); required when the manifest says ``required: true`` and gives no
    default (MCPB's default for ``required`` is false); ``${HOME}``-style folders in defaults
    resolved from ``home``. Registry keys the manifest lacks are appended.
    """
    folders = _folders(home) if home is not None else None
    config = manifest.server.mcp_config
    in_args = " ".join(config.args + [a for o in config.platform_overrides.values() for a in o.args or []]
                       + [config.command]) if config else ""
    merged: dict[str, RequiredKey] = {}
    for name, opt in manifest.user_config.items():
        default = _default_text(opt.default, folders)
        merged[name] = RequiredKey(
            name=name, description=": ".join(t for t in (opt.title.strip(), opt.description.strip()) if t),
            secret=opt.sensitive, required=opt.required and default is None, default=default,
            choices=["true", "false"] if opt.type == "boolean" else None, kind="user_config",
            in_argv=opt.sensitive and "${user_config.%s}" % name in in_args,
        )
    for key in registry_keys:
        mine = merged.get(key.name)
        if mine is None:
            merged[key.name] = key.model_copy()
            continue
        mine.secret = mine.secret or key.secret
        mine.in_argv = mine.in_argv or key.in_argv
        if not mine.description:
            mine.description = key.description
    return list(merged.values())
