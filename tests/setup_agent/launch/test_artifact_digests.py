"""The digest of an artifact as its registry publishes it (setup_agent/launch/digests.py), read
from real loopback registries: npm's integrity, a PyPI index's sha256, an MCPB bundle's sha256,
an OCI digest pinned in the name; what an install records and an older install's lock entry."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime

import httpx
import pytest

from setup_agent.errors import LockMismatch
from setup_agent.launch import ArtifactDigests, LaunchSpec
from setup_agent.setup import check_digest, locked_server
from setup_agent.store import InstalledServer
from tests.fakes.npm_registry import serve_npm_package
from tests.fakes.pypi_index import serve_pypi_package, stub_wheel


def npm_spec(registry: str, name: str = "stub-mcp", version: str = "1.0.0") -> LaunchSpec:
    return LaunchSpec(
        command="npx",
        args=["-y", f"--registry={registry}", f"{name}@{version}"],
        package_type="npm",
        identifier=name,
        version=version,
        runner="npx",
    )


@pytest.mark.anyio
async def test_the_npm_integrity_is_read_from_the_registry_and_a_republished_tarball_differs() -> None:
    with serve_npm_package("stub-mcp", "1.0.0") as registry:
        first = await ArtifactDigests().resolve(npm_spec(registry.url))
        assert registry.tarball_requests == []  # the packument only: nothing is downloaded
        async with httpx.AsyncClient() as client:  # what npm itself checks the tarball against
            tarball = (await client.get(f"{registry.url}/stub-mcp/-/stub-mcp-1.0.0.tgz")).content
    assert first == "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    with serve_npm_package("stub-mcp", "1.0.0", scripts={"postinstall": "echo hi"}) as registry:  # other bytes
        second = await ArtifactDigests().resolve(npm_spec(registry.url))
    assert second and second.startswith("sha512-") and second != first
    entry = locked_server(_server("npm", {**npm_spec("x").model_dump(mode="json")}, digest=first), {}, [], oauth=False)
    with pytest.raises(LockMismatch) as refused:
        check_digest(entry, second)
    assert f"expected npm integrity {first}, found {second}" in refused.value.message


@pytest.mark.anyio
async def test_the_pypi_sha256_is_read_from_the_index_page_of_that_exact_version() -> None:
    wheel = stub_wheel("stub-mcp", "1.0.0")
    with serve_pypi_package("stub-mcp", wheel) as index:
        spec = LaunchSpec(
            command="uvx",
            args=["--default-index", index.url, "--from", "stub-mcp==1.0.0", "stub-mcp"],
            package_type="pypi",
            identifier="stub-mcp",
            version="1.0.0",
            runner="uvx",
        )
        found = await ArtifactDigests().resolve(spec)
        other = await ArtifactDigests().resolve(spec.model_copy(update={"version": "1.0"}))  # not a prefix match
    assert found == "sha256:" + hashlib.sha256(wheel[1]).hexdigest()
    assert other is None
    assert index.file_requests == []


@pytest.mark.anyio
async def test_an_mcpb_sha256_and_a_pinned_oci_digest_need_no_lookup_and_a_tag_or_a_dead_registry_has_none() -> None:
    digests = ArtifactDigests()
    assert await digests.resolve(LaunchSpec(package_type="mcpb", file_sha256="AB" * 32)) == "sha256:" + "ab" * 32
    pinned = "ghcr.io/acme/notes@sha256:" + "c" * 64
    assert await digests.resolve(LaunchSpec(package_type="oci", identifier=pinned)) == "sha256:" + "c" * 64
    assert await digests.resolve(LaunchSpec(package_type="oci", identifier="ghcr.io/acme/notes:1.0")) is None
    assert await digests.resolve(npm_spec("http://127.0.0.1:9")) is None  # refused: logged, never raised


def _server(package_type: str, spec: dict, *, digest: str | None = None) -> InstalledServer:
    return InstalledServer(
        server_id="srv_1",
        qualified_name="io.github.acme/notes",
        source="official",
        version="1.0.0",
        package_type=package_type,
        launch_spec=spec,
        enabled=True,
        installed_at=datetime.now(UTC),
        installed_by="cli",
        tools_hash="x",
        env_keys=(),
        artifact_digest=digest,
    )


def test_an_install_from_before_digests_were_recorded_exports_no_digest_and_says_why() -> None:
    entry = locked_server(
        _server("npm", npm_spec("https://registry.npmjs.org").model_dump(mode="json")), {}, [], oauth=False
    )
    artifact = entry.public()["artifact"]
    assert artifact["digest"] is None and artifact["kind"] == "npm integrity"
    assert "installed before mcp-setup recorded digests" in artifact["note"]
    check_digest(entry, "sha512-anything")  # a file without a digest takes the exact version as it is now
    bundle = {"package_type": "mcpb", "file_sha256": "d" * 64, "needs_install_dir": True}
    assert locked_server(_server("mcpb", bundle), {}, [], oauth=False).digest == "sha256:" + "d" * 64
