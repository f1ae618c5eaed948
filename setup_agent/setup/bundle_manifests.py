"""MCPB bundles as test, install and ``get`` read them: fetched (from the bundle cache when it
holds them, sha256-checked), unpacked, their ``manifest.json`` read and remembered by (url,
sha256), so ``get`` reports a bundle's own settings once a test, install or cheap fetch has
read it, and whether its launch puts a secret on the command line.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from registry_clients.models import PackageOption, RequiredKey
from setup_agent.errors import SetupError
from setup_agent.launch import (
    BundleCache,
    Manifest,
    argv_secret_keys,
    build_spec,
    fetch_bundle,
    make_scratch_dir,
    move_argv_secrets,
    read_manifest,
    spec_from_manifest,
    unpack_bundle,
    unverified_download,
)

from .call_context import Progress

if TYPE_CHECKING:
    import httpx

__all__ = ["BundleManifests"]


@dataclass(kw_only=True, eq=False)
class BundleManifests:
    """Fetches and unpacks bundles, and remembers each manifest read (by url and sha256)."""

    bundle_cache: BundleCache | None = None
    http: httpx.AsyncClient | None = None  # None: fetch_bundle makes its own
    scratch_root: Path | None = None
    user_home: Path | None = None
    # MCPB manifests already fetched (and sha256-checked), by (url, sha256): `get` reports
    # a bundle's own settings from here once a test, install or cheap fetch has read it.
    _manifests: dict[tuple[str, str | None], Manifest] = field(default_factory=dict, init=False, repr=False)

    def known(self, package: PackageOption) -> Manifest | None:
        """The manifest of this bundle if one was read already."""
        return self._manifests.get((package.identifier, package.file_sha256))

    async def fetch(
        self, package: PackageOption, workdir: Path, progress: Progress, *, allow_file: bool
    ) -> tuple[Path, Manifest]:
        """The bundle unpacked under ``workdir/bundle``, and its manifest."""
        await progress("downloading", "started")
        await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
        archive = await self._archive(package, workdir, allow_file=allow_file)
        bundle_dir = await asyncio.to_thread(unpack_bundle, archive, workdir / "bundle")
        await asyncio.to_thread(archive.unlink)
        manifest = await asyncio.to_thread(read_manifest, bundle_dir)
        self._manifests[(package.identifier, package.file_sha256)] = manifest
        await progress("downloading", "done")
        return bundle_dir, manifest

    async def _archive(self, package: PackageOption, dest: Path, *, allow_file: bool) -> Path:
        """The bundle at ``dest/bundle.mcpb``, sha256-checked: from the cache when it holds it."""
        if self.bundle_cache is not None:
            return await self.bundle_cache.fetch(package.identifier, package.file_sha256, dest, allow_file=allow_file)
        return await fetch_bundle(package.identifier, package.file_sha256, dest, http=self.http, allow_file=allow_file)

    def argv_warnings(
        self, package: PackageOption, manifest: Manifest, keys: list[RequiredKey]
    ) -> list[dict[str, Any]]:
        """Does this bundle's launch put a secret on the command line (visible in ``ps``)?"""
        secret = {k.name for k in keys if k.secret}
        try:
            spec = spec_from_manifest(manifest, build_spec(package), home=self.user_home)
            in_argv = argv_secret_keys(move_argv_secrets(spec, secret), secret)
        except SetupError as exc:
            return [{"code": exc.code, "package": package.id, "message": exc.message}]
        if not in_argv:
            return []
        return [
            {
                "code": "argv_secret",
                "package": package.id,
                "keys": in_argv,
                "message": f"This bundle puts {', '.join(in_argv)} on its command line, where other local "
                "users can see it; it can be installed only if the user consents to that.",
            }
        ]

    async def cheap_manifest(
        self, package: PackageOption, *, allow_file: bool, remote: bool = False
    ) -> Manifest | None:
        """The bundle's manifest when it is cached, cheap to fetch (a ``file://`` or loopback URL),
        or ``remote`` is asked for (the option install would choose): fetched with its sha256
        check into a scratch dir that is removed at once, and cached. A bundle with no sha256
        from another host is never fetched here (nothing to check it against). Other remote options are
        not downloaded by ``get``: their own settings are known after their first test (and
        the consent step shows them before anything runs)."""
        cache_key = (package.identifier, package.file_sha256)
        if cache_key in self._manifests:
            return self._manifests[cache_key]
        url = package.identifier.lower()
        if not remote and not url.startswith(("file://", "http://127.0.0.1", "http://localhost")):
            return None
        if unverified_download(package):
            return None  # nothing to check it against: never downloaded or unpacked before consent
        scratch = make_scratch_dir(self.scratch_root, "get")
        try:
            archive = await self._archive(package, scratch, allow_file=allow_file)
            bundle_dir = await asyncio.to_thread(unpack_bundle, archive, scratch / "bundle")
            manifest = await asyncio.to_thread(read_manifest, bundle_dir)
        except SetupError:
            return None  # install reports it properly
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)
        self._manifests[cache_key] = manifest
        return manifest
