"""A raw lane beside the SDK session on a stdio server's pipes ("faster, by passing through").

The SDK's client moves each message through zero-buffer memory streams (transport → dispatcher
→ session, and back), a handful of event-loop passes per call. A :class:`RawLane` writes a
JSON-RPC request line straight onto the server's stdin and is handed the answer line straight
from the transport's stdout reader (:meth:`RawLane.take`, before the SDK parses it), along with
the progress notifications under its token. Everything else the server sends (its requests to
the client, log messages, other answers) goes the SDK's way as before.

Its ids are integers from :data:`LANE_BASE` up (within 31 bits, as every server can echo them),
far above the SDK's own counter, so the two never meet. A lane request never validates
anything: the caller reads the answer as the SDK would (setup_agent/gateway/lane_call.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["LANE_BASE", "LaneClosed", "RawLane"]

#: The first id of a lane request (the SDK's ids count up from 1).
LANE_BASE = 1_500_000_000
_LANE_TOP = 2**31 - 1

#: ``await on_progress(params)``: a ``notifications/progress`` under the request's token.
OnProgress = Callable[[dict[str, Any]], Awaitable[None]]


class LaneClosed(ConnectionError):
    """The server's pipes closed before the answer came (the SDK says "Connection closed")."""


def _key(value: Any) -> int | None:
    """An id or token as the lane keys it: an int, or a string of one (the SDK coerces alike)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


class RawLane:
    """Requests written as lines beside the SDK's, their answers taken before the SDK reads them.

    ``write`` puts bytes on the server's stdin at once (the transport's own writer, so lines
    never interleave); ``drain`` waits while the pipe is full."""

    def __init__(self, write: Callable[[bytes], Any], drain: Callable[[], Awaitable[None]]) -> None:
        self._write = write
        self._drain = drain
        self._next = LANE_BASE
        self._pending: dict[int, asyncio.Queue[tuple[str, Any]]] = {}
        self.closed = False

    @property
    def busy(self) -> bool:
        """Whether a lane request waits for its answer (only then are lines looked at)."""
        return bool(self._pending)

    def take(self, line: str | bytes) -> bool:
        """A line the server wrote: True when it was a lane request's answer or progress (it is
        then the lane's), False when it is for the SDK."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method is not None:
            params = message.get("params")
            if method != "notifications/progress" or not isinstance(params, dict) or "id" in message:
                return False
            queue = self._pending.get(_key(params.get("progressToken")))  # type: ignore[arg-type]
            if queue is None:
                return False
            queue.put_nowait(("progress", params))
            return True
        queue = self._pending.get(_key(message.get("id")))  # type: ignore[arg-type]
        if queue is None or ("result" not in message and "error" not in message):
            return False
        queue.put_nowait(("answer", message))
        return True

    def close(self) -> None:
        """The server's stdout ended (or the transport is torn down): every waiter is told."""
        self.closed = True
        for queue in self._pending.values():
            queue.put_nowait(("closed", None))

    def _id(self) -> int:
        self._next = self._next + 1 if self._next < _LANE_TOP else LANE_BASE + 1
        while self._next in self._pending:
            self._next += 1
        return self._next

    async def request(
        self, method: str, params: dict[str, Any], on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """Send one request; return the server's answer message (``result`` or ``error`` in it).

        With ``on_progress``, the request carries a ``progressToken`` and each progress
        notification under it is awaited in order before the answer is returned (an exception
        it raises ends the call). A call ended early (cancelled, or ``on_progress`` raised) sends
        ``notifications/cancelled`` to the server, as the SDK does."""
        if self.closed:
            raise LaneClosed("Connection closed")
        request_id = self._id()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._pending[request_id] = queue
        if on_progress is not None:
            params = {**params, "_meta": {**(params.get("_meta") or {}), "progressToken": request_id}}
        line = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, separators=(",", ":")
        )
        answered = False
        try:
            self._write(line.encode() + b"\n")
            await self._drain()
            while True:
                kind, item = await queue.get()
                if kind == "answer":
                    answered = True
                    return item
                if kind == "closed":
                    answered = True
                    raise LaneClosed("Connection closed")
                if on_progress is not None:
                    await on_progress(item)
        finally:
            self._pending.pop(request_id, None)
            if not answered and not self.closed:
                self._cancel(request_id)

    def _cancel(self, request_id: int) -> None:
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "caller cancelled"},
        }
        try:
            self._write(json.dumps(note, separators=(",", ":")).encode() + b"\n")
        except (OSError, RuntimeError):
            pass  # the pipe is gone: the server is too
