"""Prefetch: while the user types a secret or reads ``mcp_setup_get``, the package
an install of that server would choose is fetched in the background (npm/uvx/docker through the
:class:`~setup_agent.launch.fetch.Fetcher`, MCPB bundles into the
:class:`~setup_agent.launch.bundle_cache.BundleCache`). A prefetch that fails changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from registry_clients.hub import RegistryHub
from registry_clients.models import PackageOption
from setup_agent.errors import SetupError
from setup_agent.store import Store

from .bundle_cache import BundleCache
from .fetch import Fetcher
from .packages import DEFAULT_PREFERENCE, build_spec, choose_package
from .runners import runner_which

__all__ = ["Prefetches"]

logger = logging.getLogger(__name__)


@dataclass(kw_only=True, eq=False)
class Prefetches:
    """The background prefetches of the servers being set up."""

    hub: RegistryHub
    store: Store
    fetcher: Fetcher | None = None
    bundle_cache: BundleCache | None = None
    package_preference: tuple[str, ...] = DEFAULT_PREFERENCE
    which: Callable[[str], str | None] = runner_which
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    def server(self, name: str) -> None:
        """In the background: find the package an install of ``name`` would choose, and fetch it."""
        if self.fetcher is None and self.bundle_cache is None:
            return

        async def run() -> None:
            try:
                detail = await self.hub.get(name)
                if await asyncio.to_thread(self.store.servers.get_by_name, detail.qualified_name) is None:
                    self.package(
                        choose_package(detail.packages, None, preference=self.package_preference, which=self.which)
                    )
            except Exception as exc:  # noqa: BLE001 - a prefetch that fails changes nothing
                logger.debug("no prefetch for a server: %s", type(exc).__name__)

        task = asyncio.create_task(run(), name="mcp-setup-prefetch")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settled(self) -> None:
        """Wait until no prefetch runs (tests and the bench; callers bound it)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self.fetcher is not None:
            await self.fetcher.settled()
        if self.bundle_cache is not None:
            await self.bundle_cache.settled()

    def package(self, package: PackageOption) -> None:
        """Fetch ``package`` in the background (nothing when no fetcher or cache takes it)."""
        if package.type == "mcpb":
            if self.bundle_cache is not None and self.bundle_cache.prefetch(package.identifier, package.file_sha256):
                logger.info("prefetching the bundle of the server the user is setting up")
            return
        try:
            spec = build_spec(package)
        except SetupError:
            return
        if self.fetcher is not None and self.fetcher.prefetch(spec):
            logger.info("prefetching the %s package of the server the user is setting up", package.type)
