"""A 2025-era server's requests during a call (a ``tools/call``, or a ``prompts/get``), relayed to
a 2026-07-28 client as input-required results (MRTR): the server's call is held open inside the
gateway while the client answers.

A 2026-07-28 client takes no requests during a call: it gets ``resultType: "input_required"``
with ``inputRequests`` and a ``requestState``, and calls again with ``inputResponses``. A server
that speaks only 2025-11-25 (or older) sends its elicitation, sampling and roots requests as
JSON-RPC requests during the call and waits for their answers. So the gateway holds the
server's call (:class:`HeldCall`, its task and the requests it sent, each waiting on a future):

- the call goes out; when the server sends a request meanwhile, the relay (relay.py) labels and
  screens it as every relayed request (the server's name and ``_meta`` origin, no credential
  forms, no look-alike of mcp-setup's pages, sampling scoped), redacts it and parks it here; the
  client's call is answered input-required with every request the server is waiting on, and a
  ``requestState`` of the gateway's own (input_required.py's :class:`InputStates`, signed) that
  names the held call;
- the client's retry (same server, same tool, same principal) is matched back by that state; each
  response goes to the server's waiting request through the guard (an elicitation's, like a tool
  argument) and the redactor (relay.py's :func:`answered`); the retry then answers with the call's
  result, or with a further input-required result when the server asks again; a request the
  retry left unanswered is asked again at once;
- a client that does not retry within :attr:`HeldCalls.wait` (:data:`RETRY_WAIT_SECONDS` unless
  the runtime says otherwise: ``MCP_SETUP_RELAY_RETRY_WAIT_SECONDS``, docs/settings.md) has every waiting request answered with an error, the server's call
  is given as long again to end (then cancelled), its result dropped, and the user told; a late
  retry is refused as a state no longer waiting.

The server's call keeps its place among the connection's calls in flight for its whole life, so
the idle stop spares the server, and a log message or progress it sends reaches the client's
latest round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from setup_agent.errors import RequestStateInvalid

from .input_required import InputRetry, InputStates
from .relay import Caller, answered
from .relay_rules import Origin, RelayRules

__all__ = ["RETRY_WAIT_SECONDS", "HeldCall", "HeldCalls", "holds"]

logger = logging.getLogger(__name__)

#: How long a 2025-era server's request waits for the 2026-07-28 client's retry (seconds): a
#: person may be filling in a form. Past it the request is answered with an error.
RETRY_WAIT_SECONDS = 120.0

#: JSON-RPC's "internal error": what the server's request is answered with when nobody answers it.
NO_ANSWER = -32603

#: The result each relayed method expects from the client.
_ANSWERS: dict[str, TypeAdapter[Any]] = {
    "elicitation/create": TypeAdapter(types.ElicitResult),
    "sampling/createMessage": TypeAdapter(types.CreateMessageResult | types.CreateMessageResultWithTools),
    "roots/list": TypeAdapter(types.ListRootsResult),
}

#: ``await progress(progress, total, message)``, as passthrough.Progress.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


def holds(caller: Caller | None, session_modern: bool) -> bool:
    """Whether a call of ``caller`` on a session of that era is held here: a 2026-07-28 client
    on a 2025-era session."""
    return bool(getattr(caller, "modern", False)) and not session_modern


class _Asked:
    """One request of the server, as the client is shown it, and the future its answer fills."""

    __slots__ = ("answer", "method", "params")

    def __init__(self, method: str, params: dict[str, Any], answer: asyncio.Future[Any]) -> None:
        self.method, self.params, self.answer = method, params, answer


class HeldCall:
    """One server call held open for a 2026-07-28 client (the module doc). The relay sees it on
    the call's scope in flight (relay.py's ``Holder``): :attr:`caller` is the client's latest
    round, :meth:`ask` parks a request of the server."""

    def __init__(self, held_id: str, principal: str | None, origin: Origin, rules: RelayRules) -> None:
        self.held_id, self.principal, self.origin, self.rules = held_id, principal, origin, rules
        self.caller: Caller | None = None
        self.task: asyncio.Future[dict[str, Any]] | None = None
        self._asked: dict[str, _Asked] = {}  # key -> a request the server waits on, not yet answered
        self._arrived = asyncio.Event()
        self._progress: Progress | None = None
        self._count = 0
        self._refusal: types.ErrorData | None = None  # once given up: every request's answer

    def begin(self, start: Callable[[HeldCall], Awaitable[dict[str, Any]]]) -> None:
        """The server's call, ``start(self)``, as this held call's own task."""
        self.task = asyncio.ensure_future(start(self))

    def serve(self, caller: Caller | None, progress: Progress | None) -> None:
        """The client's current round: its log messages and progress go there."""
        self.caller, self._progress = caller, progress

    async def progressed(self, value: float, total: float | None, message: str | None) -> None:
        """The server's progress for this call, to the client's current round."""
        if self._progress is not None:
            await self._progress(value, total, message)

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """A request of the server (already labelled, screened and redacted): waits for the
        client's answer on a retry, or for the error :meth:`expire` gives it."""
        if self._refusal is not None:
            return self._refusal
        self._count += 1
        key = f"{method.split('/')[0]}-{self._count}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._asked[key] = _Asked(method, params, future)
        self._arrived.set()
        try:
            return await future
        finally:
            self._asked.pop(key, None)

    def deliver(self, responses: dict[str, Any]) -> None:
        """The client's responses (a retry), each to the request of the server it answers:
        validated, through the guard and the redactor (relay.py's :func:`answered`)."""
        for key, value in responses.items():
            asked = self._asked.get(key)
            if asked is None or asked.answer.done():
                continue  # not a request this call is waiting on (asked before, or never)
            try:
                typed = _ANSWERS[asked.method].validate_python(value)
            except ValidationError:
                asked.answer.set_result(
                    types.ErrorData(
                        code=types.INVALID_PARAMS,
                        message=f"mcp-setup: the client's answer was not a {asked.method} result.",
                    )
                )
                continue
            asked.answer.set_result(answered(asked.method, typed, self.rules, self.principal))

    def waiting(self) -> dict[str, _Asked]:
        """The requests the server still waits on (an answer delivered is no longer waiting)."""
        return {key: asked for key, asked in self._asked.items() if not asked.answer.done()}

    def give_up(self, error: types.ErrorData) -> None:
        """Every request still waiting is answered with ``error``; later ones at once."""
        self._refusal = error
        for asked in self._asked.values():
            if not asked.answer.done():
                asked.answer.set_result(error)

    async def next_event(self) -> None:
        """Until the call ends or the server sends a request nobody was shown yet."""
        assert self.task is not None
        self._arrived.clear()
        arrived = asyncio.ensure_future(self._arrived.wait())
        try:
            await asyncio.wait([self.task, arrived], return_when=asyncio.FIRST_COMPLETED)
        finally:
            arrived.cancel()


class HeldCalls:
    """The calls held for 2026-07-28 clients, by the id their ``requestState`` names. ``wait``:
    how long a server's request waits for the client's retry (seconds); ``tell(text)``: how the
    user hears that one was given up (the relay's rules tell by default)."""

    def __init__(self, states: InputStates, wait: float = RETRY_WAIT_SECONDS) -> None:
        self.states, self.wait = states, wait
        self._held: dict[str, HeldCall] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._ending: set[asyncio.Task[None]] = set()

    def resume(self, caller: Caller | None, where: str) -> tuple[HeldCall | None, dict[str, Any]]:
        """The held call ``caller``'s retry names, and its responses; ``(None, {})`` when the call
        is not a retry. A state not given for ``where``, one no longer waiting (answered, given
        up) or another principal's is :class:`RequestStateInvalid`."""
        retry: InputRetry | None = getattr(caller, "retry", None)
        if retry is None or (retry.state is None and not retry.responses):
            return None, {}
        opened = self.states.open(retry.state, where)
        held = self._held.get(opened.held or "")
        if held is None:
            raise RequestStateInvalid(
                "The requestState names a call mcp-setup no longer holds (it ended, or its server's "
                f"request waited longer than {self.wait:g} s for this retry); call the tool again."
            )
        if held.principal != getattr(caller, "principal", None):
            raise RequestStateInvalid("The requestState belongs to another client's call.")
        return held, dict(retry.responses)

    def open(
        self,
        caller: Caller | None,
        origin: Origin,
        rules: RelayRules,
        start: Callable[[HeldCall], Awaitable[dict[str, Any]]],
    ) -> HeldCall:
        """A new held call: ``start(held)`` runs the server's call (its scope in flight holds
        ``held``, so the relay parks the server's requests there)."""
        held = HeldCall(secrets.token_urlsafe(12), getattr(caller, "principal", None), origin, rules)
        held.begin(start)
        self._held[held.held_id] = held
        return held

    async def round(
        self, held: HeldCall, caller: Caller | None, where: str, responses: dict[str, Any], progress: Progress | None
    ) -> dict[str, Any]:
        """One round of ``caller`` (the first call, or a retry with ``responses``): the call's
        result, or an input-required result with every request the server waits on."""
        timer = self._timers.pop(held.held_id, None)
        if timer is not None:
            timer.cancel()
        held.serve(caller, progress)
        held.deliver(responses)
        task = held.task
        assert task is not None
        try:
            while True:
                if task.done():
                    self._held.pop(held.held_id, None)
                    return task.result()
                waiting = held.waiting()
                if waiting:
                    return self._input_required(held, where, waiting)
                await held.next_event()
        finally:
            held.serve(None, None)
            if held.held_id in self._held:
                self._arm(held)

    def _input_required(self, held: HeldCall, where: str, waiting: dict[str, _Asked]) -> dict[str, Any]:
        asked = {key: a.method for key, a in waiting.items()}
        return {
            "resultType": "input_required",
            "inputRequests": {key: {"method": a.method, "params": a.params} for key, a in waiting.items()},
            "requestState": self.states.seal(where, None, asked, held=held.held_id),
        }

    def _arm(self, held: HeldCall) -> None:
        """The client has :attr:`wait` seconds to retry (:meth:`_expire` past it)."""
        loop = asyncio.get_running_loop()
        self._timers[held.held_id] = loop.call_later(self.wait, self._expire, held)

    def _expire(self, held: HeldCall) -> None:
        self._timers.pop(held.held_id, None)
        if self._held.pop(held.held_id, None) is None:
            return
        error = types.ErrorData(
            code=NO_ANSWER,
            message=f"mcp-setup: the client did not call again with the answer within {self.wait:g} seconds.",
        )
        asked = sorted({a.method for a in held.waiting().values()})
        held.give_up(error)
        task = asyncio.ensure_future(self._end(held, asked))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _end(self, held: HeldCall, asked: list[str]) -> None:
        """A given-up call: as long again for the server to end it, then cancelled; the result
        dropped; the user told."""
        task = held.task
        assert task is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), self.wait)
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
        what = ", ".join(asked) or "input"
        text = held.origin.says(
            f"{what} during a call; the client did not answer within {self.wait:g} seconds, so mcp-setup "
            "answered the server with an error and dropped the call's result.",
            verb="asked for",
        )
        logger.info("%s", held.rules.redactor.redact(text))
        held.rules.tell(held.rules.redactor.redact(text))

    async def aclose(self) -> None:
        """Every held call given up at once (the gateway stops)."""
        for held in list(self._held.values()):
            self._expire(held)
        for task in list(self._ending):
            task.cancel()
