"""An installed server's requests to the client (sampling, elicitation, roots) and its log
messages, relayed to the client whose call caused them.

Each live connection's ``mcp.Client`` declares sampling, elicitation (form and URL) and roots,
so a server shows the tools that need them; during a proxied call the face's :class:`Caller`
(the client that made the call) is registered on the connection (:class:`InFlight`), and what
the server asks meanwhile goes to that client: redacted on the way there (the server may quote
a secret it holds), answered as the client answered. When no call is in flight, or the caller
did not declare the capability (or its session takes no server requests, 2026-07-28), the
request is refused cleanly with a JSON-RPC error that says so. A log message sent while no
call is in flight goes to the clients that asked for logs (``logging/setLevel``), bounded per
server (:meth:`~setup_agent.gateway.connections.ConnectionManager.server_log`).

What the servers are told the client can do is the same for every client: one connection per
server is shared by all of them (the live connection is started before any call, and reused
by every client's calls), so it declares everything the relay can pass on, and a request
the calling client cannot take is refused then.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import mcp_types as types

__all__ = ["Caller", "IdleLogs", "InFlight", "Updates", "relay_callbacks"]

logger = logging.getLogger(__name__)

#: The capabilities a caller may have: ``sampling``, ``elicitation.form``, ``elicitation.url``, ``roots``.
CAPABILITIES = ("sampling", "elicitation.form", "elicitation.url", "roots")
REFUSED = -32600  # the spec's code for a request the client cannot take (what a bare client answers)
#: Log messages relayed to the client per call; past it they are dropped (a flood costs nothing).
MAX_LOGS_PER_CALL = 1000
#: Log messages a server may send outside calls per minute; the rest are dropped.
IDLE_LOGS_PER_MINUTE = 120


class Caller(Protocol):
    """The client of one proxied call, as the face sees it."""

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
    """The callers of one connection's calls in flight, newest last."""

    def __init__(self) -> None:
        self._callers: list[Caller] = []
        self._logs: dict[int, int] = {}  # id(caller) -> log messages relayed during its call

    def count_log(self, caller: Caller) -> int:
        """One more log message for ``caller``'s call; returns how many so far."""
        self._logs[id(caller)] = count = self._logs.get(id(caller), 0) + 1
        return count

    def add(self, caller: Caller | None) -> Any:
        """Register ``caller`` for the duration of a ``with`` block."""
        return _Scope(self, caller)

    def newest(self) -> Caller | None:
        return self._callers[-1] if self._callers else None


class _Scope:
    """One call's registration in :class:`InFlight` (a class per call cost a proxied call ~8 µs)."""

    __slots__ = ("caller", "owner")

    def __init__(self, owner: InFlight, caller: Caller | None) -> None:
        self.owner, self.caller = owner, caller

    def __enter__(self) -> None:
        if self.caller is not None:
            self.owner._callers.append(self.caller)

    def __exit__(self, *exc: Any) -> None:
        owner, caller = self.owner, self.caller
        if caller is not None and caller in owner._callers:
            owner._callers.remove(caller)
            owner._logs.pop(id(caller), None)


def relay_callbacks(
    inflight: InFlight, redactor: Any, label: str, idle_log: Any = None, updated: Any = None
) -> dict[str, Any]:
    """The ``mcp.Client`` callbacks of one server's connection (see the module doc).

    ``idle_log(params)`` hears (redacted) the log messages sent while no call is in flight;
    ``updated(uri)`` each ``notifications/resources/updated`` (a subscribed resource changed)."""

    def refuse(what: str) -> types.ErrorData:
        return types.ErrorData(
            code=REFUSED, message=f"mcp-setup: no client that can answer {what} is waiting on a call to {label}."
        )

    async def relay(capability: str, method: str, params: Any) -> Any:
        caller = inflight.newest()
        if caller is None or not caller.can(capability):
            return refuse(method)
        data = params.model_dump(mode="json", by_alias=True, exclude_none=True) if params is not None else {}
        try:
            return await caller.request(method, redactor.redact_obj(data))
        except Exception as exc:  # the client's error (it may quote what it was sent): its type only
            logger.info("relayed %s from %s failed: %s", method, label, type(exc).__name__)
            message = getattr(getattr(exc, "error", None), "message", None) or type(exc).__name__
            return types.ErrorData(code=getattr(exc, "code", REFUSED) or REFUSED, message=redactor.redact(str(message)))

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return await relay("sampling", "sampling/createMessage", params)

    async def elicitation(context: Any, params: Any) -> Any:
        mode = "url" if getattr(params, "mode", None) == "url" else "form"
        return await relay(f"elicitation.{mode}", "elicitation/create", params)

    async def roots(context: Any) -> Any:
        return await relay("roots", "roots/list", None)

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        caller = inflight.newest()
        if caller is None:  # not caused by a call: to the clients that asked for logs (bounded there)
            if idle_log is not None:
                try:
                    await idle_log(
                        redactor.redact_obj(params.model_dump(mode="json", by_alias=True, exclude_none=True))
                    )
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
            await caller.log(redactor.redact_obj(params.model_dump(mode="json", by_alias=True, exclude_none=True)))
        except Exception as exc:  # noqa: BLE001 - a client that went away
            logger.debug("log message not delivered: %s", type(exc).__name__)

    async def notified(message: Any) -> None:
        if updated is not None and isinstance(message, types.ResourceUpdatedNotification):
            await updated(message.params.uri)

    return {
        "message_handler": notified,
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "list_roots_callback": roots,
        "logging_callback": log,
    }
