"""Each member's own downstream sessions.

A server installed with per-member keys (``InstalledServer.member_keys``) is called by a member
of a team gateway (a named token, ``token:NAME``) through a session of that member's own: one
process (or connection) per (server, member), started with the shared settings overlaid with the
member's own values (``store.values.member_values``), in a working dir (and sandbox HOME) of its own, so
nothing one member's server keeps on disk reaches another's. Every other caller (the user, this
run's clients) keeps the shared session of :class:`~setup_agent.gateway.connections.ConnectionManager`.

:class:`MemberSessions` holds one :class:`MemberConnections` (a connection manager over a view of
the store that hands out that member's values) per member. Before a member's call it checks that
the member has a value for every per-member key, asking them out of band otherwise
(:mod:`~setup_agent.gateway.member_prompts`). At every change of the store (any process) it ends
the sessions whose values changed (a rotation: the next call starts afresh), went (removed, or
the token revoked) or whose server is gone; a gone member's working dirs are deleted. A change
of what every member's session of a server shares ends them all, as it restarts the shared
session: a shared setting replaced (``mcp-setup rotate``, the page's Replace, in any process),
or its launch changed (a destination allowed); a member's next call starts afresh with it, and
checks it first itself (no wait for this process's next sync). Every member's value is known to
the redactor, so no answer to anyone carries it.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from setup_agent.secrets import SecretValue
from setup_agent.store import InstalledServer, Store

from .connections import ConnectionManager, same_start
from .member_elsewhere import MemberPromptReplicas
from .member_prompts import MEMBER_SECRET_REQUIRED, MemberPrompts, tool_error
from .relay import Caller

__all__ = ["MemberConnections", "MemberSessions", "member_of"]

logger = logging.getLogger(__name__)


def member_of(principal: str | None) -> str | None:
    """``token:alice`` (or ``token:alice via cursor``) → ``alice``; any other principal → None."""
    if not isinstance(principal, str) or not principal.startswith("token:"):
        return None
    return principal.removeprefix("token:").split(" ", 1)[0] or None


class _MemberStore:
    """The store as one member's sessions see it: the server's settings with that member's own
    values over them (never another member's, never the shared value of a per-member key), and
    no tool-list or sign-in writes (the shared connection records them)."""

    def __init__(self, store: Store, member: str) -> None:
        self.database = store.database
        self.audit = store.audit
        self.tokens = store.tokens
        self.servers = _Overlay(store.servers, set_needs_sign_in=lambda server_id, needed: False)
        self.pins = _Overlay(store.pins, set_tools=lambda server_id, tools: False)
        self.values = _Overlay(
            store.values,
            env_values=lambda server_id: _member_env(store, member, server_id),
            env_stamps=lambda server_id=None: _shared_stamps(store, server_id),
        )


class _Overlay:
    """A repository with some of its methods replaced (the rest are the repository's own)."""

    def __init__(self, repository: Any, **replaced: Callable[..., Any]) -> None:
        self._repository = repository
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._repository, name)


def _shared_stamps(
    store: Store, server_id: str | None = None, servers: Sequence[InstalledServer] | None = None
) -> dict[str, str]:
    """The stamps (``Values.env_stamps``) of the settings members' sessions share: each server's
    stored settings but its per-member keys (whose shared value no member's session uses).
    ``servers``: the store's records when the caller has them (else read here)."""
    if servers is None:
        found = store.servers.get(server_id) if server_id is not None else None
        servers = store.servers.list() if server_id is None else ([found] if found is not None else [])
    return store.values.env_stamps(server_id, leaving_out={s.server_id: s.member_keys for s in servers})


def _member_env(store: Store, member: str, server_id: str) -> dict[str, SecretValue]:
    values = store.values.env_values(server_id)
    server = store.servers.get(server_id)
    for key in server.member_keys if server is not None else ():
        values.pop(key, None)
    values.update(store.values.member_values(server_id, member))
    return values


class MemberConnections(ConnectionManager):
    """One member's sessions: a connection manager whose install dirs are that member's own
    working dirs (``<root>/<member>/<server_id>``) and whose bundles are the shared install's."""

    def __init__(self, shared: ConnectionManager, member: str, root: Path) -> None:
        super().__init__(
            _MemberStore(shared.store, member),  # type: ignore[arg-type]
            shared.redactor,
            install_root=root / member,
            host_env=shared.host_env,
            connect_timeout=shared.connect_timeout,
            backoff=(),  # a member's failed start is said at the call; the next call tries again
            ledger=shared.ledger,
            auth_for=shared.auth_for,
            bundles=shared.bundles,
            logs_dir=None,  # no log file: a member's server's stderr is not kept (redacted) on disk
            max_result_chars=shared.max_result_chars,
            max_call_notifications=shared.max_call_notifications,
            sandbox=shared.sandbox,
            relay_rules=shared.relay_rules,  # a member's answers to a server pass the same guard
            retry_wait=shared.forwarding.held.wait,
        )
        self.member = member
        self._shared = shared
        self.stamps: dict[str, str] = {}  # server_id -> the member's values' stamp its session started with
        self.born: dict[str, int] = {}  # server_id -> the sessions' epoch at its last call check

    def bundle_dir(self, server_id: str) -> Path:
        return self._shared.bundle_dir(server_id)

    def live_ids(self) -> list[str]:
        return list(self._live)

    def outdated(self, server: InstalledServer, shared: Mapping[str, str]) -> str | None:
        """Why its live session of ``server`` must not go on (None: it may): a shared setting
        stored since it started (``shared``: :func:`_shared_stamps`), or another launch."""
        live = self._live.get(server.server_id)
        if live is None:
            return None
        if live.values_stamp is not None and live.values_stamp != shared.get(server.server_id, ""):
            return "a shared setting was replaced"
        if not same_start(live.server.launch_spec, server.launch_spec):
            return "its launch changed"
        return None


class MemberSessions:
    """Members' own sessions and the asking for their values (see the module doc)."""

    def __init__(
        self,
        shared: ConnectionManager,
        *,
        root: Path,
        ttl_seconds: float = 900.0,
        wait_seconds: float = 300.0,
        replicas: MemberPromptReplicas | None = None,
    ) -> None:
        """``replicas``: where else a member's prompt is answered (a team's other replicas; default none)."""
        self.shared = shared
        self.store: Store = shared.store
        self.redactor = shared.redactor
        self.root = root
        self._tokens = self.store.tokens
        self.prompts = MemberPrompts(
            self.store,
            self.redactor,
            ttl_seconds=ttl_seconds,
            wait_seconds=wait_seconds,
            is_active=self._active,
            on_stored=self._stored,
            replicas=replicas,
        )
        self._members: dict[str, MemberConnections] = {}
        self._secrets: list[tuple[str, str]] = []
        self.redactor.add_source(lambda: self._secrets)
        self._lock = asyncio.Lock()
        self._swept = False
        self._epoch = 0

    def _active(self, member: str) -> bool:
        return any(t.name == member and t.active for t in self._tokens.list())

    def manager(self, member: str) -> MemberConnections:
        if member not in self._members:
            self._members[member] = MemberConnections(self.shared, member, self.root)
        return self._members[member]

    async def connections_for(
        self, server: InstalledServer, member: str, caller: Caller | None
    ) -> ConnectionManager | dict[str, Any]:
        """The member's own connection manager for a call to ``server``, once they have a value for
        every per-member key; else the tool error that says they were asked (out of band)."""
        for _ in range(2 * len(server.member_keys) + 2):
            have = (await asyncio.to_thread(self.store.values.member_keys_set, member)).get(server.server_id, [])
            missing = [k for k in server.member_keys if k not in have]
            if not missing:
                break
            error = await self.prompts.ask(server, member, missing[0], caller)
            if error is not None:
                return error
        else:
            text = f"{server.title or server.qualified_name}: your own settings could not be stored; call again."
            return tool_error(text, MEMBER_SECRET_REQUIRED)
        manager = self.manager(member)
        stamps = await asyncio.to_thread(self.store.values.member_stamps)
        stamp = stamps.get((server.server_id, member))
        shared = await asyncio.to_thread(_shared_stamps, self.store, server.server_id, [server])
        if server.server_id in manager.live_ids() and (
            manager.stamps.get(server.server_id) != stamp or manager.outdated(server, shared) is not None
        ):
            # Their value rotated, a shared one was replaced, or its launch changed since it
            # started (in any process, maybe a moment ago): it starts with the new ones.
            await manager.disconnect(server.server_id)
        manager.stamps[server.server_id] = stamp or ""
        self._epoch += 1
        manager.born[server.server_id] = self._epoch
        return manager

    async def _stored(self, server_id: str, member: str) -> None:
        await self.learn_secrets()

    async def learn_secrets(self) -> None:
        """Teach the redactor every member's value (in every form), as it knows the shared ones."""
        rows = await asyncio.to_thread(self.store.values.member_secrets)
        self._secrets = [(f"[secret:{key}]", value.reveal()) for _member, key, value in rows]
        self.redactor.invalidate()

    async def sync(self, servers: Sequence[InstalledServer]) -> None:
        """After a store change: end the sessions whose server went, was disabled or lost its
        per-member keys, those whose member's values changed or went (a revoked token), and every
        member's session of a server whose shared settings or launch changed."""
        async with self._lock:
            seen_at = self._epoch  # a session begun after the stamps are read is not judged by them
            await self.learn_secrets()
            stamps = await asyncio.to_thread(self.store.values.member_stamps)
            shared = await asyncio.to_thread(_shared_stamps, self.store, None, servers)
            if not self._swept:  # what a crash left of members whose values went meanwhile
                self._swept = True
                await asyncio.to_thread(self._sweep, {m for _sid, m in stamps})
            wanted = {s.server_id: s for s in servers if s.enabled and s.member_keys}
            for member, manager in list(self._members.items()):
                for server_id in manager.live_ids():
                    if manager.born.get(server_id, 0) > seen_at:
                        continue
                    stamp = stamps.get((server_id, member))
                    why = "its member's values or its server changed"
                    if server_id in wanted and stamp is not None and stamp == manager.stamps.get(server_id):
                        why = manager.outdated(wanted[server_id], shared) or ""
                        if not why:
                            manager.renew(wanted[server_id])  # e.g. what it may ask the person's AI
                            continue
                    logger.info("ending the own session of token:%s with server %s: %s", member, server_id, why)
                    await manager.disconnect(server_id)
                    manager.stamps.pop(server_id, None)
                    if stamp is None:  # their values are gone: so is what their server kept on disk
                        await asyncio.to_thread(shutil.rmtree, manager.install_dir(server_id), True)
                if not any(m == member for _sid, m in stamps):
                    if not await asyncio.to_thread(self._active, member):
                        self.prompts.forget_member(member)  # revoked: an open prompt stores nothing
                    if not manager.live_ids():
                        del self._members[member]
                        await asyncio.to_thread(shutil.rmtree, self.root / member, True)

    def _sweep(self, keep: set[str]) -> None:
        if self.root.is_dir():
            for path in self.root.iterdir():
                if path.name not in keep and path.name not in self._members:
                    shutil.rmtree(path, True)

    async def stop_idle(self, idle_seconds: float) -> None:
        for manager in list(self._members.values()):
            await manager.stop_idle(idle_seconds)

    async def aclose(self) -> None:
        self.prompts.close()
        await asyncio.gather(*(m.aclose() for m in list(self._members.values())))
