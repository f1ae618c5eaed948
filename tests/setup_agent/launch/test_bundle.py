"""MCPB bundles: fetch + verify, safe unpack, manifest, spec and keys (setup_agent.launch.bundle)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from registry_clients.models import PackageOption, RequiredKey
from setup_agent.errors import BundleInvalid
from setup_agent.launch.bundle import fetch_bundle, file_sha256, unpack_bundle
from setup_agent.launch.manifest import read_manifest, required_keys_from_manifest, spec_from_manifest
from setup_agent.launch.packages import INSTALL_HINTS, build_spec, runner_availability
from setup_agent.launch.spec import fill
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import zip_files

CANARY = "canary-51d0-SECRET-value"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _manifest(**server: Any) -> dict[str, Any]:
    return {
        "manifest_version": "0.3",
        "name": "demo",
        "version": "1.2.3",
        "description": "A demo bundle",
        "author": {"name": "Tester"},
        "server": {"type": "node", "entry_point": "server/index.js", **server},
    }


def _bundle(tmp_path: Path, manifest: dict[str, Any], **files: bytes | str) -> Path:
    return zip_files(tmp_path / "demo.mcpb", {"manifest.json": json.dumps(manifest), **files})


def _mcpb_base(url: str, sha: str | None = None, env: dict[str, str] | None = None):
    return build_spec(PackageOption(id="mcpb", type="mcpb", identifier=url, file_sha256=sha, env=env or {}))


# --- fetch ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_fetch_bundle_from_a_file_url_verifies_its_sha256(tmp_path):
    archive = _bundle(tmp_path, _manifest())
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    got = await fetch_bundle(archive.as_uri(), sha.upper(), tmp_path / "dl", allow_file=True)
    assert got == tmp_path / "dl" / "bundle.mcpb"
    assert got.read_bytes() == archive.read_bytes() and file_sha256(got) == sha


@pytest.mark.anyio
async def test_fetch_bundle_refuses_a_sha256_mismatch_and_leaves_no_file(tmp_path):
    archive = _bundle(tmp_path, _manifest())
    actual = hashlib.sha256(archive.read_bytes()).hexdigest()
    wrong = "0" * 64
    with pytest.raises(BundleInvalid) as err:
        await fetch_bundle(archive.as_uri(), wrong, tmp_path / "dl", allow_file=True)
    assert f"expected {wrong}, got {actual}" in err.value.message
    assert list((tmp_path / "dl").iterdir()) == []


@pytest.mark.anyio
async def test_fetch_bundle_refuses_a_bundle_over_the_size_limit(tmp_path):
    archive = _bundle(tmp_path, _manifest(), **{"server/big.bin": os.urandom(4096)})
    with pytest.raises(BundleInvalid, match="limit"):
        await fetch_bundle(archive.as_uri(), None, tmp_path / "dl", max_bytes=1024, allow_file=True)
    assert list((tmp_path / "dl").iterdir()) == []


@pytest.mark.anyio
async def test_fetch_bundle_refuses_plain_http_to_other_hosts_and_odd_schemes(tmp_path):
    for url in ("http://example.com/x.mcpb", "ftp://example.com/x.mcpb"):
        with pytest.raises(BundleInvalid, match="https"):
            await fetch_bundle(url, None, tmp_path / "dl")


@pytest.fixture
def loopback_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A real HTTP server on 127.0.0.1 serving ``routes`` (path → body)."""
    routes: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ready = threading.Event()

    def serve() -> None:
        ready.set()
        server.serve_forever(poll_interval=0.05)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(scaled(5))
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()
        thread.join(scaled(5))


@pytest.mark.anyio
async def test_fetch_bundle_downloads_over_loopback_http_and_verifies_sha256(tmp_path, loopback_server):
    base, routes = loopback_server
    data = _bundle(tmp_path, _manifest()).read_bytes()
    routes["/b.mcpb"] = data
    sha = hashlib.sha256(data).hexdigest()
    async with httpx.AsyncClient() as client:
        got = await fetch_bundle(f"{base}/b.mcpb", sha, tmp_path / "dl", http=client)
        assert got.read_bytes() == data
        with pytest.raises(BundleInvalid, match="expected"):
            await fetch_bundle(f"{base}/b.mcpb", "f" * 64, tmp_path / "dl2", http=client)
        with pytest.raises(BundleInvalid, match="HTTP 404"):
            await fetch_bundle(f"{base}/missing.mcpb", sha, tmp_path / "dl3", http=client)
    got = await fetch_bundle(f"{base}/b.mcpb", sha, tmp_path / "dl4")  # its own client
    assert file_sha256(got) == sha


# --- unpack --------------------------------------------------------------------------


@pytest.mark.parametrize("member", ["../evil", "server/../../evil", "/etc/evil", "C:/evil", "..\\evil"])
def test_unpack_refuses_a_member_escaping_the_target_dir(tmp_path, member):
    archive = zip_files(tmp_path / "bad.mcpb", {"manifest.json": "{}", member: "x"})
    with pytest.raises(BundleInvalid) as err:
        unpack_bundle(archive, tmp_path / "out")
    assert member in err.value.message
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("target", ["/etc/passwd", "../../outside", "sub/../../../outside"])
def test_unpack_refuses_a_symlink_pointing_outside(tmp_path, target):
    archive = zip_files(tmp_path / "bad.mcpb", {"manifest.json": "{}"}, symlinks={"server/link": target})
    with pytest.raises(BundleInvalid) as err:
        unpack_bundle(archive, tmp_path / "out")
    assert "server/link" in err.value.message
    assert not (tmp_path / "out" / "server" / "link").is_symlink()


def test_unpack_keeps_inner_symlinks_and_executable_bits(tmp_path):
    archive = zip_files(
        tmp_path / "ok.mcpb",
        {
            "manifest.json": json.dumps(_manifest(type="binary", entry_point="bin/srv")),
            "bin/srv": "#!/bin/sh\n",
            "bin/tool": "#!/bin/sh\n",
            "lib/data.txt": "d",
        },
        modes={"bin/tool": 0o4775, "lib/data.txt": 0o666},
        symlinks={"node_modules/.bin/tool": "../../bin/tool"},
    )
    out = unpack_bundle(archive, tmp_path / "out")
    assert stat.S_IMODE((out / "bin/tool").stat().st_mode) == 0o755  # no setuid, no group write
    assert stat.S_IMODE((out / "lib/data.txt").stat().st_mode) == 0o644
    assert os.access(out / "bin/srv", os.X_OK)  # binary entry point made executable
    link = out / "node_modules/.bin/tool"
    assert link.is_symlink() and link.resolve() == (out / "bin/tool").resolve()


def test_unpack_refuses_something_that_is_not_a_zip(tmp_path):
    junk = tmp_path / "junk.mcpb"
    junk.write_bytes(b"not a zip")
    with pytest.raises(BundleInvalid, match="zip"):
        unpack_bundle(junk, tmp_path / "out")


# --- manifest ------------------------------------------------------------------------


def test_missing_or_invalid_manifest_is_bundle_invalid(tmp_path):
    with pytest.raises(BundleInvalid, match="no manifest.json"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{nope")
    with pytest.raises(BundleInvalid, match="not valid JSON"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(_manifest(type="java")))
    with pytest.raises(BundleInvalid, match="server.type"):
        read_manifest(tmp_path)


def _read(tmp_path: Path, manifest: dict[str, Any]):
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return read_manifest(tmp_path)


def test_dirname_and_user_config_are_substituted_through_fill(tmp_path):
    manifest = _read(
        tmp_path,
        {
            **_manifest(
                mcp_config={
                    "command": "node",
                    "args": ["${__dirname}/server/index.js", "--root", "${user_config.root}", "--cost=$5"],
                    "env": {"API_KEY": "${user_config.api_key}", "CACHE": "${HOME}${/}cache", "X": "${UNKNOWN}"},
                }
            ),
            "user_config": {
                "api_key": {"type": "string", "title": "API key", "sensitive": True, "required": True},
                "root": {"type": "directory", "title": "Root", "default": "${DOCUMENTS}"},
            },
        },
    )
    base = _mcpb_base("https://example.com/demo.mcpb", "a" * 64, env={"REGION": "{REGION}"})
    spec = spec_from_manifest(manifest, base, home=Path("/home/u"))
    assert (spec.command, spec.runner, spec.needs_install_dir) == ("node", "node", True)
    ok, reason = runner_availability(spec.runner, which=lambda name: None)  # checked after unpacking
    assert not ok and INSTALL_HINTS["node"] in reason
    assert spec.keys() == {"api_key", "root", "REGION"}
    assert spec.file_sha256 == "a" * 64 and spec.version == "1.2.3"
    resolved = fill(spec, {"api_key": CANARY, "root": "/data", "REGION": "eu"}, dirname="/srv/demo")
    assert resolved.args == ["/srv/demo/server/index.js", "--root", "/data", "--cost=$5"]
    assert resolved.env == {"REGION": "eu", "API_KEY": CANARY, "CACHE": f"/home/u{os.sep}cache", "X": "${UNKNOWN}"}
    assert not any(CANARY in a for a in resolved.args)


def test_undeclared_user_config_in_mcp_config_is_refused(tmp_path):
    manifest = _read(tmp_path, _manifest(mcp_config={"command": "node", "args": ["${user_config.nope}"]}))
    with pytest.raises(BundleInvalid, match="user_config.nope"):
        spec_from_manifest(manifest, _mcpb_base("https://e/x.mcpb"), home=tmp_path)


def test_bundle_relative_command_runs_from_the_install_dir_with_platform_overrides(tmp_path):
    manifest = _read(
        tmp_path,
        _manifest(
            type="binary",
            entry_point="server/srv",
            mcp_config={
                "command": "server/srv",
                "args": ["--config", "server/c.json"],
                "platform_overrides": {"win32": {"command": "server/srv-win.exe"}, "linux": {"env": {"L": "1"}}},
            },
        ),
    )
    base = _mcpb_base("https://e/x.mcpb")
    linux = spec_from_manifest(manifest, base, home=tmp_path, platform="linux")
    assert (linux.command, linux.runner, linux.env) == ("${__dirname}/server/srv", None, {"L": "1"})
    assert fill(linux, {}, dirname="/opt/x").command == "/opt/x/server/srv"
    assert (
        spec_from_manifest(manifest, base, home=tmp_path, platform="win32").command == "${__dirname}/server/srv-win.exe"
    )


def test_omitted_optional_user_config_drops_its_env_and_flagged_args(tmp_path):
    manifest = _read(
        tmp_path,
        {
            **_manifest(
                mcp_config={
                    "command": "node",
                    "args": ["${__dirname}/i.js", "--db", "${user_config.db}"],
                    "env": {"TOKEN": "${user_config.token}"},
                }
            ),
            "user_config": {"db": {"type": "file"}, "token": {"type": "string", "sensitive": True}},
        },
    )
    spec = spec_from_manifest(manifest, _mcpb_base("https://e/x.mcpb"), home=tmp_path, omit={"db", "token"})
    assert spec.args == ["${__dirname}/i.js"] and spec.env == {}


def test_required_keys_merge_user_config_with_registry_env_keys(tmp_path):
    manifest = _read(
        tmp_path,
        {
            **_manifest(mcp_config={"command": "node", "args": []}),
            "user_config": {
                "api_key": {
                    "type": "string",
                    "title": "API key",
                    "description": "From the dashboard",
                    "required": True,
                },
                "dir": {"type": "directory", "title": "Folder", "required": True, "default": ["${HOME}/Desktop"]},
                "verbose": {"type": "boolean", "default": False},
                "note": {"type": "string"},
            },
        },
    )
    registry = [
        RequiredKey(name="api_key", description="registry text", secret=True),
        RequiredKey(name="REGION", description="Region", secret=False, required=False),
    ]
    keys = {k.name: k for k in required_keys_from_manifest(manifest, registry, home=Path("/home/u"))}
    assert list(keys) == ["api_key", "dir", "verbose", "note", "REGION"]
    api = keys["api_key"]
    assert (api.secret, api.required, api.kind, api.description) == (
        True,
        True,
        "user_config",
        "API key: From the dashboard",
    )
    assert (keys["dir"].required, keys["dir"].default) == (False, "/home/u/Desktop")
    assert (keys["verbose"].default, keys["verbose"].choices) == ("false", ["true", "false"])
    assert keys["note"].required is False  # MCPB: `required` defaults to false
    assert keys["REGION"] == registry[1]


@pytest.mark.anyio
async def test_fetched_bundle_runs_with_its_manifest_config_end_to_end(tmp_path):
    script = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'key': os.environ.get('API_KEY')}))"
    manifest = {
        **_manifest(
            type="python",
            entry_point="server/main.py",
            mcp_config={
                "command": sys.executable,
                "args": ["${__dirname}/server/main.py", "--name", "${user_config.name}"],
                "env": {"API_KEY": "${user_config.api_key}"},
            },
        ),
        "user_config": {
            "api_key": {"type": "string", "sensitive": True, "required": True},
            "name": {"type": "string", "required": True},
        },
    }
    archive = _bundle(tmp_path, manifest, **{"server/main.py": script})
    sha = file_sha256(archive)
    base = _mcpb_base(archive.as_uri(), sha)
    got = await fetch_bundle(base.identifier, base.file_sha256, tmp_path / "dl", allow_file=True)
    install = unpack_bundle(got, tmp_path / "install")
    spec = spec_from_manifest(read_manifest(install), base, home=tmp_path)
    run = fill(spec, {"api_key": CANARY, "name": "two words"}, dirname=str(install))
    assert CANARY not in " ".join([run.command or "", *run.args])
    out = subprocess.run(
        [run.command, *run.args],
        env={**run.env},
        cwd=install,
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=True,
    )
    assert json.loads(out.stdout) == {"argv": ["--name", "two words"], "key": CANARY}


@pytest.mark.anyio
async def test_a_link_planted_where_the_download_is_written_is_removed_not_written_through(tmp_path: Path) -> None:
    # The install dir is the server's own folder: between two starts it may leave a link where the
    # host writes a bundle it downloads again (a server installed by another machine).
    archive = zip_files(tmp_path / "demo.mcpb", {"manifest.json": "{}"})
    dest = tmp_path / "server"
    dest.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    (dest / "bundle.mcpb.part").symlink_to(victim)
    got = await fetch_bundle(archive.as_uri(), file_sha256(archive), dest, allow_file=True)
    assert victim.read_text() == "the user's own file\n"
    assert got == dest / "bundle.mcpb" and not got.is_symlink() and got.read_bytes() == archive.read_bytes()
