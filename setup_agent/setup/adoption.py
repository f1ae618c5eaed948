"""Adoption: a server that passed its test stays running for the install that follows.

A test-connect that may be followed by an install (``Prober(keep_for=…)``) runs the server in
a reserved install dir. Once it listed its tools, the probe *parks* the session here instead
of tearing it down: a :class:`Parked` keyed by an HMAC of what was tested (server, version,
launch spec, values). ``mcp_setup_install_and_connect`` computes the same key; on a match
it *adopts* the session (:meth:`ParkingLot.adopt`) and the connection manager uses it as the
live connection, so the server starts once per setup instead of twice.

A parked session ends (process group stopped, its dir removed) when nobody adopts it within
``keep_for`` (the ref TTL), when its process exits, when a newer test parks the same key,
when more than ``max_parked`` are parked (the oldest goes), or on :meth:`ParkingLot.expire_all`
(shutdown). The key is an HMAC with a per-process random key: it never leaves memory, and
says nothing about the values it covers.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from setup_agent.launch import Values

if TYPE_CHECKING:  # types only: the SDK's client and the gateway load with the probe that parks
    from mcp import Client

    from setup_agent.gateway import InFlight
    from setup_agent.launch import ProcessWatch

__all__ = ["Keep", "Parked", "ParkingLot"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Keep:
    """Ask the probe to park its session on success: under ``key``, running in ``workdir``."""

    key: str
    workdir: Path


class ListedTools(Protocol):
    """What the test found (setup_agent/setup/probe.py ``ProbeResult``, which imports this module)."""

    tools: list[dict[str, Any]]

    @property
    def tools_hash(self) -> str: ...


@dataclass
class Parked:
    """A tested session waiting for its install. ``workdir.name`` is the reserved server id."""

    key: str
    workdir: Path
    client: Client
    pwatch: ProcessWatch
    result: ListedTools
    claimed: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    #: Whose calls the session's relay serves (setup_agent/gateway/relay.py): the adopter's.
    inflight: InFlight | None = None

    @property
    def server_id(self) -> str:
        return self.workdir.name

    def alive(self) -> bool:
        return not self.pwatch.exited.is_set()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """The client, for the adopter; leaving the block ends the session (like ``open_client``)."""
        try:
            yield self.client
        finally:
            await self.close()

    async def close(self, timeout: float = 15.0) -> None:
        """End the adopted session and wait (bounded) until its process group is gone."""
        self.released.set()
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.closed.wait()


class ParkingLot:
    """The parked sessions of one Prober."""

    def __init__(self, keep_for: float, *, max_parked: int = 32) -> None:
        self.keep_for = keep_for
        self.max_parked = max_parked
        self._secret = secrets.token_bytes(32)
        self._parked: dict[str, Parked] = {}

    @property
    def enabled(self) -> bool:
        return self.keep_for > 0

    def key(self, name: str, version: str | None, spec: Mapping[str, Any], values: Values) -> str:
        """What must match between the test and the install for the install to adopt (a secret
        value counts by its keyed digest: it is never read in clear here)."""
        given = sorted(
            [k, "plain", v] if isinstance(v, str) else [k, "secret", v.keyed_digest(self._secret)]
            for k, v in values.items()
        )
        blob = json.dumps([name, version, spec, given], sort_keys=True, separators=(",", ":"))
        return hmac.new(self._secret, blob.encode(), hashlib.sha256).hexdigest()

    def __len__(self) -> int:
        return len(self._parked)

    async def hold(self, parked: Parked) -> bool:
        """Park ``parked`` (from inside the probe's session) until it is adopted and released,
        or it expires. Returns True when it was adopted (the adopter then owns its dir)."""
        older = self._parked.pop(parked.key, None)
        if older is not None:
            older.released.set()  # the newer test of the same thing wins
        while len(self._parked) >= self.max_parked:
            oldest = next(iter(self._parked))
            self._parked.pop(oldest).released.set()
        self._parked[parked.key] = parked
        waiters = [
            asyncio.ensure_future(parked.claimed.wait()),
            asyncio.ensure_future(parked.released.wait()),
            asyncio.ensure_future(parked.pwatch.exited.wait()),
        ]
        try:
            await asyncio.wait(waiters, timeout=self.keep_for, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
        if not parked.claimed.is_set():
            if self._parked.get(parked.key) is parked:
                del self._parked[parked.key]
            return False
        await parked.released.wait()  # the adopter's session: it ends with the connection
        return True

    def adopt(self, key: str) -> Parked | None:
        """Take the session parked under ``key``, if one is there and its process still runs."""
        parked = self._parked.pop(key, None)
        if parked is None or not parked.alive() or parked.released.is_set():
            if parked is not None:
                parked.released.set()
            return None
        parked.claimed.set()
        logger.info("install adopts the tested server in %s", parked.server_id)
        return parked

    def expire_all(self) -> None:
        """End every session that waits for an install (shutdown, drain)."""
        for parked in list(self._parked.values()):
            parked.released.set()
        self._parked.clear()
