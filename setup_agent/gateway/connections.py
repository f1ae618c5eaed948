"""The connection manager: live sessions to every installed, enabled server.

At start it connects every enabled server concurrently (bounded). Each connection lives in
its own task holding an ``mcp.Client`` (one :class:`~setup_agent.gateway.live.LiveConnection`
per server); a server that dies is reconnected with backoff.
Decrypted values are handed to the redactor while a server uses them, so nothing a server
prints or returns can carry them out.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from setup_agent.errors import NotFound
from setup_agent.launch import BundleCache, LaunchSpec, ProcessLedger, Sandbox, fetch_bundle, real_folder, unpack_bundle
from setup_agent.secrets import Redactor
from setup_agent.store import InstalledServer, Store

from .forwarding import Forwarding
from .held_calls import RETRY_WAIT_SECONDS, HeldCalls
from .input_required import InputRelay
from .live import LiveConnection
from .passthrough import Progress, ResourceLinks
from .relay import Caller, IdleLogs, Updates
from .relay_rules import RelayRules
from .result_cap import DEFAULT_RESULT_CHARS
from .resume import Checked
from .server_logs import delete_log
from .status import ServerStatus, Status

if TYPE_CHECKING:
    from setup_agent.launch import DirectStarts, Fetcher

#: Progress notifications one proxied call may bring before it is ended (those before are relayed).
DEFAULT_CALL_NOTIFICATIONS = 1_000

__all__ = ["ConnectionManager", "ServerStatus", "same_start"]

logger = logging.getLogger(__name__)

#: ``auth_for(server, values)``: an ``httpx2.Auth`` for a remote that signed in (OAuth), or None.
#: It may carry ``signed_out`` (an ``asyncio.Event``) and ``signed_out_reason``: once set, the
#: server is ``needs_sign_in`` and is not retried (see setup_agent/oauth/sign_ins.py).
AuthHook = Callable[[InstalledServer, dict[str, str]], Any]


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
        max_result_chars: int = DEFAULT_RESULT_CHARS,
        max_call_notifications: int = DEFAULT_CALL_NOTIFICATIONS,
        sandbox: Sandbox | None = None,
        fetcher: Fetcher | None = None,
        direct: DirectStarts | None = None,
        on_tools_changed: Callable[[InstalledServer], None] | None = None,
        relay_rules: RelayRules | None = None,
        retry_wait: float = RETRY_WAIT_SECONDS,
    ) -> None:
        self.store = store
        #: A proxied result is cut beyond this many characters, with a note (0: no cap).
        self.max_result_chars = max_result_chars
        #: A call whose server sends more progress notifications than this is ended.
        self.max_call_notifications = max_call_notifications
        self.sandbox = sandbox  # every server starts in it (setup_agent/launch/sandbox.py); None: unsandboxed
        self.fetcher = fetcher  # a start's download phase (a lazy start downloads as a test does); None: none
        self.direct = direct  # what the download noted a runner installed: servers start without it
        self.bundles = bundles  # an MCPB bundle this machine has not unpacked (installed elsewhere)
        self.logs_dir = logs_dir  # <logs_dir>/<server_id>.log: each server's stderr, redacted
        self.ledger = ledger  # records each server's process group (crash safety)
        self.redactor = redactor
        #: What a server's relayed requests are checked against (the guard, mcp-setup's own origins).
        self.relay_rules = relay_rules or RelayRules(redactor)
        self.install_root = install_root
        self.host_env = host_env
        self.backoff = tuple(backoff)
        self.connect_timeout = connect_timeout
        self.auth_for = auth_for
        self._listeners: list[Callable[[ServerStatus], None]] = [on_status] if on_status is not None else []
        self.slots = asyncio.Semaphore(max_concurrency)  # connections starting at once
        self._live: dict[str, LiveConnection] = {}
        #: Servers an install of this process is about to connect (see ``expect``): a store sync
        #: does not start them meanwhile, so the install's own (possibly adopted) session is the one.
        self._expected: set[str] = set()
        #: How many connects this manager has begun, and at which count each live one began: a
        #: sync with a store snapshot read before a connect leaves that connection alone (``mark``).
        self._connects = 0
        self._born: dict[str, int] = {}
        #: What the start of each server stopped when idle checked (resume.py): its next start
        #: lists nothing again when its launch, settings and files are the same.
        self._rested: dict[str, Checked] = {}
        self._booting = False
        self._booted = asyncio.Event()
        # Every stored secret of every installed server, for the redactor (not only live ones):
        # an installed server may print another's secret, or its own before it connected.
        self._stored_secrets: list[tuple[str, str]] = []
        redactor.add_source(lambda: self._stored_secrets)
        #: Called with the store's record when a server's live tools differ from its pin beyond
        #: whitespace (pins.py): the face asks the user out of band (the runtime passes ToolReview's).
        self.on_tools_changed = on_tools_changed
        #: Which server each resource URI a tool result named came from (resources/read routing).
        self.links = ResourceLinks()
        #: What passes requests through the live sessions (forwarding.py): this manager's sessions;
        #: a 2025-era server's request during a 2026-07-28 client's call waits ``retry_wait``
        #: seconds for the client's retry (held_calls.py).
        inputs = InputRelay()
        self.forwarding = Forwarding(
            self._get,
            self._live.values,
            redactor,
            self.links,
            max_call_notifications=max_call_notifications,
            max_result_chars=max_result_chars,
            rules=self.relay_rules,
            inputs=inputs,
            held=HeldCalls(inputs.states, retry_wait),
        )
        #: The log messages servers send outside calls, to its listeners (relay.py), bounded.
        self.server_log = IdleLogs()
        self.resource_updated = Updates()  # notifications/resources/updated, to the faces (relay.py)

    def add_status_listener(self, listener: Callable[[ServerStatus], None]) -> Callable[[], None]:
        """Hear every status change; returns a function that stops listening."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def install_dir(self, server_id: str) -> Path:
        return self.install_root / server_id

    def bundle_dir(self, server_id: str) -> Path:
        """Where an MCPB bundle is unpacked: its ``${__dirname}``."""
        return self.install_dir(server_id) / "bundle"

    async def bundle_folder(self, server: InstalledServer, spec: LaunchSpec) -> str | None:
        """The folder an MCPB bundle's server runs from (its ``${__dirname}``), unpacked on this
        machine first when it has none (the server was installed by another machine on the shared
        database, or its folder is gone), as every start of it needs: a live start and a
        rotation's test alike. None for a server that is not a bundle."""
        if not spec.needs_install_dir:
            return None
        bundle_dir = self.bundle_dir(server.server_id)
        if not await asyncio.to_thread(real_folder, bundle_dir):  # (a link the server planted: removed)
            await self._unpack_here(server, spec)
        return str(bundle_dir)

    async def _unpack_here(self, server: InstalledServer, spec: LaunchSpec) -> None:
        """Fetch the bundle (the pinned sha256 is checked) and unpack it into this machine's install dir."""
        logger.info("server %s: fetching its bundle for this machine", server.server_id)
        install_dir = self.install_dir(server.server_id)
        await asyncio.to_thread(install_dir.mkdir, parents=True, exist_ok=True)
        fetch = self.bundles.fetch if self.bundles is not None else fetch_bundle  # the cache, as install uses
        archive = await fetch(spec.identifier, spec.file_sha256, install_dir, allow_file=server.source == "local")
        try:
            await asyncio.to_thread(unpack_bundle, archive, self.bundle_dir(server.server_id))
        finally:
            await asyncio.to_thread(archive.unlink, True)

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        """Connect every enabled installed server, concurrently; returns when all settled."""
        self._booting = True
        try:
            servers = await asyncio.to_thread(self.store.servers.list, enabled_only=True)
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

        ``adopt``: a parked tested session (:class:`setup_agent.setup.adoption.Parked`) of this server,
        already running in its install dir: it becomes the connection, no second start."""
        while server.server_id in self._live:  # another connect may slip in while one is stopped
            await self.disconnect(server.server_id)
        self._expected.discard(server.server_id)
        self._connects += 1
        self._born[server.server_id] = self._connects
        live = LiveConnection(self, server, adopted=adopt, rested=self._rested.pop(server.server_id, None))
        self._live[server.server_id] = live
        live.begin()
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

    async def disconnect(self, server_id: str, *, removed: bool = False) -> None:
        """Stop the server's session; with ``removed``, nothing it prints meanwhile reaches its log."""
        live = self._live.pop(server_id, None)
        if live is None:
            return
        self._born.pop(server_id, None)
        if removed:
            live.discard_log()
        live.stop.set()
        if live.task is not None:
            if live.status.status == "connecting":  # a start that hangs sees no stop until its deadline:
                live.task.cancel()  # end it now (its process is killed as the task unwinds)
            try:
                await asyncio.wait_for(asyncio.shield(live.task), timeout=10)
            except (TimeoutError, asyncio.CancelledError):
                live.task.cancel()
        live.forget_secrets()

    async def remove(self, server_id: str, *, actor: str = "user") -> None:
        """Disconnect, delete the rows and env, and delete the install dir (``actor`` is audited)."""
        server = await asyncio.to_thread(self.store.servers.get, server_id)
        if server is None:
            raise NotFound(f"No installed server has the id {server_id!r}. mcp_setup_list_servers lists them.")
        await self.disconnect(server_id, removed=True)
        await asyncio.to_thread(lambda: self.store.servers.remove(server_id, actor=actor))
        await self._delete_files(server_id)

    async def retire(self, server_id: str) -> None:
        """A server whose row is gone already (replaced by its update in the same commit): stop it
        and delete its install dir and log."""
        await self.disconnect(server_id, removed=True)
        await self._delete_files(server_id)

    async def _delete_files(self, server_id: str) -> None:
        """A removed server's install dir and log (once its process is stopped)."""
        self._rested.pop(server_id, None)
        await asyncio.to_thread(shutil.rmtree, self.install_dir(server_id), True)
        if self.logs_dir is not None:
            await asyncio.to_thread(delete_log, self.logs_dir, server_id)

    async def aclose(self) -> None:
        await self.forwarding.held.aclose()
        await asyncio.gather(*(self.disconnect(sid) for sid in list(self._live)))

    # -- the gateway's needs ---------------------------------------------------------
    async def learn_stored_secrets(self) -> None:
        """Teach the redactor every stored secret value of every installed server."""
        rows = await asyncio.to_thread(self.store.values.secret_values)
        self._stored_secrets = [(f"[secret:{key}]", value.reveal()) for _sid, key, value in rows]
        self.redactor.invalidate()

    def mark_booting(self) -> None:
        """A boot is about to read the store: ``wait_all_settled`` waits for it (call before the
        boot task is scheduled, so a listing that arrives first does not see an empty manager)."""
        self._booting = True

    def mark(self) -> int:
        """Take this before reading the store for :meth:`sync`: a connect begun after it (an
        install that committed after the read) is not in that snapshot, and is not stopped."""
        return self._connects

    async def sync(self, servers: Sequence[InstalledServer], *, eager: bool, seen_at: int | None = None) -> None:
        """Match the live sessions to ``servers`` (the store's, read after ``seen_at = mark()``):
        stop what is gone or disabled; with ``eager``, start every enabled server not yet live.
        Without ``seen_at`` the snapshot is taken to be newer than every live connection."""
        self._booting = True
        try:
            await self._sync(servers, eager=eager, seen_at=self._connects if seen_at is None else seen_at)
        finally:
            self._booted.set()

    async def _sync(self, servers: Sequence[InstalledServer], *, eager: bool, seen_at: int) -> None:
        wanted = {s.server_id: s for s in servers if s.enabled}
        # A connection begun after the snapshot was read is newer than the snapshot: an install
        # that committed meanwhile. Stopping it (and deleting its files as "removed") was a race
        # that left a just-installed server stopped under load (bench row 6: 48 of 50 connected).
        gone = [sid for sid in self._live if sid not in wanted and self._born.get(sid, 0) <= seen_at]
        installed = {s.server_id for s in servers}
        await asyncio.gather(*(self.disconnect(sid, removed=sid not in installed) for sid in gone))
        for sid in gone:
            self._set_stopped(sid)
            if sid not in installed:  # removed by another process: its files here go too
                await self._delete_files(sid)
        stamps = await asyncio.to_thread(self.store.values.env_stamps) if self._live else {}
        for server in wanted.values():
            live = self._live.get(server.server_id)
            # A setting stored since its start read them (a key replaced with `mcp-setup rotate` or
            # the page's Replace, in any process): it must not keep running with the old value.
            restamped = live is not None and live.values_stamp not in (None, stamps.get(server.server_id, ""))
            if live is not None and same_start(live.server.launch_spec, server.launch_spec) and not restamped:
                live.renew(server)  # its latest record (e.g. a newly approved tool list, keep-running)
            elif live is not None and self._born.get(server.server_id, 0) <= seen_at:
                # Its launch changed since it started (a destination allowed with `mcp-setup allow`),
                # or its values did: stopped here, started anew with them (eagerly below, or by its
                # next call).
                if restamped:
                    logger.info("server %s: a stored setting was replaced; restarting it", server.server_id)
                await self.disconnect(server.server_id)
            # Lazy or not, a server whose tools were never recorded (installed by an older
            # mcp-setup) is started once so that they can be listed.
            if server.server_id in self._expected:
                continue  # its install connects it (one start)
            if server.server_id not in self._live and (eager or not server.tools_recorded):
                await self.connect(server, wait=False)

    def renew(self, server: InstalledServer) -> None:
        """A live session's latest record from the store, its launch unchanged (what the person
        allowed it since, such as sampling, holds from its next request)."""
        live = self._live.get(server.server_id)
        if live is not None and live.server.launch_spec == server.launch_spec:
            live.renew(server)

    async def ensure_connected(
        self, server: InstalledServer, timeout: float, *, progress: Progress | None = None
    ) -> ServerStatus:
        """Start ``server`` unless it is live (or retrying), and wait (bounded) for it to settle.

        A server that gave up (failed with no retry left) or was stopped is started afresh. A
        download phase is not counted against ``timeout`` (it has its own deadline, and
        ``progress`` hears it): the wait counts from the server's start.
        """
        live = self._live.get(server.server_id)
        if live is None or live.task is None or live.task.done() or live.status.status in ("failed", "stopped"):
            await self.connect(server, wait=False)
        live = self._live[server.server_id]
        live.touch()
        return await live.wait_started(timeout, progress)

    async def stop_idle(self, idle_seconds: float) -> list[str]:
        """Stop connected servers unused for ``idle_seconds``; they start again on their next call.
        Never one the person marked keep-running, one with a call in flight (a relayed request
        waits inside its call), or one a client subscribed to a resource of."""
        now = asyncio.get_running_loop().time()
        idle = [
            sid
            for sid, live in self._live.items()
            if live.status.status == "connected"
            and now - (live.last_used or now) >= idle_seconds
            and not live.busy()
            and not live.server.launch_spec.get("keep_running")
        ]
        for sid in idle:
            logger.info("server %s idle for %.0f s: stopping it until its next call", sid, idle_seconds)
            live = self._live.get(sid)
            checked = live.checked if live is not None else None
            await self.disconnect(sid)
            if checked is not None:
                self._rested[sid] = checked
        return idle

    def _set_stopped(self, server_id: str) -> None:
        self.announce(ServerStatus(server_id, status="stopped"))

    def announce(self, status: ServerStatus) -> None:
        """Tell every status listener."""
        for listener in list(self._listeners):
            try:
                listener(status)
            except Exception:  # a listener must not break a connection
                logger.exception("status listener failed")

    # -- requests passed through a live session (forwarding.py) ---------------------
    async def call_tool(
        self,
        server_id: str,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        caller: Caller | None = None,
    ) -> dict[str, Any]:
        """``tools/call`` on a connected server, as it answered, redacted and capped."""
        return await self.forwarding.call_tool(server_id, name, arguments, progress=progress, caller=caller)

    async def set_logging_level(self, level: str) -> None:
        """``logging/setLevel`` on every connected server that declared ``logging``."""
        await self.forwarding.set_logging_level(level)

    async def subscribe(self, server_id: str, uri: str, on: bool) -> bool:
        """``resources/subscribe`` (or ``unsubscribe``) at a connected server that declared it."""
        return await self.forwarding.subscribe(server_id, uri, on)

    async def read_resource(self, server_id: str, uri: str) -> dict[str, Any]:
        """``resources/read`` on a connected server, as it answered, redacted."""
        return await self.forwarding.read_resource(server_id, uri)

    async def request(
        self, server_id: str, method: str, params: dict[str, Any] | None, *, caller: Caller | None = None
    ) -> dict[str, Any]:
        """``prompts/get`` or ``completion/complete`` on a connected server, as it answered, redacted
        (a prompt's input-required answer relayed to ``caller``, input_required.py)."""
        return await self.forwarding.request(server_id, method, params, caller=caller)

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

    def _get(self, server_id: str) -> LiveConnection:
        live = self._live.get(server_id)
        if live is None:
            raise NotFound(f"Server {server_id} is not running.")
        return live


#: Launch-spec keys that say how long it runs, not how it starts: a change of them never restarts it.
_NOT_THE_START = frozenset({"keep_running"})


def same_start(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two launch specs start the same process (what only says how long it runs aside)."""
    return {k: v for k, v in old.items() if k not in _NOT_THE_START} == {
        k: v for k, v in new.items() if k not in _NOT_THE_START
    }
