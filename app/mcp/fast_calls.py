"""``mcp-setup mcp``'s fast path for a proxied ``tools/call`` ("faster, by passing through").

Through the SDK's server a request passes a chain of zero-buffer memory streams (the stdio
reader, the era router's replay, the dispatcher, the runner, then the writer's thread and
back), each an event-loop pass or a thread hop. :class:`FastCalls` sees every stdin line first
(stdio.py) and takes a ``tools/call`` of an installed tool whose server is connected: it runs
the face's own handler (:meth:`McpFace._call_tool`, so the guard, the approved-tools check,
redaction, the size cap and the relay of the server's requests are the gateway's, unchanged)
in a task of its own and writes the answer line itself, through the one stdout writer the
SDK's answers use too (lines never interleave).

It takes a request only when the SDK would hand it to that handler as it is: a JSON-RPC
request the SDK's own parser reads, on an initialized 2025-era (handshake) connection, whose
params the SDK's checks accept and carry no ``_meta`` but a progress token (its progress is
written by the same writer as the answer, so it always comes first). Everything else — ``initialize``, lists, the setup tools, notifications, a server
not started yet, 2026-07-28 sessions — goes to the SDK exactly as before. A
``notifications/cancelled`` of a request taken here cancels it here (no answer is sent, as
the SDK does). The server middleware is not run for a fast call (the face's own only tracks
sessions, and the connection's is already tracked from its ``initialize``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp_types import INTERNAL_ERROR
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from setup_agent.setup import TOOL_NAMES

if TYPE_CHECKING:
    from app.runtime import Runtime

    from .face import McpFace

__all__ = ["FastCalls"]

logger = logging.getLogger("app.mcp.face")

#: How long an EOF waits for the fast calls still running (as stdio.py's ``_drained``).
DRAIN_SECONDS = 60.0


class _RequestChannel:
    """A fast call's request-scoped channel: the connection's own (a stdio connection has one
    pipe: a server request relayed during the call reaches the client on it, as the SDK's
    request channel would send it), and the call's progress, written by the fast path's writer
    so that it always comes before the call's answer (the SDK's ``progress``, same message)."""

    can_send_request = True

    def __init__(self, outbound: Any, token: Any, send: Any, drain: Any) -> None:
        self._outbound, self._token, self._send, self._drain = outbound, token, send, drain

    async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> dict[str, Any]:
        return await self._outbound.send_raw_request(method, params, opts)

    async def notify(self, method: str, params: Any, opts: Any = None) -> None:
        await self._outbound.notify(method, params, opts)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._token is None:
            return
        params: dict[str, Any] = {"progressToken": self._token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        await self._drain()


class _CallContext:
    """What the face's handler reads of a request context (session, id, version, meta)."""

    __slots__ = ("meta", "protocol_version", "request", "request_id", "session")

    def __init__(self, connection: Any, request_id: Any, channel: _RequestChannel, token: Any) -> None:
        from mcp.server.session import ServerSession

        self.session = ServerSession(channel, connection)  # type: ignore[arg-type]
        self.request_id = request_id
        self.protocol_version = connection.protocol_version
        self.meta = {"progressToken": token} if token is not None else None  # the only _meta taken here
        self.request = None  # stdio: no HTTP scope (the principal is the local client)


class FastCalls:
    """Answers the ``tools/call`` requests it takes; ``write`` puts a line on stdout."""

    def __init__(self, face: McpFace, write: Any, drain: Any) -> None:
        self.face = face
        self._write = write
        self._drain = drain
        self.runtime: Runtime | None = None  # set once the core is loaded (stdio.py)
        self.connection: Any = None  # the client's connection, seen by :meth:`track`
        self._tasks: dict[Any, asyncio.Task[None]] = {}
        self._cancelled: set[Any] = set()
        self.taken = 0  # requests taken here (logged at the end)

    async def track(self, ctx: Any, call_next: Any) -> Any:
        """Server middleware: remember the connection requests come on (its version, its client)."""
        connection = getattr(getattr(ctx, "session", None), "_connection", None)
        if connection is not None:
            self.connection = connection
        return await call_next(ctx)

    # -- the reader's hook -------------------------------------------------------------
    def claim(self, line: str) -> bool:
        """A line read from stdin: True when it is taken here (the SDK never sees it)."""
        if '"tools/call"' in line:
            return self._take_call(line)
        if self._tasks and '"notifications/cancelled"' in line:
            return self._take_cancel(line)
        return False

    def _take_call(self, line: str) -> bool:
        connection, runtime = self.connection, self.runtime
        if connection is None or runtime is None or not connection.initialize_accepted:
            return False
        version = connection.protocol_version
        if version in MODERN_PROTOCOL_VERSIONS or "tools/call" in self.face.server.cache_hints:
            return False
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return False  # the SDK answers what it cannot read
        if not isinstance(message, types.JSONRPCRequest) or message.method != "tools/call":
            return False
        params = message.params
        key = coerce_request_id(message.id)  # "7" and 7 are one id, as the SDK keys its requests
        if not isinstance(params, dict) or key in self._tasks:
            return False
        token = None
        if "_meta" in params:  # only a progress token (a 2026-07-28 envelope, or anything else: the SDK's)
            meta = params["_meta"]
            if not isinstance(meta, dict) or set(meta) != {"progressToken"}:
                return False
            token = as_request_id(meta["progressToken"])
            if token is None:
                return False
        try:
            _methods.validate_client_request("tools/call", version, params)
            typed = types.CallToolRequestParams.model_validate(params, by_name=False)
        except (ValueError, KeyError):
            return False  # the SDK's own error answers it
        if typed.name in TOOL_NAMES or not self._connected(runtime, typed.name):
            return False
        task = asyncio.get_running_loop().create_task(self._answer(connection, message.id, typed, token))
        self._tasks[key] = task
        self.taken += 1
        task.add_done_callback(lambda _t: self._done(key))
        return True

    @staticmethod
    def _connected(runtime: Runtime, name: str) -> bool:
        """Whether ``name`` routes to an installed tool whose server is connected now (a server
        still to start goes the SDK's way: its start may take long and report progress)."""
        gateway = runtime.gateway
        entry = gateway.catalog.route(name)
        return entry is not None and gateway.connections.connected_server(entry.server.server_id) is not None

    def _take_cancel(self, line: str) -> bool:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return False
        if not isinstance(message, types.JSONRPCNotification) or message.method != "notifications/cancelled":
            return False
        request_id = as_request_id((message.params or {}).get("requestId"))  # never a bool
        key = coerce_request_id(request_id) if request_id is not None else None
        task = self._tasks.get(key) if key is not None else None
        if task is None:
            return False
        self._cancelled.add(key)
        task.cancel()
        return True

    def _done(self, key: Any) -> None:
        self._tasks.pop(key, None)
        self._cancelled.discard(key)

    # -- one call ------------------------------------------------------------------------
    async def _answer(self, connection: Any, request_id: Any, params: types.CallToolRequestParams, token: Any) -> None:
        version = connection.protocol_version
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        channel = _RequestChannel(connection.outbound, token, self._send, self._drain)
        try:
            result = await self.face._call_tool(_CallContext(connection, request_id, channel, token), params)
        except asyncio.CancelledError:
            if coerce_request_id(request_id) not in self._cancelled:  # shutdown: the SDK answers "Connection closed"
                self._send({**message, "error": {"code": types.CONNECTION_CLOSED, "message": "Connection closed"}})
            raise
        except Exception as exc:
            message["error"] = _error(exc)
        else:
            try:
                message["result"] = _wire_result(version, result)
            except ValidationError:  # as the SDK's runner: the detail stays in the log (it may quote the result)
                logger.exception("handler for 'tools/call' returned an invalid result")
                message["error"] = {"code": INTERNAL_ERROR, "message": "Handler returned an invalid result"}
        self._send(message)
        await self._drain()

    def _send(self, message: dict[str, Any]) -> None:
        try:
            text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped instead
            data = json.dumps(message, separators=(",", ":")).encode("ascii")
        self._write(data + b"\n")

    # -- the end -------------------------------------------------------------------------
    async def drain(self, timeout: float = DRAIN_SECONDS) -> None:
        """Wait (bounded) until every call taken here has been answered (stdin reached EOF)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=timeout)

    def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        if self.taken:
            logger.info("stdio: %d tool calls taken on the fast path", self.taken)


def _wire_result(version: str, result: Any) -> dict[str, Any]:
    """The handler's result as the SDK's runner puts it on the wire at a 2025-era ``version``:
    dumped, then validated and sieved by that version's schema (``resultType`` falls away)."""
    if isinstance(result, types.CallToolResult):
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        dumped = dict(result)
    return _methods.serialize_server_result("tools/call", version, dumped)


def _error(exc: Exception) -> dict[str, Any]:
    """A handler's exception as the SDK's dispatcher answers it (an ``MCPError`` its error)."""
    from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data

    error = handler_exception_to_error_data(exc)
    if error is None:
        logger.exception("handler for 'tools/call' raised")
        error = types.ErrorData(code=0, message=str(exc))
    return error.model_dump(by_alias=True, mode="json", exclude_unset=True)
