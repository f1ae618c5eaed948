"""The gateway: installed servers' tools, listed from the store and called through live sessions.

```
face ──tools/list──▶ Gateway.catalog (store rows: tools recorded at install and each connect)
face ──tools/call──▶ Gateway.call ──▶ ConnectionManager (start on first call, or at boot) ──▶ server
                                         └ every answer passes the Redactor (live refs + every stored secret)
store change (any process) ──▶ Gateway.watch ──▶ ConnectionManager.sync ──▶ listeners (list_changed)
```

One truth across processes: the store's change counter (``mcp_setup_changes``) is bumped in
the same transaction as every install, removal, enable/disable and tool-list change. Each
gateway reads it every ``poll_interval`` seconds (one integer), at once after a change this
process made, and reloads the catalog when it moved. ``eager`` gateways (``mcp-setup serve``)
keep every enabled server connected; lazy ones (the stdio face) start a server on its first
call, so starting a client costs no spawn at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from setup_agent.errors import RequestStateInvalid, SetupError, ToolLeftOut
from setup_agent.secrets import Redactor
from setup_agent.store import Catalog, GatewayTool, Store

from .budget import ToolsBudget
from .connections import ConnectionManager
from .discover import FLUSH_SECONDS, RecentTools
from .members import MemberSessions, member_of
from .offers import MAPPED_PREFIX, OfferIndex, left_out_names, without_hidden
from .passthrough import Progress
from .relay import Caller
from .relay_rules import Origin

__all__ = ["Gateway", "UnknownPrompt", "UnknownResource", "UnknownTool"]

logger = logging.getLogger(__name__)

Listener = Callable[[], Awaitable[None]]
#: A check run on a proxied call's arguments before it is forwarded (see setup_agent/secrets/guard.py);
#: it raises a SetupError to refuse the call.
ArgumentCheck = Callable[[str | None, dict[str, Any]], None]


class UnknownTool(LookupError):
    """No installed, enabled server has a tool of this gateway name (a protocol error)."""


class UnknownPrompt(LookupError):
    """No installed, enabled server offers an approved prompt of this gateway name."""


class UnknownResource(LookupError):
    """No tool result of an installed, enabled server named this resource URI (a protocol error)."""


def tool_error(text: str, code: str) -> dict[str, Any]:
    """A tool result that says what went wrong (``isError``), with a stable code."""
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"ok": False, "error": {"code": code, "message": text}},
        "isError": True,
    }


class Gateway:
    def __init__(
        self,
        store: Store,
        connections: ConnectionManager,
        redactor: Redactor,
        *,
        eager: bool,
        call_timeout: float = 60.0,
        poll_interval: float = 0.5,
        idle_stop_seconds: float = 0.0,
        check_arguments: ArgumentCheck | None = None,
        members: MemberSessions | None = None,
        lockout_listeners: list[Callable[[str], Any]] | None = None,
        incident_listeners: list[Callable[[str], Any]] | None = None,
        recent: RecentTools | None = None,
        budget: ToolsBudget | None = None,
    ) -> None:
        self.store = store
        self.connections = connections
        self.redactor = redactor
        self.eager = eager
        self.call_timeout = call_timeout
        self.poll_interval = poll_interval
        self.idle_stop_seconds = idle_stop_seconds
        self.check_arguments = check_arguments
        #: The installed tools called, newest first (through any gateway on the store, kept there in
        #: batches): what a tools budget lists first.
        self.recent = RecentTools(store.tool_use) if recent is None else recent
        #: The tokens of tool definitions a face lists (the environment's, the page's or the default;
        #: None given: the page's, else no budget).
        self.budget = ToolsBudget(store.preferences, default=0) if budget is None else budget
        self._catalog = Catalog()
        self._left_out: dict[str, str] = {}  # gateway name of an unticked tool -> the refusal
        self.offers = OfferIndex()  # prompts, resources, templates (offers.py)
        self._counter: int | None = None
        self._listeners: list[Listener] = []
        #: The lists the latest change changed (``tools``, ``prompts``, ``resources``): what the
        #: listeners announce (each client hears of each list once).
        self.last_changes: frozenset[str] = frozenset(("tools", "prompts", "resources"))
        self._kick = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._refresh_lock = asyncio.Lock()
        self._ready = asyncio.Event()
        self._unsubscribe = store.database.add_change_listener(self._changed_here)
        #: Called with a session id when the guard locks it (faces tell the user out of band): the
        #: list the guard's listener reads, given by the runtime; a face adds its own to it.
        self.lockout_listeners = lockout_listeners if lockout_listeners is not None else []
        #: Called with a principal at its first refused call (an incident: faces tell the user at once).
        self.incident_listeners = incident_listeners if incident_listeners is not None else []
        #: Each member's own sessions for servers with per-member keys (members.py); None: no members.
        self.members = members

    # -- lifecycle --------------------------------------------------------------------
    async def start(self, *, eager: bool | None = None) -> None:
        """Read the catalog and the stored secrets, sync the sessions, then watch for changes.
        ``eager`` (when given) is the face's choice: connect every enabled server, or each on its
        first call."""
        if eager is not None:
            self.eager = eager
        self._loop = asyncio.get_running_loop()
        try:
            await self.recent.load()  # the tools used in earlier sessions, in any process
            await self.refresh(force=True)
        finally:
            self._ready.set()
        self._task = asyncio.create_task(self._watch(), name="mcp-setup-gateway-watch")

    async def aclose(self) -> None:
        self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        try:
            await self.recent.flush()  # the uses not written yet: the next session lists them
        except Exception as exc:
            logger.warning("gateway: the tools used could not be recorded (%s)", type(exc).__name__)

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """``await listener()`` after every change of the listed tools, prompts or resources
        (which ones: :attr:`last_changes`)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    async def ready(self) -> Catalog:
        await self._ready.wait()
        return self._catalog

    # -- change watching ---------------------------------------------------------------
    def _changed_here(self) -> None:
        """A store write of this process (any thread): look at once."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._kick.set)

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._kick.wait()
            self._kick.clear()
            try:
                await self.refresh()
                await self.recent.flush(every=FLUSH_SECONDS)
                if self.idle_stop_seconds > 0:
                    await self.connections.stop_idle(self.idle_stop_seconds)
                    if self.members is not None:
                        await self.members.stop_idle(self.idle_stop_seconds)
            except SetupError as exc:  # e.g. the database is away for a moment: try again later
                logger.warning("gateway: could not read the store (%s); trying again", exc.code)
            except Exception:
                logger.exception("gateway: refresh failed")

    async def refresh(self, *, force: bool = False) -> bool:
        """Reload the catalog when the change counter moved; True when the listed tools changed."""
        async with self._refresh_lock:
            counter = await asyncio.to_thread(self.store.database.change_counter)
            if not force and counter == self._counter:
                return False
            budget_moved = await asyncio.to_thread(self.budget.reload)  # the person's, from the page
            seen_at = self.connections.mark()  # before the read: installs committed after it are spared
            servers = await asyncio.to_thread(self.store.servers.list)
            self._counter = counter
            before = self._signatures()
            offers = await asyncio.to_thread(self.store.pins.offers)
            entries = [s.catalog_entry() for s in servers]
            self._catalog = Catalog.build(without_hidden(e, offers) for e in entries)
            self._left_out = left_out_names(entries, offers)
            self.offers = OfferIndex.build(self._catalog, offers)
            await self.connections.learn_stored_secrets()
            await self.connections.sync(servers, eager=self.eager, seen_at=seen_at)
            if self.members is not None:
                await self.members.sync(servers)
            after = self._signatures()
            kinds = frozenset(
                kind for kind in after if after[kind] != before[kind] or (kind == "tools" and budget_moved)
            )
        if kinds and not force:
            self.last_changes = kinds
            await self._notify()
        return bool(kinds)

    def _signatures(self) -> dict[str, Any]:
        """What the clients are listed, by list: the changed ones are announced."""
        return {
            "tools": self._catalog.signature(),
            "prompts": self.offers.prompts_signature(),
            "resources": self.offers.resources_signature(),
        }

    async def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                await listener()
            except Exception:
                logger.exception("gateway listener failed")

    # -- calls ---------------------------------------------------------------------------
    def route(self, name: str) -> GatewayTool:
        entry = self._catalog.route(name)
        if entry is None:
            if name in self._left_out:  # unticked by the user at install: a refusal that says so
                raise ToolLeftOut(self._left_out[name])
            raise UnknownTool(name)
        return entry

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        session: str | None = None,
        progress: Progress | None = None,
        caller: Caller | None = None,
    ) -> dict[str, Any]:
        """Forward a call to the tool's server; the result (or a tool error) comes back redacted.

        ``progress`` hears the server's progress notifications for this call (the face forwards
        them to its client under the client's own token); ``caller`` (the face's client) gets
        the server's sampling, elicitation and roots requests and its log messages meanwhile."""
        await self._ready.wait()
        try:
            entry = self.route(name)
        except ToolLeftOut as exc:
            return tool_error(exc.message, exc.code)
        label = entry.server.title or entry.server.qualified_name
        self.recent.used(entry.name)
        if self.check_arguments is not None:
            try:
                self.check_arguments(session, arguments)
            except SetupError as exc:
                return tool_error(exc.message, exc.code)
        # A live session needs no store read (a thread hop and a query: most of a proxied call's
        # cost); a removal, a disable or a new approved list reaches the sessions through refresh.
        server = self.connections.connected_server(entry.server.server_id)
        if server is None:
            server = await asyncio.to_thread(self.store.servers.get, entry.server.server_id)
        if server is None or not server.enabled or not any(t.get("name") == entry.tool_name for t in server.tools):
            raise UnknownTool(name)  # gone, disabled, or no longer an approved tool (pins.py)
        connections = self.connections
        if self.members is not None and server.member_keys and member_of(session) is not None:
            # A member's call reads the record afresh: a key made shared again a moment ago (by
            # another process) is not asked of them before this process's next refresh.
            server = await asyncio.to_thread(self.store.servers.get, entry.server.server_id) or server
        if self.members is not None and server.member_keys and member_of(session) is not None:
            own = await self.members.connections_for(server, member_of(session), caller)  # the member's own session
            if isinstance(own, dict):
                return own  # they were asked for their value, out of band
            connections = own
        status = await connections.ensure_connected(server, self.call_timeout, progress=self._relay(progress))
        if status.status != "connected":
            why = f": {status.reason}" if status.reason else ""
            state = "still starting" if status.status == "connecting" else status.status
            return tool_error(
                self.redactor.redact(f"The server {label} ({entry.server.slug}) is {state}{why}."),
                "server_unavailable",
            )
        try:
            return await connections.call_tool(
                server.server_id, entry.tool_name, arguments, progress=self._relay(progress), caller=caller
            )
        except RequestStateInvalid:
            raise  # a protocol error: the face answers it as one
        except SetupError as exc:
            return tool_error(self.redactor.redact(f"{label}: {exc.message}"), exc.code)
        except Exception as exc:  # the session broke during the call
            needed = self._url_required(exc, server, label)
            if needed is not None:
                raise needed from None  # the client opens the page; its URL is kept
            logger.info("call to %s on %s failed: %s", entry.tool_name, server.server_id, type(exc).__name__)
            text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            return tool_error(self.redactor.redact(f"{label}: the call failed ({text})."), "call_failed")

    def _url_required(self, exc: Exception, server: Any, label: str) -> Exception | None:
        """A server's ``-32042`` (URL elicitation required) as its client gets it: in the
        server's name, its URLs checked (relay_rules.py), redacted; a ``-32021`` (a client
        capability the call needs) likewise; None for any other error."""
        from mcp import MCPError  # here: the stdio face lists tools before the SDK loads
        from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY, URL_ELICITATION_REQUIRED

        error = getattr(exc, "error", None)
        if isinstance(exc, MCPError) and getattr(error, "code", None) == MISSING_REQUIRED_CLIENT_CAPABILITY:
            # The server was told this client's capabilities (passthrough.py) and needs one it did
            # not declare: the client hears it as the protocol error it is, the data redacted.
            message = self.redactor.redact(f"{label}: {error.message}")
            return MCPError(MISSING_REQUIRED_CLIENT_CAPABILITY, message, self.redactor.redact_obj(error.data))
        if not isinstance(exc, MCPError) or getattr(error, "code", None) != URL_ELICITATION_REQUIRED:
            return None
        data = self.connections.relay_rules.url_required(self.redactor.redact_obj(error.data), Origin.of(server))
        if data is None:
            return None
        return MCPError(URL_ELICITATION_REQUIRED, self.redactor.redact(f"{label}: {error.message}"), data)

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read`` of a listed URI, or of one a tool result named (a ``resource_link``):
        routed to its server (offers.py), its answer redacted; a mapped URI's contents say it."""
        await self._ready.wait()
        route = self.offers.route_uri(uri, self.connections.links.owner(uri))
        if route is None:
            raise UnknownResource(uri)
        server_id, original = route
        await self._connected(server_id, UnknownResource(uri))
        result = await self.connections.read_resource(server_id, original)
        if original != uri:  # a collision's mapped URI: the contents name the URI the client read
            for item in result.get("contents") or ():
                if isinstance(item, dict) and item.get("uri") == original:
                    item["uri"] = uri
        return result

    async def subscribe(self, uri: str, on: bool = True) -> tuple[str, str]:
        """``resources/subscribe`` (``on``) or ``unsubscribe`` of a listed or linked URI at its
        server; returns ``(server_id, the URI at that server)`` (its updates name that URI).
        Raises :class:`UnknownResource` when no server has it or its server takes no subscriptions."""
        await self._ready.wait()
        route = self.offers.route_uri(uri, self.connections.links.owner(uri))
        if route is None:
            raise UnknownResource(uri)
        await self._connected(route[0], UnknownResource(uri))
        if not await self.connections.subscribe(route[0], route[1], on):
            raise UnknownResource(uri)
        return route

    async def list_prompts(self) -> list[dict[str, Any]]:
        """The approved prompts of every enabled server, as ``<slug>__<prompt>``."""
        await self._ready.wait()
        return self.offers.wire_prompts(self._catalog)

    async def list_resources(self) -> list[dict[str, Any]]:
        await self._ready.wait()
        return list(self.offers.resources)

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        await self._ready.wait()
        return list(self.offers.templates)

    async def get_prompt(
        self, name: str, arguments: dict[str, str], *, session: str | None = None, caller: Caller | None = None
    ) -> dict[str, Any]:
        """``prompts/get`` of an approved prompt at its server, its answer redacted; the guard
        sees the arguments as it sees a tool call's."""
        await self._ready.wait()
        route = self.offers.prompts.get(name)
        if route is None:
            raise UnknownPrompt(name)
        if self.check_arguments is not None:
            self.check_arguments(session, arguments)  # a SetupError: the face says it
        await self._connected(route.server_id, UnknownPrompt(name))
        return await self.connections.request(
            route.server_id, "prompts/get", {"name": route.name, "arguments": arguments}, caller=caller
        )

    async def complete(
        self, ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None
    ) -> dict[str, Any]:
        """``completion/complete`` for a gateway prompt or a listed template, at its server."""
        await self._ready.wait()
        if ref.get("type") == "ref/prompt":
            route = self.offers.prompts.get(str(ref.get("name")))
            if route is None:
                raise UnknownPrompt(str(ref.get("name")))
            server_id, ref = route.server_id, {**ref, "name": route.name}
        else:
            uri = str(ref.get("uri"))
            found = (
                self.offers.route_uri(uri, None) if uri.startswith(MAPPED_PREFIX) or uri in self.offers.owners else None
            )
            if found is None:
                raise UnknownResource(uri)
            server_id, ref = found[0], {**ref, "uri": found[1]}
        await self._connected(server_id, UnknownResource(str(ref)))
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        if context:
            params["context"] = context
        return await self.connections.request(server_id, "completion/complete", params)

    async def _connected(self, server_id: str, missing: LookupError) -> None:
        """Start the server unless it is live; ``missing`` is raised when it is gone or cannot start."""
        server = self.connections.connected_server(server_id) or await asyncio.to_thread(
            self.store.servers.get, server_id
        )
        if server is None or not server.enabled:
            raise missing
        status = await self.connections.ensure_connected(server, self.call_timeout)
        if status.status != "connected":
            raise missing

    async def set_logging_level(self, level: str) -> None:
        """A client's ``logging/setLevel``: every connected server that logs is told."""
        await self.connections.set_logging_level(level)

    def _relay(self, progress: Progress | None) -> Progress | None:
        """``progress`` with each message redacted (a server may print a secret in it)."""
        if progress is None:
            return None

        async def relay(value: float, total: float | None, message: str | None) -> None:
            await progress(value, total, self.redactor.redact(message) if message else message)

        return relay
