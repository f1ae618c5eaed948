"""One installed server's live connection (:class:`LiveConnection`): its status, its client,
the secrets it taught the redactor, and the loop that starts the server (or takes over the
session its install tested), lists and records its tools, holds the session until it is
stopped, dies or loses its sign-in, and reconnects with backoff. The
:class:`~setup_agent.gateway.connections.ConnectionManager` owns one per live server and is its
``owner``: the settings, the store and the redactor come from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import weakref
from typing import Any, Protocol

from setup_agent.errors import SetupError
from setup_agent.launch import (
    LaunchSpec,
    NetRecord,
    ProcessWatch,
    list_all_tools,
    materialize,
    open_client,
    refused_words,
    tool_dicts,
)
from setup_agent.secrets import SecretValue
from setup_agent.store import InstalledServer
from setup_agent.translation import translate

from .offers import record_offers
from .passthrough import modern
from .relay import InFlight, relay_callbacks
from .relay_rules import Origin
from .relisting import Relisting
from .resume import Checked, files_of
from .server_logs import ServerLog
from .status import ServerStatus, Status

__all__ = ["LiveConnection", "Owner"]

logger = logging.getLogger(__name__)


class Owner(Protocol):
    """What a live connection takes from its manager (the
    :class:`~setup_agent.gateway.connections.ConnectionManager`, which imports this module)."""

    store: Any
    redactor: Any
    ledger: Any
    bundles: Any
    slots: Any
    logs_dir: Any
    install_dir: Any
    bundle_dir: Any
    bundle_folder: Any  # await bundle_folder(server, spec): an MCPB bundle's folder, unpacked here if need be
    host_env: Any
    auth_for: Any
    sandbox: Any
    connect_timeout: float
    fetcher: Any  # the download phase (setup_agent/launch/fetch.py), or None
    backoff: Any
    on_tools_changed: Any

    def announce(self, status: ServerStatus) -> None: ...

    relay_rules: Any  # what the relay checks (relay_rules.RelayRules)
    server_log: Any  # await server_log(server, params): a log message outside calls (relay.IdleLogs)
    resource_updated: Any  # await resource_updated(server_id, uri): a subscribed resource changed (relay.Updates)


class LiveConnection:
    """One server's session and its reconnect loop (:meth:`run`, a task of the manager)."""

    def __init__(
        self, owner: Owner, server: InstalledServer, *, adopted: Any = None, rested: Checked | None = None
    ) -> None:
        self.owner = owner
        self.server = server
        self.status = ServerStatus(server.server_id)
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()
        self.changed = asyncio.Event()
        self.client: Any = None
        self.pid: int | None = None
        self.secrets: list[SecretValue] = []  # what it taught the redactor, forgotten when it ends
        self.last_used = 0.0
        self.adopted = adopted  # a tested session (setup_agent/adoption.Parked) to use as the first connection
        #: What the start before its idle stop checked (resume.py): its first start lists nothing
        #: again when that still holds. ``checked``: what this one's start checked, for the next.
        self.rested = rested
        self.checked: Checked | None = None
        self.log: ServerLog | None = None  # the current attempt's stderr log file
        self.removed = False  # the server is removed: its log is not written again (discard_log)
        #: The calls in flight: the server's requests go to the caller of the one that caused them (relay.py).
        self.icon_of: Any = None  # the serverInfo of its latest start (its icon), None before
        #: Reads its lists again when the server says they changed (relisting.py).
        self.relisting = Relisting(server.title or server.qualified_name)
        self.inflight = InFlight(Origin.of(server), owner.relay_rules, self.relisting)
        self.downloading = False  # its package is being fetched (the download phase)
        self.started_at: float | None = None  # when the latest start began (after any download)
        #: ``await listener(elapsed, fetched)`` about once a second while its package downloads.
        self.download_listeners: list[Any] = []
        #: What its proxy saw in the current start (None: not proxied, or not started yet).
        self.net_record: NetRecord | None = None
        #: The resources clients subscribed to at it (the idle stop spares it while there are any).
        self.subscriptions: set[str] = set()
        #: The stamp of its stored settings when its latest start read them (None: not read yet):
        #: a sync that finds another one restarts it with the new values (a replaced key).
        self.values_stamp: str | None = None
        self._told: set[asyncio.Task[None]] = set()
        #: A 2025-11-25 session of the same server beside a 2026-07-28 one, for the calls of
        #: 2025-era clients (:meth:`classic`): opened on the first such call, closed with the main.
        self._classic_open: Any = None  # () -> the open_client context of the current start, or None
        #: (its task, the event that ends it, its client once open)
        self._classic: tuple[asyncio.Task[None], asyncio.Event, asyncio.Future[Any]] | None = None
        self._classic_lock = asyncio.Lock()
        #: The 2025 clients using it (their sessions' ends close it), or kept open for one whose
        #: end cannot be known (:meth:`_used_by`).
        self._classic_users: weakref.WeakSet[Any] = weakref.WeakSet()
        self._classic_kept = False
        self._background: set[asyncio.Task[None]] = set()

    def _refused(self, attempt: Any) -> None:
        """Its proxy refused a new destination: the person hears it in ``mcp-setup logs`` and
        through the gateway's log relay, with the one step that allows it."""
        words = refused_words(attempt, self.server.slug)
        logger.warning("%s", words)
        if self.log is not None:
            self.log.feed(f"mcp-setup: {words}\n".encode())
        params = {"level": "warning", "logger": "mcp-setup", "data": words}
        task = asyncio.get_running_loop().create_task(self.owner.server_log(self.server, params))
        self._told.add(task)
        task.add_done_callback(self._told.discard)

    def begin(self) -> None:
        """Start :meth:`run` as the manager's task for this server."""
        self.task = asyncio.create_task(self.run(), name=f"mcp-setup-conn-{self.server.server_id}")

    def touch(self) -> None:
        """A call used it now (the idle stop counts from here)."""
        self.last_used = asyncio.get_running_loop().time()

    def busy(self) -> bool:
        """Whether stopping it now would break something a client waits on: a call in flight, or a
        resource a client subscribed to (its updates would stop)."""
        return self.inflight.busy() or bool(self.subscriptions)

    def renew(self, server: InstalledServer) -> None:
        """Its latest record from the store (e.g. a newly approved tool list, or the person's
        sampling setting: its next request is judged by it), the same launch."""
        self.server = server
        self.inflight.speak_for(self._origin(), None)

    def _origin(self) -> Origin:
        """Who its relayed requests come from: its latest record, with its icon once it answered."""
        return Origin.of(self.server).with_icon(self.icon_of)

    def set(self, status: Status, reason: str | None = None, code: str | None = None) -> None:
        self.status.status = status
        self.status.reason = reason
        self.status.code = code
        if status in ("failed", "stopped", "needs_sign_in"):
            self.status.tools = []  # a reconnect ("connecting") keeps showing what it had
        self.changed.set()
        self.owner.announce(self.status)

    def discard_log(self) -> None:
        """The server is removed: what it prints while it stops must not recreate its log."""
        self.removed = True
        if self.log is not None:
            self.log.discard()

    def forget_secrets(self) -> None:
        for value in self.secrets:
            self.owner.redactor.unregister(value)
        self.secrets.clear()

    async def _values(self) -> dict[str, SecretValue]:
        """Its stored values, masked (the launch reveals them); the secret ones taught to the redactor.
        Their stamp is read first: a value written in between only means one more restart."""
        sid = self.server.server_id
        self.values_stamp = (await asyncio.to_thread(self.owner.store.values.env_stamps, sid)).get(sid, "")
        stored = await asyncio.to_thread(self.owner.store.values.env_values, sid)
        secret_keys = {k.key for k in self.server.env_keys if k.secret}
        for key, value in stored.items():
            if key in secret_keys:
                self.owner.redactor.register(value, f"[secret:{key}]")
                self.secrets.append(value)
        return dict(stored)

    async def run(self) -> None:
        owner = self.owner
        server = self.server
        attempt = 0
        while not self.stop.is_set():
            self.status.attempts = attempt + 1
            self.set("connecting")
            log = (
                ServerLog(owner.logs_dir, server.server_id, owner.redactor)
                if owner.logs_dir and not self.removed
                else None
            )
            self.log = log
            pwatch = ProcessWatch(on_stderr=log.feed if log else None)
            auth: Any = None
            try:
                async with owner.slots:
                    spec = LaunchSpec.model_validate(server.launch_spec)
                    values = await self._values()
                    known: list[dict[str, Any]] | None = None  # tools listed (and stored) by the install
                    files: str | None = None  # what it runs from (resume.py), when it can be told
                    resumed = False  # started again after its idle stop, nothing changed: nothing to list
                    if self.adopted is not None:  # the tested process, still running: no second start
                        cm: Any = self.adopted.session()
                        if getattr(self.adopted, "inflight", None) is not None:  # its relay serves our calls
                            self.inflight = self.adopted.inflight
                            self.inflight.speak_for(self._origin(), owner.relay_rules, self.relisting)
                        self.net_record = getattr(self.adopted.result, "net", None)
                        if self.net_record is not None:  # the tested process's proxy now tells the person
                            self.net_record.on_refused = self._refused
                        pwatch, known, self.adopted = self.adopted.pwatch, self.adopted.result.tools, None
                        if not spec.needs_install_dir or owner.bundle_dir(server.server_id).is_dir():
                            install_dir = owner.install_dir(server.server_id)  # the test ran in a scratch dir
                            await asyncio.to_thread(install_dir.mkdir, parents=True, exist_ok=True)
                            dirname = str(owner.bundle_dir(server.server_id)) if spec.needs_install_dir else None
                            resolved = materialize(spec, values, dirname=dirname, cwd=str(install_dir))
                            twin_auth = owner.auth_for(server, values) if owner.auth_for is not None else None
                            self._classic_open = self._legacy(resolved, twin_auth)
                    else:
                        if owner.fetcher is not None and not owner.fetcher.is_warm(spec):
                            await self._download(spec)  # its own deadline; the start's counts from its end
                        install_dir = owner.install_dir(server.server_id)
                        await asyncio.to_thread(install_dir.mkdir, parents=True, exist_ok=True)
                        dirname = await owner.bundle_folder(server, spec)  # unpacked here first if need be
                        resolved = materialize(spec, values, dirname=dirname, cwd=str(install_dir))
                        # Looked at before it starts: what it writes while it runs is seen by the next start.
                        files = await asyncio.to_thread(files_of, resolved, install_dir)
                        rested, self.rested = self.rested, None  # once: a restart after a crash lists again
                        if rested is not None and server.tools_recorded:
                            if rested.holds_for(server.launch_spec, self.values_stamp or "", files):
                                known, resumed = list(server.tools), True  # as its running session had them
                        auth = owner.auth_for(server, values) if owner.auth_for is not None else None
                        self.net_record = NetRecord(on_refused=self._refused)
                        cm = open_client(
                            resolved,
                            process_watch=pwatch,
                            host_env=owner.host_env,
                            ledger=owner.ledger,
                            auth=auth,
                            sandbox=owner.sandbox,
                            direct=owner.direct,
                            net_record=self.net_record,
                            callbacks=relay_callbacks(
                                self.inflight,
                                owner.redactor,
                                server.title or server.qualified_name,
                                idle_log=lambda params: owner.server_log(server, params),
                                updated=lambda uri: owner.resource_updated(server.server_id, uri),
                            ),
                        )
                        self._classic_open = self._legacy(resolved, auth)
                    self.started_at = asyncio.get_running_loop().time()
                    async with asyncio.timeout(owner.connect_timeout):
                        client = await cm.__aenter__()
                try:
                    self.icon_of = getattr(client, "server_info", None)  # its icon, beside its name in a page
                    self.inflight.speak_for(self._origin(), None)
                    if known is None:
                        async with asyncio.timeout(owner.connect_timeout):
                            tools = await list_all_tools(client)
                    self.client = client
                    self.pid = pwatch.pid
                    self.status.tools = owner.redactor.redact_obj(tool_dicts(tools) if known is None else known)
                    self.last_used = asyncio.get_running_loop().time()
                    attempt = 0
                    if known is None:
                        await self._record_tools()
                    if not resumed:  # else the store holds what it offered when it stopped
                        await record_offers(
                            client, owner.store, owner.redactor, server.server_id, server.title or server.qualified_name
                        )
                    if files is not None and self.values_stamp is not None:
                        self.checked = Checked(server.launch_spec, self.values_stamp, files)
                    self.set("connected")
                    if server.needs_sign_in:
                        await self._remember_sign_in(server, needed=False)
                    await self._hold(client, pwatch, getattr(auth, "signed_out", None))
                finally:
                    self.client = None
                    await self._close_classic()
                    self._classic_open = None
                    await cm.__aexit__(None, None, None)
                if self.stop.is_set():
                    break
                reason, code = f"the server exited (code {pwatch.returncode})", "exited"
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - reported as status
                if log is not None:
                    log.close()
                err, code = _describe(exc), _code(exc)
                tail = pwatch.stderr_tail(300)
                reason = owner.redactor.redact(err + (f"; last output: {tail}" if tail else ""))
                logger.warning("server %s failed: %s", server.server_id, reason)
            if self.stop.is_set():
                break
            if auth is not None and getattr(auth, "signed_out", None) is not None and auth.signed_out.is_set():
                why = owner.redactor.redact(auth.signed_out_reason)
                logger.warning("server %s (%s) needs sign-in: %s", server.server_id, server.qualified_name, why)
                await self._remember_sign_in(server, needed=True)  # `mcp-setup list` says so too
                self.set("needs_sign_in", why)
                break  # retrying cannot help: the user must sign in again
            self.set("failed", reason, code)
            if attempt >= len(owner.backoff):
                break
            delay = owner.backoff[attempt]
            attempt += 1
            try:
                await asyncio.wait_for(self.stop.wait(), timeout=delay)
            except TimeoutError:
                continue
        if self.adopted is not None:  # stopped before it used the tested session
            await self.adopted.close()
        if self.stop.is_set():
            self.set("stopped", self.status.reason)
        self.forget_secrets()

    async def classic(self, caller: Any = None) -> Any:
        """The client for a call of a 2025-11-25 client (``caller``): the main one when it speaks
        that era (or when no second session can be opened: a bundle this machine has not
        unpacked); else a 2025-11-25 session of the same server beside it. On a 2026-07-28
        session a server has no back-channel for its requests during a call (sampling,
        elicitation, roots), nor ``resources/subscribe``; a 2025 client keeps both this way, and
        the tools' ``execution``.

        Why a local server then runs as a second process: a stdio server has one connection (its
        stdin and stdout), and a connection speaks one era, decided by its first request (the
        SDK's ``serve_dual_era_loop``: an ``initialize`` on a 2026-07-28 connection is refused,
        an enveloped request on a 2025 one too). Speaking 2025-11-25 to it for everyone would
        cost 2026 clients the server's own input-required results and its listen stream. So the
        second session (a second process for a local server; a second HTTP session for a remote
        one) opens on the first call of a 2025 client, and closes once the last 2025 client that
        used it has gone (its session ended, :meth:`_used_by`), or with the main one."""
        client = self.client
        if client is None or not modern(client) or self._classic_open is None:
            return client
        async with self._classic_lock:
            if self._classic is None or self._classic[0].done():  # none yet, or it ended (the server died)
                opened: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                stop = asyncio.Event()
                task = asyncio.create_task(
                    self._hold_classic(opened, stop), name=f"mcp-setup-classic-{self.server.server_id}"
                )
                self._classic = (task, stop, opened)
            task, _stop, opened = self._classic
            self._used_by(caller)
            async with asyncio.timeout(self.owner.connect_timeout):
                return await asyncio.shield(opened)

    def _used_by(self, caller: Any) -> None:
        """``caller``'s client uses the 2025-11-25 session: it stays open while such a client's
        session lasts (``caller.when_gone(callback)`` tells its end); one whose end cannot be
        known keeps it open until the main session closes."""
        who = getattr(caller, "client", None)
        if who is None or self._classic_kept:
            self._classic_kept = True
            return
        if who in self._classic_users:
            return
        when_gone = getattr(caller, "when_gone", None)
        if callable(when_gone) and when_gone(lambda: self._gone(who)):
            self._classic_users.add(who)
        else:
            self._classic_kept = True

    def _gone(self, who: Any) -> None:
        """A 2025 client's session ended: the last one closes the 2025-11-25 session."""
        self._classic_users.discard(who)
        if not self._classic_users and not self._classic_kept and self._classic is not None:
            task = asyncio.get_running_loop().create_task(self._end_classic())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _end_classic(self) -> None:
        async with self._classic_lock:
            if self._classic_users or self._classic_kept:  # another 2025 client came meanwhile
                return
            logger.info(
                "server %s: its last 2025-era client left; its 2025-11-25 session closes", self.server.server_id
            )
            await self._close_classic()

    def _legacy(self, resolved: Any, auth: Any) -> Any:
        """How to open the 2025-11-25 session of the current start (:meth:`classic`)."""
        owner, server = self.owner, self.server
        return functools.partial(
            open_client,
            resolved,
            mode="legacy",
            host_env=owner.host_env,
            ledger=owner.ledger,
            auth=auth,
            sandbox=owner.sandbox,
            direct=owner.direct,
            net_record=self.net_record,
            callbacks=relay_callbacks(
                self.inflight,
                owner.redactor,
                server.title or server.qualified_name,
                idle_log=lambda params: owner.server_log(server, params),
                updated=lambda uri: owner.resource_updated(server.server_id, uri),
            ),
        )

    def classic_if_open(self) -> Any:
        """Its 2025-11-25 session beside the main one, when one is open (else None)."""
        if self._classic is None or self._classic[0].done() or not self._classic[2].done():
            return None
        opened = self._classic[2]
        return None if opened.cancelled() or opened.exception() is not None else opened.result()

    async def _hold_classic(self, opened: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """The 2025-11-25 session's own task (its context is entered and left in one task)."""
        try:
            async with self._classic_open() as client:
                logger.info("server %s: a 2025-11-25 session opened for 2025-era clients", self.server.server_id)
                opened.set_result(client)
                await stop.wait()
        except Exception as exc:  # noqa: BLE001 - the next 2025-era call tries again
            logger.info("server %s: its 2025-11-25 session ended: %s", self.server.server_id, type(exc).__name__)
            if not opened.done():
                opened.set_exception(exc)

    async def _close_classic(self) -> None:
        classic, self._classic = self._classic, None
        self._classic_users.clear()
        self._classic_kept = False
        if classic is not None:
            task, stop, _opened = classic
            stop.set()
            with contextlib.suppress(Exception):
                await task

    async def wait_started(self, timeout: float, progress: Any = None) -> ServerStatus:
        """Wait until it settles: at most ``timeout`` from its start (a download phase before it
        is not counted; ``progress(elapsed, None, message)`` hears it)."""
        loop = asyncio.get_running_loop()
        called, label = loop.time(), self.server.title or self.server.qualified_name

        async def tick(elapsed: float, fetched: int) -> None:
            if progress is not None:
                await progress(elapsed, None, f"{label}: downloading its package ({fetched} fetched, {elapsed:.0f} s)")

        self.download_listeners.append(tick)
        try:
            while self.status.status == "connecting":
                remaining = None if self.downloading else max(called, self.started_at or called) + timeout - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self.changed.wait()
        finally:
            self.download_listeners.remove(tick)
        return self.status

    async def _download(self, spec: LaunchSpec) -> None:
        """The download phase of a start (as a test has it, setup_agent/launch/fetch.py): its own
        deadline, ticks to whoever waits (a call's progress); a failed fetch lets the start say why."""
        from setup_agent.errors import DownloadTimeout

        fetcher = self.owner.fetcher
        self.downloading, self.status.reason = True, "downloading its package"
        self.changed.set()

        async def tick(elapsed: float, fetched: int) -> None:
            for listener in list(self.download_listeners):
                await listener(elapsed, fetched)

        try:
            state = await fetcher.fetch(spec, tick)
            if state is not None and (error := state.error()) is not None:
                raise error  # the runner named why (no network, no such package…): said now, not as a crash
        except TimeoutError:
            raise DownloadTimeout(
                f"Downloading the package took longer than {fetcher.timeout:g} seconds "
                "(MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS). The next call tries again: what arrived stays in the cache."
            ) from None
        finally:
            self.downloading, self.status.reason = False, None
            self.started_at = asyncio.get_running_loop().time()  # the start's deadline counts from here
            self.changed.set()

    async def _remember_sign_in(self, server: InstalledServer, *, needed: bool) -> None:
        try:
            await asyncio.to_thread(self.owner.store.servers.set_needs_sign_in, server.server_id, needed)
        except SetupError as exc:  # removed meanwhile, or the database is away: the status still says it
            logger.info("could not record the sign-in state of %s: %s", server.server_id, exc.code)

    async def _record_tools(self) -> None:
        """The store keeps each server's latest tool list: listing never waits for a spawn.

        What the status then shows is the store's exposed list (the approved forms, pins.py), so
        a tool the user has not approved reaches no face's tool list."""
        owner = self.owner
        try:
            await asyncio.to_thread(owner.store.pins.set_tools, self.server.server_id, self.status.tools)
            server = await asyncio.to_thread(owner.store.servers.get, self.server.server_id)
        except SetupError as exc:  # e.g. removed meanwhile: the session still works
            logger.info("could not record the tools of %s: %s", self.server.server_id, exc.code)
            self.status.tools = []
            return
        if server is None:
            self.status.tools = []
            return
        if server.launch_spec == self.server.launch_spec:
            # its record now, tools included: a call routed by a catalog that already lists them
            # must not be refused as unknown by the record read before they were recorded
            self.renew(server)
        self.status.tools = list(server.tools)
        change = server.tools_change()
        if change is not None and change["state"] == "changed":
            logger.warning(
                "the tools of %s changed since they were approved (%s): held back until the user approves "
                "(web page, or `mcp-setup tools-review`)",
                server.qualified_name,
                owner.redactor.redact(change["summary"]),
            )
            if owner.on_tools_changed is not None:
                try:
                    owner.on_tools_changed(server)
                except Exception:  # noqa: BLE001 - never break a connection
                    logger.exception("tools-changed listener failed")

    async def _relist(self, client: Any, kinds: frozenset[str]) -> None:
        """The server said these lists changed: read and record them again (the pins hold a
        changed or new tool for the user; the store's change counter tells the gateways)."""
        owner = self.owner
        if "tools" in kinds:
            async with asyncio.timeout(owner.connect_timeout):
                tools = await list_all_tools(client)
            self.status.tools = owner.redactor.redact_obj(tool_dicts(tools))
            await self._record_tools()
        if kinds & {"prompts", "resources"}:
            label = self.server.title or self.server.qualified_name
            await record_offers(client, owner.store, owner.redactor, self.server.server_id, label)

    async def _hold(self, client: Any, pwatch: ProcessWatch, signed_out: asyncio.Event | None = None) -> None:
        """Wait until asked to stop, until the server process dies, or until its sign-in is gone;
        meanwhile its lists are read again when it says they changed."""
        waiters = [asyncio.ensure_future(self.stop.wait())]
        relisting = asyncio.ensure_future(self.relisting.serve(client, lambda kinds: self._relist(client, kinds)))
        if pwatch.pid is not None:
            waiters.append(asyncio.ensure_future(pwatch.exited.wait()))
        if signed_out is not None:
            waiters.append(asyncio.ensure_future(signed_out.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
            relisting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await relisting


def _code(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return "timeout" if isinstance(exc, TimeoutError) else translate(exc).code


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "the server did not answer in time"
    err = translate(exc)
    if type(err) is SetupError:
        return f"{type(exc).__name__}: {exc}"
    return err.message
