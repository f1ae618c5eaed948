"""An installed server's requests to the client (sampling, elicitation, roots) and its log
messages, relayed to the one client whose call caused them, saying who asks.

Each live connection's ``mcp.Client`` declares sampling, elicitation (form and URL) and roots,
so a server shows the tools that need them. During a proxied call the face's :class:`Caller`
(the client that made the call) is registered on the connection with the progress token the
call went out with (:class:`InFlight`); a request the server sends meanwhile goes to the caller
of the call it names by that token, or of the single call in flight; one that no call or
several could have caused is refused, never guessed (on a shared connection one client never
sees, nor answers, another's). What is relayed says its origin and is screened first
(relay_rules.py: a form's message in the server's name and ``_meta``, a credential form or a
look-alike of mcp-setup's pages refused and the user told, sampling without extra context and
only as far as the person allowed it for that server),
redacted on the way there (the server may quote a secret it holds); the answer goes back
through the guard (an elicitation's, like a tool argument) and the redactor. When the caller
did not declare the capability, the request is refused cleanly with a JSON-RPC error that says
so. A 2026-07-28 client takes no requests during a call: its call is held open
(held_calls.py) and the server's request parked (:func:`park`) until the client's retry
answers the input-required result it was given. A log message carries the
server's slug as its logger; one no single call caused goes to the clients that asked for logs
(``logging/setLevel``), bounded per server
(:meth:`~setup_agent.gateway.connections.ConnectionManager.server_log`).

What a server is told the client can do: on a 2026-07-28 connection, each request forwarded
for a client carries that client's declared capabilities (passthrough.py); a 2025-11-25 session
declares everything the relay can pass on (one session serves every 2025-era client), and a
request the calling client cannot take is refused then. A server's input-required results
(2026-07-28) are relayed in the calling client's era by input_required.py, with :func:`ask` and
:func:`screen` from here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, Protocol

import mcp_types as types

from setup_agent.errors import SetupError

from .relay_rules import (
    ORIGIN_KEY,
    Origin,
    RelayRules,
    credential_fields,
    real_host,
    refused_answer,
    sampling_refusal,
    scoped_sampling,
)
from .relisting import Relisting

__all__ = [
    "Caller",
    "Holder",
    "IdleLogs",
    "InFlight",
    "Updates",
    "answered",
    "ask",
    "capability_of",
    "declared",
    "labelled",
    "park",
    "relay_callbacks",
    "screen",
]

logger = logging.getLogger(__name__)

#: The capabilities a caller may have: ``sampling``, ``elicitation.form``, ``elicitation.url``, ``roots``.
CAPABILITIES = ("sampling", "elicitation.form", "elicitation.url", "roots")
REFUSED = -32600  # the spec's code for a request the client cannot take (what a bare client answers)
#: Log messages relayed to the client per call; past it they are dropped (a flood costs nothing).
MAX_LOGS_PER_CALL = 1000
#: Log messages a server may send outside calls per minute; the rest are dropped.
IDLE_LOGS_PER_MINUTE = 120


class Caller(Protocol):
    """The client of one proxied call, as the face sees it. It may also say ``client`` (its
    session: two calls of one session are one client's), ``principal`` (who answers: the
    guard counts a protected value in an answer against it) and ``when_gone(callback)`` (its
    session's end, live.py: a server's 2025-11-25 session closes after its last 2025 client)."""

    def can(self, capability: str) -> bool: ...

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the client, return its typed result (or raise)."""

    async def log(self, params: dict[str, Any]) -> None:
        """Send a ``notifications/message`` to the client."""


class IdleLogs:
    """``await idle_logs(server, params)``: a log message (redacted) a server sent while no call
    was in flight, to each of :attr:`listeners` (the faces), at most
    :data:`IDLE_LOGS_PER_MINUTE` per server."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []  # await listener(server, params)
        self._windows: dict[str, tuple[float, int]] = {}  # server id -> (window start, count)

    async def __call__(self, server: Any, params: dict[str, Any]) -> None:
        import asyncio

        now = asyncio.get_running_loop().time()
        start, count = self._windows.get(server.server_id, (now, 0))
        if now - start >= 60:
            start, count = now, 0
        self._windows[server.server_id] = (start, count + 1)
        if count >= IDLE_LOGS_PER_MINUTE:
            if count == IDLE_LOGS_PER_MINUTE:
                logger.warning(
                    "%s sends more than %d log messages a minute outside calls; the rest are not relayed",
                    server.qualified_name,
                    IDLE_LOGS_PER_MINUTE,
                )
            return
        for listener in list(self.listeners):
            try:
                await listener(server, params)
            except Exception as exc:  # noqa: BLE001 - a face that went away
                logger.debug("log listener failed: %s", type(exc).__name__)


class Updates:
    """``await updates(server_id, uri)``: a subscribed resource of a server changed
    (``notifications/resources/updated``), to each of :attr:`listeners` (the faces)."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []  # await listener(server_id, uri)

    async def __call__(self, server_id: str, uri: str) -> None:
        for listener in list(self.listeners):
            try:
                await listener(server_id, uri)
            except Exception as exc:  # noqa: BLE001 - a face that went away
                logger.debug("resource update not delivered: %s", type(exc).__name__)


class InFlight:
    """The calls in flight on one connection, oldest first, each with its caller (None: a call
    whose client takes no server requests) and the progress token it was sent with; and who
    the connection speaks for (:attr:`origin`, :attr:`rules`: relay_rules.py)."""

    def __init__(
        self, origin: Origin | None = None, rules: RelayRules | None = None, relisting: Relisting | None = None
    ) -> None:
        self._calls: list[_Scope] = []
        self._waiting = 0  # calls whose relayed questions wait on their client's answer (:meth:`waiting`)
        self._logs: dict[int, int] = {}  # id(caller) -> log messages relayed during its call
        self.origin, self.rules = origin, rules
        self._relisting = relisting  # who reads the lists again when the server says they changed

    def speak_for(self, origin: Origin, rules: RelayRules | None, relisting: Relisting | None = None) -> None:
        """The installed server this connection's requests come from (a tested session adopted
        by its install was relayed under the test's name until now), and who relists it."""
        self.origin, self.rules = origin, rules or self.rules
        self._relisting = relisting or self._relisting

    def lists_changed(self, kind: str) -> None:
        """The server said its ``kind`` list changed (a test's session: nobody relists it)."""
        if self._relisting is not None:
            self._relisting.want(kind)

    def count_log(self, caller: Caller) -> int:
        """One more log message for ``caller``'s call; returns how many so far."""
        self._logs[id(caller)] = count = self._logs.get(id(caller), 0) + 1
        return count

    def add(self, caller: Caller | None) -> _Scope:
        """Register a call (and its ``caller``) for the duration of a ``with`` block."""
        return _Scope(self, caller)

    def busy(self) -> bool:
        """Whether a call is in flight, or waits on its client's answer to a question relayed for it."""
        return bool(self._calls) or self._waiting > 0

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A call not over until its client answers what was relayed to it: a 2025-era client
        asked an input-required result's questions between two rounds of the call
        (input_required.py), when nothing is in flight at the server. The idle stop spares the
        server meanwhile (the next round goes to the same session); whom a server's request goes
        to is unchanged."""
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1

    def newest(self) -> Caller | None:
        """The caller of the newest call in flight (never used to choose whom to ask)."""
        callers = [scope.caller for scope in self._calls if scope.caller is not None]
        return callers[-1] if callers else None

    def match(self, meta: Any) -> Caller | None:
        """The caller of the one call a server's request (or log message) belongs to (:meth:`scope`)."""
        scope = self.scope(meta)
        return scope.current() if scope is not None else None

    def scope(self, meta: Any) -> _Scope | None:
        """The one call a server's request (or log message) belongs to: the call its ``_meta``
        names (the progress token that call was sent with, which is its request id), else the
        single call in flight, or the oldest when every call in flight is the same client's;
        None when no call, or calls of more than one client, could have caused it (then nobody
        is asked)."""
        token = None
        if isinstance(meta, dict):
            token = meta.get("progressToken")
        if token is not None and not isinstance(token, bool):
            named = [scope for scope in self._calls if scope.token is not None and str(scope.token) == str(token)]
            if len(named) == 1:
                return named[0]
        # A server that answers one call at a time asks during the oldest; while every call in
        # flight is the same client's, that client is who caused it, whichever call it was.
        clients = {id(_client_of(scope.caller)) for scope in self._calls}
        return self._calls[0] if len(clients) == 1 else None


class Holder(Protocol):
    """A call held open for a 2026-07-28 client (held_calls.py): its requests are parked there
    until the client's retry answers them. :attr:`caller` is the client's latest round."""

    caller: Caller | None

    async def ask(self, method: str, params: dict[str, Any]) -> Any: ...


def _client_of(caller: Caller | None) -> Any:
    """Who answers for ``caller``: its client's session (``client``), else the caller itself."""
    return getattr(caller, "client", caller) if caller is not None else None


class _Scope:
    """One call's registration in :class:`InFlight` (a class per call cost a proxied call ~8 µs)."""

    __slots__ = ("caller", "held", "owner", "token")

    def __init__(self, owner: InFlight, caller: Caller | None) -> None:
        self.owner, self.caller, self.token = owner, caller, None
        self.held: Holder | None = None

    def hold(self, held: Holder) -> None:
        """The call is held open for a 2026-07-28 client (held_calls.py): its server's requests
        are parked in ``held``, and who it speaks to is ``held``'s latest round."""
        self.held = held

    def current(self) -> Caller | None:
        """Who this call's server requests and log messages reach now: a held call's latest
        round (None between rounds), else the call's caller."""
        return self.held.caller if self.held is not None else self.caller

    def bind(self, token: Any) -> None:
        """The progress token the call went out with (its server may name it in a request)."""
        self.token = token

    def __enter__(self) -> _Scope:
        self.owner._calls.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        owner = self.owner
        if self in owner._calls:
            owner._calls.remove(self)
        if self.caller is not None and not any(s.caller is self.caller for s in owner._calls):
            owner._logs.pop(id(self.caller), None)


#: A server's change notifications (2025 era) and the list each one names.
LIST_CHANGES: dict[type, str] = {
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
}


def relay_callbacks(
    inflight: InFlight, redactor: Any, label: str, idle_log: Any = None, updated: Any = None
) -> dict[str, Any]:
    """The ``mcp.Client`` callbacks of one server's connection (see the module doc).

    ``idle_log(params)`` hears (redacted) the log messages no single call caused;
    ``updated(uri)`` each ``notifications/resources/updated`` (a subscribed resource changed);
    each ``notifications/*/list_changed`` goes to ``inflight``'s :meth:`~InFlight.lists_changed`.
    Who speaks and what is checked are ``inflight``'s :attr:`~InFlight.origin` and
    :attr:`~InFlight.rules` (``label`` and the redactor alone when it has none)."""
    plain = RelayRules(redactor)

    def refuse(what: str) -> types.ErrorData:
        return types.ErrorData(
            code=REFUSED, message=f"mcp-setup: no client that can answer {what} is waiting on a call to {label}."
        )

    async def relay(capability: str, method: str, params: Any) -> Any:
        data = params.model_dump(mode="json", by_alias=True, exclude_none=True) if params is not None else {}
        scope = inflight.scope(data.get("_meta"))
        origin, rules = inflight.origin or Origin(label, label), inflight.rules or plain
        if scope is not None and scope.held is not None:  # a 2026-07-28 client's call: asked on its retry
            if not declared(scope.caller, capability):
                return refuse(method)
            return await park(scope.held, scope.held.caller or scope.caller, method, data, origin, rules, redactor)
        caller = scope.current() if scope is not None else None
        if caller is None or not caller.can(capability):
            return refuse(method)
        return await ask(caller, method, data, origin, rules, redactor, label)

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return await relay("sampling", "sampling/createMessage", params)

    async def elicitation(context: Any, params: Any) -> Any:
        mode = "url" if getattr(params, "mode", None) == "url" else "form"
        return await relay(f"elicitation.{mode}", "elicitation/create", params)

    async def roots(context: Any) -> Any:
        return await relay("roots", "roots/list", None)

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        data = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["logger"] = (inflight.origin or Origin(label, label)).logger(data.get("logger"))
        caller = inflight.match(data.get("_meta"))
        if caller is None:  # not caused by one call: to the clients that asked for logs (bounded there)
            if idle_log is not None:
                try:
                    await idle_log(redactor.redact_obj(data))
                except Exception as exc:  # noqa: BLE001 - never break the connection
                    logger.debug("log message not delivered: %s", type(exc).__name__)
            return
        count = inflight.count_log(caller)
        if count > MAX_LOGS_PER_CALL:  # a flood: the rest of this call's are dropped
            if count == MAX_LOGS_PER_CALL + 1:
                logger.warning(
                    "%s sent more than %d log messages during one call; the rest are not relayed",
                    label,
                    MAX_LOGS_PER_CALL,
                )
            return
        try:
            await caller.log(redactor.redact_obj(data))
        except Exception as exc:  # noqa: BLE001 - a client that went away
            logger.debug("log message not delivered: %s", type(exc).__name__)

    async def notified(message: Any) -> None:
        if updated is not None and isinstance(message, types.ResourceUpdatedNotification):
            await updated(message.params.uri)
        kind = LIST_CHANGES.get(type(message))
        if kind is not None:
            inflight.lists_changed(kind)

    return {
        "message_handler": notified,
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "list_roots_callback": roots,
        "logging_callback": log,
    }


def labelled(data: dict[str, Any], origin: Origin) -> dict[str, Any]:
    """A server's request (its params) saying who asks in ``_meta``: the server's own ``_meta``
    without a progress token or an origin of its own (it cannot say it is someone else)."""
    meta = data.pop("_meta", None)
    kept = {k: v for k, v in meta.items() if k not in ("progressToken", ORIGIN_KEY)} if isinstance(meta, dict) else {}
    data["_meta"] = {**kept, **origin.meta()}
    return data


async def ask(
    caller: Caller, method: str, data: dict[str, Any], origin: Origin, rules: RelayRules, redactor: Any, label: str
) -> Any:
    """Send a server's request (``data``, its params) to ``caller``, who can take it: labelled
    and screened (:func:`screen`), redacted; the answer back through the guard and the redactor,
    or an :class:`ErrorData` for the server."""
    labelled(data, origin)
    refusal = await screen(method, data, origin, rules, caller)
    if refusal is not None:
        return refusal
    try:
        answer = await caller.request(method, redactor.redact_obj(data))
    except Exception as exc:  # the client's error (it may quote what it was sent): its type only
        logger.info("relayed %s from %s failed: %s", method, label, type(exc).__name__)
        message = getattr(getattr(exc, "error", None), "message", None) or type(exc).__name__
        return types.ErrorData(code=getattr(exc, "code", REFUSED) or REFUSED, message=redactor.redact(str(message)))
    return answered(method, answer, rules, getattr(caller, "principal", None))


async def park(
    held: Holder, caller: Any, method: str, data: dict[str, Any], origin: Origin, rules: RelayRules, redactor: Any
) -> Any:
    """A server's request during a call held for a 2026-07-28 client (held_calls.py): labelled
    and screened as :func:`ask` does, redacted, and parked until the client's retry answers it
    (the answer, guarded and redacted there, or an :class:`ErrorData` for the server)."""
    labelled(data, origin)
    refusal = await screen(method, data, origin, rules, caller)
    if refusal is not None:
        return refusal
    return await held.ask(method, redactor.redact_obj(data))


def declared(caller: Any, capability: str | None) -> bool:
    """Whether ``caller`` declared ``capability`` (whatever its era)."""
    declares = getattr(caller, "declares", None)
    return capability is not None and declares is not None and bool(declares(capability))


def capability_of(method: str, params: dict[str, Any]) -> str | None:
    """The capability (of :data:`CAPABILITIES`) a client needs to answer ``method``."""
    if method == "elicitation/create":
        return "elicitation.url" if params.get("mode") == "url" else "elicitation.form"
    return {"sampling/createMessage": "sampling", "roots/list": "roots"}.get(method)


async def screen(method: str, data: dict[str, Any], origin: Origin, rules: RelayRules, caller: Caller) -> Any:
    """Make ``data`` (a request on its way to ``caller``) say who asks, scoped as the
    specification wants; an :class:`ErrorData` for the server when it is refused."""
    if method == "sampling/createMessage":
        why = sampling_refusal(data, origin)
        if why is not None:
            logger.info("%s", why)
            return types.ErrorData(code=REFUSED, message=why)
        data.update(scoped_sampling(data))
        return None
    if method != "elicitation/create":
        return None
    message = str(data.get("message") or "")
    if data.get("mode") == "url":
        why = rules.url_refusal(data.get("url"), origin)
        if why is not None:
            await _tell(
                rules, caller, origin.says(f"a page mcp-setup did not show, because {why}.", verb="asked to open")
            )
            return types.ErrorData(code=REFUSED, message=f"mcp-setup refused this URL elicitation: {why}.")
        data["message"] = origin.says(message, verb=f"asks you to open a page at {real_host(data['url'])}")
        return None
    fields = credential_fields(data.get("requestedSchema"), rules.holds_secret)
    if fields:
        await _tell(
            rules,
            caller,
            origin.says(
                f"a credential by form ({', '.join(fields[:5])}). mcp-setup refused it: a server must never ask "
                "for a secret in a form; it is entered on mcp-setup's page and given to the server at its start.",
                verb="asked for",
            ),
        )
        return types.ErrorData(
            code=REFUSED,
            message=(
                "mcp-setup refused this form: it asks for a credential ("
                f"{', '.join(fields[:5])}). Servers must not request sensitive information through form "
                "elicitation; the user has been told."
            ),
        )
    data["message"] = origin.says(message)
    return None


async def _tell(rules: RelayRules, caller: Caller, text: str) -> None:
    """The user hears ``text`` in mcp-setup's voice: its log and the calling client's log."""
    text = rules.redactor.redact(text)
    rules.tell(text)
    try:
        await caller.log({"level": "warning", "logger": "mcp-setup", "data": text})
    except Exception as exc:  # noqa: BLE001 - a client that went away
        logger.debug("notice not delivered: %s", type(exc).__name__)


def answered(method: str, answer: Any, rules: RelayRules, principal: str | None) -> Any:
    """The client's answer on its way back to the server: an elicitation's content passes the
    guard like a tool argument (refused, and counted, when it holds a protected value), and
    every answer the redactor."""
    dump = getattr(answer, "model_dump", None)
    data = dump(mode="json", by_alias=True, exclude_none=True) if dump is not None else answer
    try:
        cleaned = rules.answer(principal, data, guarded=method == "elicitation/create")
    except SetupError as exc:
        return types.ErrorData(code=REFUSED, message=refused_answer(exc))
    return type(answer).model_validate(cleaned) if dump is not None else cleaned
