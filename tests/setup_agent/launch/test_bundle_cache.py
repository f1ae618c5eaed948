"""MCPB bundles fetched while the user types (#17 item 2): a content-addressed cache under
<home>/cache/bundles that `get` fills and test/install read, each entry checked by its sha256.

The bundle is served over loopback HTTP by a server that counts its hits."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.launch.bundle_cache import BundleCache
from setup_agent.setup.service import CallContext
from tests.fakes.file_server import serve_bundle_catalog, serve_file
from tests.helpers.timeouts import scaled

STUB = "io.github.acme/stub"


@pytest.fixture
def bundle_server(tmp_path: Path, canary: str) -> Iterator[tuple[Path, list[str], str]]:
    """A local catalog whose bundle is served over loopback HTTP, counting every hit."""
    with serve_bundle_catalog(tmp_path, canary, STUB) as served:
        yield served


def runtime_for(new_runtime, tmp_path: Path, catalog: Path, keyring, **settings) -> Runtime:
    # No adoption: the install must unpack the bundle itself, so it reads the cache too.
    settings = Settings(
        home=tmp_path / "data",
        registries="local",
        catalog_dir=catalog,
        probe_timeout_seconds=scaled(10),
        config=tmp_path / "none.toml",
        adopt_tested_servers=False,
        **settings,
    )
    return new_runtime(settings, keyring_backend=keyring)


async def tool(runtime: Runtime, name: str, **args) -> dict:
    return await runtime.service.call(name, args, CallContext(installed_by="agent"))


@pytest.mark.anyio
async def test_get_then_test_then_install_downloads_the_bundle_once(
    new_runtime, tmp_path: Path, bundle_server, memory_keyring, canary: str
) -> None:
    catalog, hits, sha = bundle_server
    runtime = runtime_for(new_runtime, tmp_path, catalog, memory_keyring)
    try:
        with anyio.fail_after(scaled(60)):
            got = await tool(runtime, "mcp_setup_get", qualified_name=STUB)
            assert got.get("package") is not None, got
            await runtime.service.prefetches_settled()
            entry = tmp_path / "data" / "cache" / "bundles" / f"{sha}.mcpb"
            assert entry.is_file()
            assert stat.S_IMODE(entry.stat().st_mode) == 0o600
            assert len(hits) == 1, hits
            ref = runtime.refs.mint("STUB_API_KEY", canary)
            tested = await tool(
                runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
            assert tested.get("ok") is True, tested
            installed = await tool(
                runtime, "mcp_setup_install_and_connect", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
            assert installed.get("status") == "connected", installed
        assert len(hits) == 1, hits  # the prefetch's download served get, test and install
        assert entry.is_file()  # the install's own copy was a link: the entry stays
    finally:
        await runtime.aclose()


@pytest.mark.anyio
async def test_a_corrupted_cache_entry_is_refused_by_its_sha256_and_fetched_again(
    new_runtime, tmp_path: Path, bundle_server, memory_keyring, canary: str
) -> None:
    catalog, hits, sha = bundle_server
    runtime = runtime_for(new_runtime, tmp_path, catalog, memory_keyring)
    try:
        with anyio.fail_after(scaled(60)):
            await tool(runtime, "mcp_setup_get", qualified_name=STUB)
            await runtime.service.prefetches_settled()
            entry = tmp_path / "data" / "cache" / "bundles" / f"{sha}.mcpb"
            entry.write_bytes(entry.read_bytes()[:-10] + b"x" * 10)
            ref = runtime.refs.mint("STUB_API_KEY", canary)
            tested = await tool(
                runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
        assert tested.get("ok") is True, tested
        assert len(hits) == 2, hits  # the bad entry was not used: downloaded again
        assert hashlib.sha256(entry.read_bytes()).hexdigest() == sha  # and the entry is sound again
    finally:
        await runtime.aclose()


@pytest.mark.anyio
async def test_a_failed_prefetch_changes_nothing_and_the_test_downloads_itself(
    new_runtime, tmp_path: Path, bundle_server, memory_keyring, canary: str
) -> None:
    catalog, hits, sha = bundle_server
    runtime = runtime_for(new_runtime, tmp_path, catalog, memory_keyring)
    cache = runtime.service.bundle_cache
    assert cache is not None
    try:
        with anyio.fail_after(scaled(60)):
            assert cache.prefetch("http://127.0.0.1:9/gone.mcpb", sha)  # nothing listens there
            await cache.settled()
            assert not (tmp_path / "data" / "cache" / "bundles" / f"{sha}.mcpb").exists()
            ref = runtime.refs.mint("STUB_API_KEY", canary)
            tested = await tool(
                runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
            )
        assert tested.get("ok") is True, tested
        assert len(hits) == 1, hits
    finally:
        await runtime.aclose()


@pytest.mark.anyio
async def test_the_cache_keeps_within_its_size_cap_evicting_the_oldest(tmp_path: Path) -> None:
    blobs = [bytes([i]) * 1000 for i in range(3)]
    cache = BundleCache(tmp_path / "cache", max_bytes=2500)
    with anyio.fail_after(scaled(30)):
        for i, blob in enumerate(blobs):
            src = tmp_path / f"b{i}.mcpb"
            src.write_bytes(blob)
            sha = hashlib.sha256(blob).hexdigest()
            with serve_file(src) as url:
                got = await cache.fetch(url, sha, tmp_path / f"dest{i}")
            assert got.read_bytes() == blob
            os.utime(cache.entry(sha), (i, i))  # inserted in this order (no two mtimes alike)
    left = sorted(p.name for p in (tmp_path / "cache").glob("*.mcpb"))
    assert left == sorted(f"{hashlib.sha256(b).hexdigest()}.mcpb" for b in blobs[1:])
