"""Hostile bundles: oversized or deeply nested manifests, escaping symlink chains, file:// abuse."""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.errors import BundleInvalid
from setup_agent.launch.bundle import fetch_bundle, unpack_bundle
from setup_agent.launch.manifest import MAX_MANIFEST_BYTES, read_manifest
from setup_agent.setup.service import CallContext
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, build_stub_bundle, sha256_hex, stub_server_json, zip_files

pytestmark = pytest.mark.anyio


def _catalog_entry(catalog: Path, name: str, bundle: Path) -> None:
    catalog.mkdir(parents=True, exist_ok=True)
    doc = stub_server_json(bundle.resolve().as_uri(), sha256_hex(bundle.read_bytes()), name=name)
    (catalog / (name.replace("/", "_") + ".json")).write_text(json.dumps(doc))


@pytest.fixture
async def runtime_over(new_runtime, tmp_path: Path, memory_keyring) -> AsyncIterator:
    made: list[Runtime] = []

    def build(**settings) -> Runtime:
        runtime = new_runtime(
            Settings(home=tmp_path / "data", probe_timeout_seconds=scaled(10), **settings),
            keyring_backend=memory_keyring,
        )
        made.append(runtime)
        return runtime

    yield build
    for runtime in made:
        await runtime.aclose()


# --- 9: manifest size and depth ---------------------------------------------------------------


async def test_a_manifest_nested_100000_levels_deep_is_an_invalid_bundle_not_an_internal_error(
    tmp_path: Path, runtime_over, caplog: pytest.LogCaptureFixture
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    bundle = zip_files(tmp_path / "deep.mcpb", {"manifest.json": deep, "server/server.py": SERVER_PY.read_bytes()})
    _catalog_entry(tmp_path / "catalog", "io.test/deep", bundle)
    runtime = runtime_over(registries="local", catalog_dir=tmp_path / "catalog")
    result = await runtime.service.call(
        "mcp_setup_test_connection",
        {"qualified_name": "io.test/deep", "env": {}, "env_refs": {}},
        CallContext(),
    )
    assert result["ok"] is False
    assert result["error"]["code"] == "bundle_invalid", result
    assert "nested deeper" in result["error"]["message"]
    assert "Traceback" not in caplog.text


def test_a_manifest_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    padding = " " * (MAX_MANIFEST_BYTES + 1)
    (tmp_path / "manifest.json").write_text('{"name": "x",' + padding + '"version": "1"}')
    with pytest.raises(BundleInvalid, match="larger than"):
        read_manifest(tmp_path)


# --- 10: symlinks that leave the bundle -------------------------------------------------------


def test_a_symlink_chain_that_leads_out_of_the_bundle_once_unpacked_is_refused(tmp_path: Path) -> None:
    # Each link looks harmless when written: `up -> here/..` while `here` does not exist yet
    # resolves to the bundle root; `here -> .` points at the root. Together `up` is the
    # bundle's parent, and a write through `up/...` would land outside.
    archive = zip_files(
        tmp_path / "chain.mcpb",
        {"manifest.json": "{}"},
        symlinks={"up": "here/..", "here": "."},
    )
    with pytest.raises(BundleInvalid, match="symlink pointing outside"):
        unpack_bundle(archive, tmp_path / "out" / "bundle")


def test_a_symlink_through_an_inner_directory_link_that_stays_inside_is_kept(tmp_path: Path) -> None:
    archive = zip_files(
        tmp_path / "ok.mcpb",
        {"manifest.json": "{}", "lib/real/data.txt": "d"},
        symlinks={"lib/cur": "real", "data": "lib/cur/data.txt"},
    )
    out = unpack_bundle(archive, tmp_path / "out")
    assert (out / "data").read_text() == "d"


# --- 11: file:// bundles -----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["file:///proc/self/environ", "file:///dev/zero", "file:///sys/kernel/notes"])
async def test_a_file_bundle_is_never_read_from_proc_sys_or_dev(tmp_path: Path, url: str) -> None:
    with pytest.raises(BundleInvalid, match="/proc, /sys or /dev"):
        await fetch_bundle(url, None, tmp_path / "dl", allow_file=True, max_bytes=1024 * 1024)
    assert list((tmp_path / "dl").iterdir()) == []


async def test_a_link_into_proc_is_refused_like_proc_itself(tmp_path: Path) -> None:
    link = tmp_path / "innocent.mcpb"
    link.symlink_to("/proc/self/environ")
    with pytest.raises(BundleInvalid, match="/proc, /sys or /dev"):
        await fetch_bundle(link.as_uri(), None, tmp_path / "dl", allow_file=True)


async def test_a_remote_registry_cannot_name_a_file_bundle(tmp_path: Path, runtime_over, canary: str) -> None:
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary)
    entry = stub_server_json(bundle.resolve().as_uri(), sha, name="io.github.mcp-setup/file-stub")
    with FakeOfficialRegistry([entry]) as registry:
        runtime = runtime_over(registries="official", official_registry_url=registry.url)
        result = await runtime.service.call(
            "mcp_setup_test_connection",
            {"qualified_name": "io.github.mcp-setup/file-stub"},
            CallContext(),
        )
    assert result["ok"] is False
    assert result["error"]["code"] == "bundle_invalid", result
    assert "local catalog" in result["error"]["message"]


# -- #24 item 12: the central directory is checked before anything is written ------------------


def test_a_zip_bomb_is_refused_from_its_central_directory_before_a_byte_is_written(tmp_path: Path) -> None:
    from setup_agent.launch.bundle import unpack_bundle

    archive = tmp_path / "bomb.mcpb"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", "{}")
        for n in range(3):
            zf.writestr(f"big{n}.bin", b"\0" * 400_000)  # compresses to almost nothing
    target = tmp_path / "out"
    with pytest.raises(BundleInvalid, match="size limit"):
        unpack_bundle(archive, target, max_bytes=1_000_000)
    assert not target.exists() or not any(target.rglob("*"))


def test_a_bundle_of_more_than_ten_thousand_members_is_refused_at_once(tmp_path: Path) -> None:
    from setup_agent.launch.bundle import MAX_MEMBERS, bundle_manifest, unpack_bundle

    archive = tmp_path / "many.mcpb"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("manifest.json", "{}")
        for n in range(MAX_MEMBERS):
            zf.writestr(f"f/{n}", b"")
    target = tmp_path / "out"
    with pytest.raises(BundleInvalid, match="10,001 members"):
        unpack_bundle(archive, target)
    with pytest.raises(BundleInvalid, match="members"):
        bundle_manifest(archive)
    assert not target.exists() or not any(target.rglob("*"))
