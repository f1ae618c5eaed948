"""Build an MCPB bundle of the stdio stub, its registry `server.json`, and a direct argv.

Bundle layout (`<name>-<version>.mcpb`, a deterministic zip, so equal inputs give an
equal sha256):

    manifest.json      MCPB manifest (server.type "python", mcp_config below)
    server/server.py   the stdlib-only stub (tests/stub_server/server.py)

The user_config key is the env var name itself (`key_name`, e.g. STUB_API_KEY), so
`mcp_config.env[key_name] == "${user_config.<key_name>}"`: a secret handed in for the
registry's environment variable `key_name` fills the user_config entry of the same name.
Only sha256(expected_value) goes into the bundle, never the value.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import zipfile
from pathlib import Path
from typing import Any

SERVER_PY = Path(__file__).with_name("server.py")
SERVER_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def sha256_hex(value: str | bytes) -> str:
    """SHA-256 hex digest of a str (UTF-8) or bytes."""
    data = value.encode("utf-8") if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()


def stub_manifest(
    *,
    key_name: str = "STUB_API_KEY",
    expected_value: str | None,
    mode: str = "",
    name: str = "stub",
    version: str = "1.0.0",
    user_config_key: str | None = None,
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
    second_key: str | None = None,
) -> dict[str, Any]:
    """The MCPB `manifest.json` for the stub (expected value only as its hash).

    ``user_config_key`` names the manifest's setting when it differs from the env var
    (``"env": {"STUB_API_KEY": "${user_config.api_key}"}``, as real bundles do).
    ``second_key``: a second secret setting (its own env var), whose hash ``key_hash`` also says.
    """
    uc = user_config_key or key_name
    env = {
        key_name: "${user_config.%s}" % uc,
        "STUB_REQUIRED_ENV": key_name,
        "STUB_MODE": mode,
        **(extra_env or {}),  # e.g. STUB_TOOLS_FILE (tool pinning tests)
    }
    if second_key is not None:
        env[second_key] = "${user_config.%s}" % second_key
        env["STUB_SECOND_ENV"] = second_key
    if expected_value is not None:
        env["STUB_EXPECTED_SHA256"] = sha256_hex(expected_value)
    return {
        "manifest_version": "0.3",
        "name": name,
        "display_name": f"{name} (mcp-setup stub)",
        "version": version,
        "description": "Stub MCP server for mcp-setup tests.",
        "author": {"name": "mcp-setup tests"},
        "server": {
            "type": "python",
            "entry_point": "server/server.py",
            "mcp_config": {
                "command": "python3",
                "args": ["${__dirname}/server/server.py", *(extra_args or [])],  # the stub ignores the extra ones
                "env": env,
            },
        },
        "tools": [
            {"name": "echo", "description": "Echo the given text back."},
            {"name": "whoami", "description": "Answer 'ok' when the server is configured."},
        ],
        "user_config": {
            name: {
                "type": "string",
                "title": f"{title}",
                "description": f"API key for the stub server ({title}).",
                "required": True,
                "sensitive": True,
            }
            for name, title in ((uc, key_name), *(((second_key, second_key),) if second_key else ()))
        },
    }


def _add(zf: zipfile.ZipFile, arcname: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16
    zf.writestr(info, data)


def build_stub_bundle(
    dest_dir: Path,
    *,
    key_name: str = "STUB_API_KEY",
    expected_value: str | None,
    mode: str = "",
    name: str = "stub",
    version: str = "1.0.0",
    user_config_key: str | None = None,
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
    server_py: Path = SERVER_PY,
    second_key: str | None = None,
) -> tuple[Path, str]:
    """Write `<dest_dir>/<name>-<version>.mcpb`; return (path, sha256 hex of the file).

    ``server_py`` is the server packed as ``server/server.py`` (tests/stub_server/hostile.py for
    the sandbox tests)."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    manifest = stub_manifest(
        key_name=key_name,
        expected_value=expected_value,
        mode=mode,
        name=name,
        version=version,
        user_config_key=user_config_key,
        extra_env=extra_env,
        extra_args=extra_args,
        second_key=second_key,
    )
    path = dest_dir / f"{name}-{version}.mcpb"
    tmp = path.with_suffix(".mcpb.tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        _add(zf, "manifest.json", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
        _add(zf, "server/server.py", Path(server_py).read_bytes(), mode=0o755)
    os.replace(tmp, path)
    return path, sha256_hex(path.read_bytes())


def stub_server_json(
    bundle_url: str,
    sha256: str,
    *,
    name: str = "io.github.mcp-setup/stub",
    key_name: str = "STUB_API_KEY",
    version: str = "1.0.0",
    second_key: str | None = None,
) -> dict[str, Any]:
    """An official-registry `server.json` (2025-12-11 shape) listing the bundle as an mcpb package
    (``second_key``: a second secret variable)."""
    return {
        "$schema": SERVER_SCHEMA,
        "name": name,
        "description": "Stub MCP server for mcp-setup tests (MCPB bundle).",
        "version": version,
        "packages": [
            {
                "registryType": "mcpb",
                "identifier": bundle_url,
                "version": version,
                "fileSha256": sha256,
                "transport": {"type": "stdio"},
                "environmentVariables": [
                    {
                        "name": name,
                        "description": f"API key for the stub server ({name}).",
                        "isRequired": True,
                        "isSecret": True,
                        "format": "string",
                    }
                    for name in (key_name, *((second_key,) if second_key else ()))
                ],
            }
        ],
    }


def stub_command(
    *,
    mode: str = "",
    key_name: str = "STUB_API_KEY",
    value: str | None = None,
    expected_value: str | None = None,
    protocol: str | None = None,
    pid_file: Path | str | None = None,
    require: bool = True,
    extra_env: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) to run the stdio stub directly with this interpreter.

    `env` holds only the stub's own variables (merge it over a minimal base yourself);
    `value` is what the server receives in `key_name`, `expected_value` what it wants.
    """
    argv = [sys.executable, str(SERVER_PY)]
    env: dict[str, str] = {"STUB_REQUIRED_ENV": key_name}
    if mode:
        env["STUB_MODE"] = mode
    if value is not None:
        env[key_name] = value
    if expected_value is not None:
        env["STUB_EXPECTED_SHA256"] = sha256_hex(expected_value)
    if protocol:
        env["STUB_PROTOCOL"] = protocol
    if pid_file is not None:
        env["STUB_PID_FILE"] = str(pid_file)
    if not require:
        env["STUB_REQUIRE"] = "0"
    if extra_env:
        env.update(extra_env)
    return argv, env


def stub_catalog(root: Path, expected: str | None, *, name: str = "io.github.mcp-setup/stub", **bundle: Any) -> Path:
    """``root/catalog`` listing, as ``stub.json``, one stub bundle built into ``root/dist`` that wants
    ``expected`` (``bundle``: more :func:`build_stub_bundle` arguments, e.g. ``mode``)."""
    path, sha = build_stub_bundle(root / "dist", expected_value=expected, **bundle)
    catalog = root / "catalog"
    catalog.mkdir(parents=True, exist_ok=True)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(path.resolve().as_uri(), sha, name=name)))
    return catalog


def zip_files(
    path: Path,
    files: dict[str, bytes | str],
    *,
    modes: dict[str, int] | None = None,
    symlinks: dict[str, str] | None = None,
) -> Path:
    """A hand-made archive at ``path``: regular ``files`` (mode 0o644 unless ``modes`` says) and
    ``symlinks`` (name -> target), for bundles a test wants broken or hostile."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = ((modes or {}).get(name, 0o644) | stat.S_IFREG) << 16
            zf.writestr(info, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o777 | stat.S_IFLNK) << 16
            zf.writestr(info, target)
    return path
