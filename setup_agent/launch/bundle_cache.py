"""A small content-addressed cache of downloaded MCPB bundles (MCPB prefetch).

``<root>/<sha256>.mcpb`` (files 0600, dir 0700), filled by :func:`setup_agent.launch.bundle.fetch_bundle`
(so the published SHA-256 is checked on the way in) and checked again on the way out: an
entry whose bytes no longer hash to its name is removed and downloaded again. Only bundles
with a published SHA-256 fetched over http(s) are cached (a ``file://`` bundle is a local
copy already; an unpinned one has no name to be found by).

:meth:`BundleCache.fetch` is a drop-in for ``fetch_bundle``: it puts the bundle at
``dest/bundle.mcpb`` (a hard link to the entry, or a copy across filesystems), downloading
only on a miss; a fetch of a bundle already being downloaded (a prefetch) joins it.
:meth:`BundleCache.prefetch` starts one in the background while the user types; a failed
prefetch is only logged and changes nothing (the test downloads, and reports, as if there
had been none). After each new entry the oldest entries (by mtime; a hit touches its entry)
are removed until the cache is within ``max_bytes``; the entry just added is kept even if it
alone is larger (it goes first on the next insert).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import httpx

from setup_agent.errors import BundleInvalid

from .bundle import fetch_bundle, file_sha256

__all__ = ["DEFAULT_CACHE_BYTES", "BundleCache"]

logger = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
_SHA = re.compile(r"^[0-9a-f]{64}$")


class BundleCache:
    def __init__(
        self,
        root: Path,
        *,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        http: httpx.AsyncClient | None = None,
        prefetch: bool = True,
    ) -> None:
        self.root = root
        self.prefetch_enabled = prefetch
        self.max_bytes = max_bytes
        self.http = http
        self._running: dict[str, asyncio.Task[Path]] = {}

    @staticmethod
    def key(url: str, sha256: str | None) -> str | None:
        """The entry name for a bundle, or None when it is not cached (unpinned, or not http(s))."""
        sha = (sha256 or "").strip().lower()
        if not _SHA.match(sha) or not url.lower().startswith(("https://", "http://")):
            return None
        return sha

    def entry(self, sha: str) -> Path:
        return self.root / f"{sha}.mcpb"

    async def fetch(self, url: str, sha256: str | None, dest: Path, *, allow_file: bool = False) -> Path:
        """``fetch_bundle(url, sha256, dest)``, from the cache when it holds a sound copy."""
        sha = self.key(url, sha256)
        if sha is None:
            return await fetch_bundle(url, sha256, dest, http=self.http, allow_file=allow_file)
        entry = await self._entry(url, sha)
        await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
        try:
            return await asyncio.to_thread(_place, entry, dest / "bundle.mcpb")
        except FileNotFoundError:  # evicted in between: download as if there were no cache
            return await fetch_bundle(url, sha256, dest, http=self.http, allow_file=allow_file)

    def prefetch(self, url: str, sha256: str | None) -> bool:
        """Start downloading the bundle into the cache in the background; True when one was
        started or already runs (False: not cacheable, or already cached)."""
        sha = self.key(url, sha256)
        if sha is None or not self.prefetch_enabled:
            return False
        if sha in self._running:
            return True
        if self.entry(sha).is_file():
            return False
        self._start(url, sha)
        return True

    async def settled(self) -> None:
        """Wait until no download runs (callers bound it)."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)

    async def aclose(self) -> None:
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _entry(self, url: str, sha: str) -> Path:
        running = self._running.get(sha)
        if running is not None:  # a prefetch of it runs: join it; if it failed, download here
            with contextlib.suppress(Exception):
                return await asyncio.shield(running)
        if await asyncio.to_thread(self._sound, sha):
            return self.entry(sha)
        return await asyncio.shield(self._start(url, sha))

    def _start(self, url: str, sha: str) -> asyncio.Task[Path]:
        task = asyncio.create_task(self._download(url, sha), name="mcp-setup-bundle-fetch")
        self._running[sha] = task
        task.add_done_callback(lambda t: self._done(sha, t))
        return task

    def _done(self, sha: str, task: asyncio.Task[Path]) -> None:
        if self._running.get(sha) is task:
            del self._running[sha]
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            code = exc.code if isinstance(exc, BundleInvalid) else type(exc).__name__
            logger.info("bundle download for the cache failed (%s); the next fetch tries again", code)

    def _sound(self, sha: str) -> bool:
        """Is the entry there and does it still hash to its name? A bad entry is removed."""
        entry = self.entry(sha)
        try:
            if file_sha256(entry) == sha:
                os.utime(entry)  # recently used: evicted last
                return True
        except OSError:
            return False
        logger.warning("cached bundle %s does not match its sha256; removing it", sha[:12])
        entry.unlink(missing_ok=True)
        return False

    async def _download(self, url: str, sha: str) -> Path:
        await asyncio.to_thread(_make_root, self.root)
        staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".part-", dir=self.root))
        try:
            archive = await fetch_bundle(url, sha, staging, http=self.http)
            entry = self.entry(sha)
            await asyncio.to_thread(_install, archive, entry)
            await asyncio.to_thread(self._evict, keep=entry)
            return entry
        finally:
            await asyncio.to_thread(shutil.rmtree, staging, True)

    def _evict(self, *, keep: Path) -> None:
        entries = []
        for path in self.root.glob("*.mcpb"):
            with contextlib.suppress(OSError):
                st = path.stat()
                entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _m, size, _p in entries)
        for _mtime, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            if path != keep:
                path.unlink(missing_ok=True)
                total -= size


def _make_root(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(root, 0o700)


def _install(archive: Path, entry: Path) -> None:
    os.chmod(archive, 0o600)
    os.replace(archive, entry)


def _place(entry: Path, target: Path) -> Path:
    """The entry at ``target``: a hard link (the caller may unlink it freely), or a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(entry, target)
    except OSError:
        shutil.copyfile(entry, target)
    return target
