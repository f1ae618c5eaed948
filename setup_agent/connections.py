"""The connection manager: live sessions to every installed, enabled server.

At start it connects every enabled server concurrently (bounded). Each connection lives in
its own task holding an ``mcp.Client``; a server that dies is reconnected with backoff.
Decrypted values are handed to the redactor while a server uses them, so nothing a server
prints or returns can carry them out.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .bundle_cache import BundleCache
from .connector import list_all_tools, open_client, tool_dicts
from .errors import NotFound, SetupError, translate
from .launch import LaunchSpec, materialize
from .procs import ProcessLedger
from .redact import Redactor
from .server_logs import ServerLog
from .store import InstalledServer, Store
from .transport import ProcessWatch

__all__ = ["ConnectionManager", "ServerStatus"]

logger = logging.getLogger(__name__)

Status = Literal["connecting", "connected", "failed", "stopped", "needs_sign_in"]

#: ``auth_for(server, values)``: an ``httpx2.Auth`` for a remote that signed in (OAuth), or None.
#: It may carry ``signed_out`` (an ``asyncio.Event``) and ``signed_out_reason``: once set, the
#: server is ``needs_sign_in`` and is not retried (see setup_agent/oauth.py).
AuthHook = Callable[[InstalledServer, dict[str, str]], Any]


@dataclass
class ServerStatus:
    server_id: str
    status: Status = "connecting"
    reason: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    #: The stable error code of the last failure (``exited``, ``timeout``, ``rejected``, …).
    code: str | None = None

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "tools": self.tools}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class _Live:
    server: InstalledServer
    status: ServerStatus
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    client: Any = None
    pid: int | None = None
    secrets: list[str] = field(default_factory=list)
    last_used: float = 0.0
    adopted: Any = None  # a tested session (setup_agent/adoption.Parked) to use as the first connection


class ConnectionManager:
    """Owns the live sessions. ``install_root/<server_id>`` is each server's install dir."""

    def __init__(
        self,
        store: Store,
        redactor: Redactor,
        *,
        install_root: Path,
        host_env: Mapping[str, str] | None = None,
        max_concurrency: int = 8,
        backoff: Sequence[float] = (1.0, 2.0, 5.0, 15.0, 60.0),
        connect_timeout: float = 60.0,
        on_status: Callable[[ServerStatus], None] | None = None,
        ledger: ProcessLedger | None = None,
        auth_for: AuthHook | None = None,
        bundles: BundleCache | None = None,
        logs_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.bundles = bundles  # an MCPB bundle this machine has not unpacked (installed elsewhere)
        self.logs_dir = logs_dir  # <logs_dir>/<server_id>.log: each server's stderr, redacted
        self.ledger = ledger  # records each server's process group (crash safety)
        self.redactor = redactor
        self.install_root = install_root
        self.host_env = host_env
        self.backoff = tuple(backoff)
        self.connect_timeout = connect_timeout
        self.auth_for = auth_for
        self._listeners: list[Callable[[ServerStatus], None]] = [on_status] if on_status is not None else []
        self._sem = asyncio.Semaphore(max_concurrency)
        self._live: dict[str, _Live] = {}
        #: Servers an install of this process is about to connect (see ``expect``): a store sync
        #: does not start them meanwhile, so the install's own (possibly adopted) session is the one.
        self._expected: set[str] = set()
        self._booting = False
        self._booted = asyncio.Event()
        # Every stored secret of every installed server, for the redactor (not only live ones):
        # an installed server may print another's secret, or its own before it connected.
        self._stored_secrets: list[tuple[str, str]] = []
        redactor.add_source(lambda: self._stored_secrets)
        #: Called with the store's record when a server's live tools differ from its pin beyond
        #: whitespace (pins.py): the face asks the user out of band (runtime wires ToolReview).
        self.on_tools_changed: Callable[[InstalledServer], None] | None = None

    def add_status_listener(self, listener: Callable[[ServerStatus], None]) -> Callable[[], None]:
        """Hear every status change; returns a function that stops listening."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def install_dir(self, server_id: str) -> Path:
        return self.install_root / server_id

    def bundle_dir(self, server_id: str) -> Path:
        """Where an MCPB bundle is unpacked: its ``${__dirname}``."""
        return self.install_dir(server_id) / "bundle"

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        """Connect every enabled installed server, concurrently; returns when all settled."""
        self._booting = True
        try:
            servers = await asyncio.to_thread(self.store.list, enabled_only=True)
            for server in servers:
                await self.connect(server, wait=False)
        finally:
            self._booted.set()
        await asyncio.gather(*(self.wait_settled(s.server_id) for s in servers if s.server_id in self._live))

    def expect(self, server_id: str, expected: bool = True) -> None:
        """An install is about to commit ``server_id`` and connect it: ``sync`` leaves it alone
        until ``connect`` (or ``expect(server_id, False)`` when the install failed)."""
        (self._expected.add if expected else self._expected.discard)(server_id)

    async def connect(self, server: InstalledServer, *, wait: bool = True, adopt: Any = None) -> ServerStatus:
        """Start (or restart) the session for ``server``; with ``wait``, until it settles.

        ``adopt``: a parked tested session (:class:`setup_agent.adoption.Parked`) of this server,
        already running in its install dir: it becomes the connection, no second start."""
        while server.server_id in self._live:  # another connect may slip in while one is stopped
            await self.disconnect(server.server_id)
        self._expected.discard(server.server_id)
        live = _Live(server, ServerStatus(server.server_id), adopted=adopt)
        self._live[server.server_id] = live
        live.task = asyncio.create_task(self._run(live), name=f"mcp-setup-conn-{server.server_id}")
        if wait:
            await self.wait_settled(server.server_id)
        return live.status

    async def wait_settled(self, server_id: str, timeout: float | None = None) -> ServerStatus:
        live = self._get(server_id)
        limit = timeout if timeout is not None else self.connect_timeout + 10
        async with asyncio.timeout(limit):
            while live.status.status == "connecting":
                live.changed.clear()
                await live.changed.wait()
        return live.status

    async def wait_all_settled(self, timeout: float) -> None:
        """Wait (bounded) until no server is still connecting; returns quietly on timeout."""
        try:
            async with asyncio.timeout(timeout):
                if self._booting:
                    await self._booted.wait()  # the boot may still be reading the store
                for server_id in list(self._live):
                    if server_id in self._live:
                        await self.wait_settled(server_id, timeout)
        except TimeoutError:
            pass

    async def wait_for_status(self, server_id: str, status: Status, timeout: float) -> ServerStatus:
        """Wait (bounded) until ``server_id`` reaches ``status``."""
        async with asyncio.timeout(timeout):
            while True:
                live = self._get(server_id)
                if live.status.status == status:
                    return live.status
                live.changed.clear()
                await live.changed.wait()

    async def disconnect(self, server_id: str) -> None:
        live = self._live.pop(server_id, None)
        if live is None:
            return
        live.stop.set()
        if live.task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(live.task), timeout=10)
            except (TimeoutError, asyncio.CancelledError):
                live.task.cancel()
        self._forget_secrets(live)

    async def remove(self, server_id: str, *, actor: str = "user") -> None:
        """Disconnect, delete the rows and env, and delete the install dir (``actor`` is audited)."""
        server = await asyncio.to_thread(self.store.get, server_id)
        if server is None:
            raise NotFound(f"No installed server has the id {server_id!r}. mcp_setup_list_servers lists them.")
        await self.disconnect(server_id)
        await asyncio.to_thread(lambda: self.store.remove(server_id, actor=actor))
        await asyncio.to_thread(shutil.rmtree, self.install_dir(server_id), True)

    async def aclose(self) -> None:
        await asyncio.gather(*(self.disconnect(sid) for sid in list(self._live)))

    # -- the gateway's needs ---------------------------------------------------------
    async def learn_stored_secrets(self) -> None:
        """Teach the redactor every stored secret value of every installed server."""
        rows = await asyncio.to_thread(self.store.secret_values)
        self._stored_secrets = [(f"[secret:{key}]", value.reveal()) for _sid, key, value in rows]
        self.redactor.invalidate()

    def mark_booting(self) -> None:
        """A boot is about to read the store: ``wait_all_settled`` waits for it (call before the
        boot task is scheduled, so a listing that arrives first does not see an empty manager)."""
        self._booting = True

    async def sync(self, servers: Sequence[InstalledServer], *, eager: bool) -> None:
        """Match the live sessions to ``servers`` (the store's): stop what is gone or disabled;
        with ``eager``, start every enabled server not yet live."""
        self._booting = True
        try:
            await self._sync(servers, eager=eager)
        finally:
            self._booted.set()

    async def _sync(self, servers: Sequence[InstalledServer], *, eager: bool) -> None:
        wanted = {s.server_id: s for s in servers if s.enabled}
        gone = [sid for sid in self._live if sid not in wanted]
        await asyncio.gather(*(self.disconnect(sid) for sid in gone))
        installed = {s.server_id for s in servers}
        for sid in gone:
            self._set_stopped(sid)
            if sid not in installed:  # removed by another process: its files here go too
                await asyncio.to_thread(shutil.rmtree, self.install_dir(sid), True)
        for server in wanted.values():
            live = self._live.get(server.server_id)
            if live is not None and live.server.launch_spec == server.launch_spec:
                live.server = server  # its latest record (e.g. a newly approved tool list, #16)
            # Lazy or not, a server whose tools were never recorded (installed by an older
            # mcp-setup) is started once so that they can be listed.
            if server.server_id in self._expected:
                continue  # its install connects it (one start, #17)
            if server.server_id not in self._live and (eager or not server.tools_recorded):
                await self.connect(server, wait=False)

    async def ensure_connected(self, server: InstalledServer, timeout: float) -> ServerStatus:
        """Start ``server`` unless it is live (or retrying), and wait (bounded) for it to settle.

        A server that gave up (failed with no retry left) or was stopped is started afresh.
        """
        live = self._live.get(server.server_id)
        if live is None or live.task is None or live.task.done() or live.status.status in ("failed", "stopped"):
            await self.connect(server, wait=False)
        live = self._live[server.server_id]
        live.last_used = asyncio.get_running_loop().time()
        try:
            return await self.wait_settled(server.server_id, timeout)
        except TimeoutError:
            return live.status

    async def stop_idle(self, idle_seconds: float) -> list[str]:
        """Stop connected servers unused for ``idle_seconds``; they start again on their next call."""
        now = asyncio.get_running_loop().time()
        idle = [
            sid for sid, live in self._live.items()
            if live.status.status == "connected" and now - (live.last_used or now) >= idle_seconds
        ]  # fmt: skip
        for sid in idle:
            logger.info("server %s idle for %.0f s: stopping it until its next call", sid, idle_seconds)
            await self.disconnect(sid)
        return idle

    def _set_stopped(self, server_id: str) -> None:
        self._announce(ServerStatus(server_id, status="stopped"))

    def _announce(self, status: ServerStatus) -> None:
        for listener in list(self._listeners):
            try:
                listener(status)
            except Exception:  # a listener must not break a connection
                logger.exception("status listener failed")

    # -- queries ----------------------------------------------------------------------
    def status(self, server_id: str) -> ServerStatus:
        live = self._live.get(server_id)
        return live.status if live else ServerStatus(server_id, status="stopped")

    def connected_server(self, server_id: str) -> InstalledServer | None:
        """The installed server behind a connected session, or None."""
        live = self._live.get(server_id)
        return live.server if live is not None and live.status.status == "connected" else None

    def pid(self, server_id: str) -> int | None:
        live = self._live.get(server_id)
        return live.pid if live else None

    def tools(self) -> dict[str, list[dict[str, Any]]]:
        """Tools of every connected server: what the main agent gets."""
        return {sid: live.status.tools for sid, live in self._live.items() if live.status.status == "connected"}

    async def call_tool(self, server_id: str, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        live = self._get(server_id)
        if live.status.status != "connected" or live.client is None:
            raise NotFound(f"Server {server_id} is not connected ({live.status.status}).")
        live.last_used = asyncio.get_running_loop().time()
        result = await live.client.call_tool(name, arguments or {})
        live.last_used = asyncio.get_running_loop().time()
        return self.redactor.redact_obj(result.model_dump(mode="json", by_alias=True, exclude_none=True))

    def _get(self, server_id: str) -> _Live:
        live = self._live.get(server_id)
        if live is None:
            raise NotFound(f"Server {server_id} is not running.")
        return live

    # -- one connection ---------------------------------------------------------------
    def _set(self, live: _Live, status: Status, reason: str | None = None, code: str | None = None) -> None:
        live.status.status = status
        live.status.reason = reason
        live.status.code = code
        if status in ("failed", "stopped", "needs_sign_in"):
            live.status.tools = []  # a reconnect ("connecting") keeps showing what it had
        live.changed.set()
        self._announce(live.status)

    def _forget_secrets(self, live: _Live) -> None:
        for value in live.secrets:
            self.redactor.unregister(value)
        live.secrets.clear()

    async def _values(self, live: _Live) -> dict[str, str]:
        stored = await asyncio.to_thread(self.store.env_values, live.server.server_id)
        secret_keys = {k.key for k in live.server.env_keys if k.secret}
        values: dict[str, str] = {}
        for key, value in stored.items():
            plain = value.reveal()
            values[key] = plain
            if key in secret_keys:
                self.redactor.register(plain, f"[secret:{key}]")
                live.secrets.append(plain)
        return values

    async def _run(self, live: _Live) -> None:
        server = live.server
        attempt = 0
        while not live.stop.is_set():
            live.status.attempts = attempt + 1
            self._set(live, "connecting")
            log = ServerLog(self.logs_dir, server.server_id, self.redactor) if self.logs_dir else None
            pwatch = ProcessWatch(on_stderr=log.feed if log else None)
            auth: Any = None
            try:
                async with self._sem:
                    spec = LaunchSpec.model_validate(server.launch_spec)
                    values = await self._values(live)
                    known: list[dict[str, Any]] | None = None  # tools listed (and stored) by the install
                    if live.adopted is not None:  # the tested process, still running: no second start
                        cm: Any = live.adopted.session()
                        pwatch, known, live.adopted = live.adopted.pwatch, live.adopted.result.tools, None
                    else:
                        install_dir = self.install_dir(server.server_id)
                        await asyncio.to_thread(install_dir.mkdir, parents=True, exist_ok=True)
                        if spec.needs_install_dir and not self.bundle_dir(server.server_id).is_dir():
                            await self._unpack_here(server, spec)  # installed by another machine
                        resolved = materialize(
                            spec,
                            values,
                            dirname=str(self.bundle_dir(server.server_id)) if spec.needs_install_dir else None,
                            cwd=str(install_dir),
                        )
                        auth = self.auth_for(server, values) if self.auth_for is not None else None
                        cm = open_client(
                            resolved, process_watch=pwatch, host_env=self.host_env, ledger=self.ledger, auth=auth
                        )
                    async with asyncio.timeout(self.connect_timeout):
                        client = await cm.__aenter__()
                try:
                    if known is None:
                        async with asyncio.timeout(self.connect_timeout):
                            tools = await list_all_tools(client)
                    live.client = client
                    live.pid = pwatch.pid
                    live.status.tools = self.redactor.redact_obj(tool_dicts(tools) if known is None else known)
                    live.last_used = asyncio.get_running_loop().time()
                    attempt = 0
                    if known is None:
                        await self._record_tools(live)
                    self._set(live, "connected")
                    if server.needs_sign_in:
                        await self._remember_sign_in(server, needed=False)
                    await self._hold(live, pwatch, getattr(auth, "signed_out", None))
                finally:
                    live.client = None
                    await cm.__aexit__(None, None, None)
                if live.stop.is_set():
                    break
                reason, code = f"the server exited (code {pwatch.returncode})", "exited"
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - reported as status
                if log is not None:
                    log.close()
                err, code = _describe(exc), _code(exc)
                tail = pwatch.stderr_tail(300)
                reason = self.redactor.redact(err + (f"; last output: {tail}" if tail else ""))
                logger.warning("server %s failed: %s", server.server_id, reason)
            if live.stop.is_set():
                break
            if auth is not None and getattr(auth, "signed_out", None) is not None and auth.signed_out.is_set():
                why = self.redactor.redact(auth.signed_out_reason)
                logger.warning("server %s (%s) needs sign-in: %s", server.server_id, server.qualified_name, why)
                await self._remember_sign_in(server, needed=True)  # `mcp-setup list` says so too
                self._set(live, "needs_sign_in", why)
                break  # retrying cannot help: the user must sign in again
            self._set(live, "failed", reason, code)
            if attempt >= len(self.backoff):
                break
            delay = self.backoff[attempt]
            attempt += 1
            try:
                await asyncio.wait_for(live.stop.wait(), timeout=delay)
            except TimeoutError:
                continue
        if live.adopted is not None:  # stopped before it used the tested session
            await live.adopted.close()
        if live.stop.is_set():
            self._set(live, "stopped", live.status.reason)
        self._forget_secrets(live)

    async def _unpack_here(self, server: InstalledServer, spec: LaunchSpec) -> None:
        """A bundle installed by another machine on the shared database: fetch it (the pinned
        sha256 is checked) and unpack it into this machine's install dir."""
        from .bundle import fetch_bundle, unpack_bundle

        logger.info("server %s: fetching its bundle for this machine", server.server_id)
        install_dir = self.install_dir(server.server_id)
        fetch = self.bundles.fetch if self.bundles is not None else fetch_bundle  # the cache, as install uses
        archive = await fetch(spec.identifier, spec.file_sha256, install_dir, allow_file=server.source == "local")
        try:
            await asyncio.to_thread(unpack_bundle, archive, self.bundle_dir(server.server_id))
        finally:
            await asyncio.to_thread(archive.unlink, True)

    async def _remember_sign_in(self, server: InstalledServer, *, needed: bool) -> None:
        try:
            await asyncio.to_thread(self.store.set_needs_sign_in, server.server_id, needed)
        except SetupError as exc:  # removed meanwhile, or the database is away: the status still says it
            logger.info("could not record the sign-in state of %s: %s", server.server_id, exc.code)

    async def _record_tools(self, live: _Live) -> None:
        """The store keeps each server's latest tool list: listing never waits for a spawn.

        What the status then shows is the store's exposed list (the approved forms, pins.py), so
        a tool the user has not approved reaches no face's tool list."""
        try:
            await asyncio.to_thread(self.store.set_tools, live.server.server_id, live.status.tools)
            server = await asyncio.to_thread(self.store.get, live.server.server_id)
        except SetupError as exc:  # e.g. removed meanwhile: the session still works
            logger.info("could not record the tools of %s: %s", live.server.server_id, exc.code)
            live.status.tools = []
            return
        if server is None:
            live.status.tools = []
            return
        live.status.tools = list(server.tools)
        change = server.tools_change()
        if change is not None and change["state"] == "changed":
            logger.warning(
                "the tools of %s changed since they were approved (%s): held back until the user approves "
                "(web page, or `mcp-setup tools-review`)", server.qualified_name, self.redactor.redact(change["summary"]),
            )  # fmt: skip
            if self.on_tools_changed is not None:
                try:
                    self.on_tools_changed(server)
                except Exception:  # noqa: BLE001 - never break a connection
                    logger.exception("tools-changed listener failed")

    async def _hold(self, live: _Live, pwatch: ProcessWatch, signed_out: asyncio.Event | None = None) -> None:
        """Wait until asked to stop, until the server process dies, or until its sign-in is gone."""
        waiters = [asyncio.ensure_future(live.stop.wait())]
        if pwatch.pid is not None:
            waiters.append(asyncio.ensure_future(pwatch.exited.wait()))
        if signed_out is not None:
            waiters.append(asyncio.ensure_future(signed_out.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()


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
