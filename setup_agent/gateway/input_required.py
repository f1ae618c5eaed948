"""An installed server's input-required results (2026-07-28's multi-round-trip requests, MRTR),
relayed to the client of the call in that client's own era.

A server on a 2026-07-28 connection does not send requests during a call: it answers
``resultType: "input_required"`` with ``inputRequests`` (elicitation, sampling, roots) and an
opaque ``requestState``, and expects the call again with ``inputResponses`` and that state.

- **A 2026-07-28 client** gets the input-required result: each request labelled and screened as
  a relayed request is (relay.py: the server's name and ``_meta`` origin, no credential forms,
  no look-alike of mcp-setup's pages, sampling without extra context), one the client did not
  declare the capability for left out (never sent to it), and a ``requestState`` of the
  gateway's own (:class:`InputStates`) with the server's kept intact inside, signed: a state
  the client changed is refused (:class:`~setup_agent.errors.RequestStateInvalid`). On the
  retry the client's responses pass the guard (an elicitation's, like a tool argument) and the
  redactor, and go to the server with its own state.
- **A 2025-11-25 client** is asked each request as the server would have asked it on a
  2025-era connection (relay.py's :func:`~setup_agent.gateway.relay.ask`, during the call, as
  related to it); the gateway retries the call with the answers and the server's state, for at
  most :data:`MAX_ROUNDS` rounds. A request the client cannot take ends the call with an error
  that says so.

The key that signs the gateway's states is this process's: a retry that reaches another
process (a team's other replica) is refused as a state it cannot read, and the client starts
the call again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import mcp_types as types

from setup_agent.errors import ProtocolError, RequestStateInvalid, SetupError

from .relay import Caller, ask, capability_of, declared, labelled, screen
from .relay_rules import Origin, RelayRules, refused_answer

__all__ = ["MAX_ROUNDS", "InputRelay", "InputRetry", "InputStates"]

#: Rounds of input-required results the gateway answers for a 2025-era client before it gives up
#: (the SDKs' own default).
MAX_ROUNDS = 10

#: ``await again(input_responses, request_state)``: the same request to the same server, again.
Again = Callable[[dict[str, Any] | None, str | None], Awaitable[dict[str, Any]]]


class InputRetry(NamedTuple):
    """A client's retry of a call the gateway answered input-required: its ``inputResponses``
    and the gateway's ``requestState`` it was given (None when the client sent none)."""

    responses: dict[str, Any]
    state: str | None


class Opened(NamedTuple):
    """A gateway state opened: the server's own state, the method of each request asked, and the
    call held open for it (held_calls.py; None: the server's own input-required result)."""

    server_state: str | None
    asked: dict[str, str]
    held: str | None = None


class InputStates:
    """The gateway's ``requestState``: what it needs on the retry (the server and the request it
    belongs to, the server's own state byte for byte, the method of each request it relayed, or
    the 2025-era server's call it holds open), encoded and signed with a key of this process."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()

    def seal(self, where: str, server_state: str | None, asked: dict[str, str], *, held: str | None = None) -> str:
        """The state for one input-required answer of the request ``where`` (server and name);
        ``held``: the id of the server's call held open for it (held_calls.py)."""
        state: dict[str, Any] = {"w": where, "s": server_state, "a": asked}
        if held is not None:
            state["h"] = held
        body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
        return f"{body}.{self._mac(body)}"

    def open(self, token: str | None, where: str) -> Opened:
        """The state a client sent back, or :class:`RequestStateInvalid` when it is not one this
        gateway gave for ``where`` (changed, made up, another request's or another process's)."""
        if not token or "." not in token:
            raise RequestStateInvalid("The requestState is not one mcp-setup gave for this request.")
        body, mac = token.rsplit(".", 1)
        if not hmac.compare_digest(mac, self._mac(body)):
            raise RequestStateInvalid("The requestState failed its integrity check (changed, or not mcp-setup's).")
        try:
            state = json.loads(base64.urlsafe_b64decode(body.encode()))
        except ValueError:
            raise RequestStateInvalid("The requestState is not one mcp-setup gave.") from None
        if not isinstance(state, dict) or state.get("w") != where or not isinstance(state.get("a"), dict):
            raise RequestStateInvalid("The requestState belongs to another request.")
        server_state, held = state.get("s"), state.get("h")
        return Opened(
            server_state if isinstance(server_state, str) else None,
            dict(state["a"]),
            held if isinstance(held, str) else None,
        )


def _modern(caller: Caller | None) -> bool:
    return bool(getattr(caller, "modern", False))


class InputRelay:
    """Input-required results between one server and the client of a call (the module doc)."""

    def __init__(self, states: InputStates | None = None, max_rounds: int = MAX_ROUNDS) -> None:
        self.states = states or InputStates()
        self.max_rounds = max_rounds

    def responses(self, caller: Caller | None, where: str, rules: RelayRules) -> tuple[dict[str, Any], str | None]:
        """The retry ``caller`` sent (``caller.retry``): the responses for the server, each to a
        request the gateway relayed, through the guard and the redactor, and the server's own
        state. ``({}, None)`` when the call is not a retry."""
        retry: InputRetry | None = getattr(caller, "retry", None)
        if retry is None or (retry.state is None and not retry.responses):
            return {}, None
        opened = self.states.open(retry.state, where)
        if opened.held is not None:  # a held call's (held_calls.py): its session changed era since
            raise RequestStateInvalid("The requestState names a call mcp-setup no longer holds; call the tool again.")
        principal = getattr(caller, "principal", None)
        out: dict[str, Any] = {}
        for key, value in retry.responses.items():
            method = opened.asked.get(key)
            if method is None:
                continue  # the server never asked it through this gateway
            try:
                out[key] = rules.answer(principal, value, guarded=method == "elicitation/create")
            except SetupError as exc:
                raise ProtocolError(refused_answer(exc)) from None
        return out, opened.server_state

    async def settle(
        self,
        result: dict[str, Any],
        *,
        caller: Caller | None,
        where: str,
        origin: Origin,
        rules: RelayRules,
        redactor: Any,
        again: Again,
    ) -> dict[str, Any]:
        """``result`` as the client of the call gets it: itself when it is not input-required;
        for a 2026-07-28 client the input-required result relayed; for an older one the
        requests asked and the call retried until it completes."""
        rounds = 0
        while result.get("resultType") == "input_required":
            if _modern(caller):
                return await self._relayed(result, caller, where, origin, rules, redactor)
            rounds += 1
            if rounds > self.max_rounds:
                raise ProtocolError(
                    f"{origin.title} asked for input more than {self.max_rounds} times in one call; the call was ended."
                )
            responses = await self._asked(result, caller, origin, rules, redactor)
            state = result.get("requestState")
            result = await again(responses or None, state if isinstance(state, str) else None)
        return result

    async def _relayed(
        self,
        result: dict[str, Any],
        caller: Caller | None,
        where: str,
        origin: Origin,
        rules: RelayRules,
        redactor: Any,
    ) -> dict[str, Any]:
        """The input-required result for a 2026-07-28 client (the module doc)."""
        kept: dict[str, Any] = {}
        asked: dict[str, str] = {}
        requests = result.get("inputRequests")
        for key, request in (requests if isinstance(requests, dict) else {}).items():
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                continue
            method, params = request["method"], dict(request.get("params") or {})
            if not declared(caller, capability_of(method, params)):
                continue  # refused for this client: never sent to it
            labelled(params, origin)
            if caller is not None and await screen(method, params, origin, rules, caller) is not None:
                continue  # refused (the user was told)
            kept[key] = {**request, "params": redactor.redact_obj(params)}
            asked[key] = method
        if requests and not kept:
            raise ProtocolError(f"{origin.title} needs input this client cannot give (or mcp-setup refused it).")
        state = result.get("requestState")
        server_state = state if isinstance(state, str) else None
        return {
            **{k: v for k, v in result.items() if k not in ("inputRequests", "requestState")},
            "inputRequests": kept,
            "requestState": self.states.seal(where, server_state, asked),
        }

    async def _asked(
        self, result: dict[str, Any], caller: Caller | None, origin: Origin, rules: RelayRules, redactor: Any
    ) -> dict[str, Any]:
        """The answers of a 2025-era client to each request of ``result``, asked one by one."""
        responses: dict[str, Any] = {}
        requests = result.get("inputRequests")
        for key, request in (requests if isinstance(requests, dict) else {}).items():
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                continue
            method, params = request["method"], dict(request.get("params") or {})
            capability = capability_of(method, params)
            if caller is None or capability is None or not caller.can(capability):
                raise ProtocolError(f"{origin.title} needs input ({method}) this client cannot give.")
            answer = await ask(caller, method, params, origin, rules, redactor, origin.title)
            if isinstance(answer, types.ErrorData):
                raise ProtocolError(f"{origin.title} could not be given the input it asked for: {answer.message}")
            dump = getattr(answer, "model_dump", None)
            responses[key] = dump(mode="json", by_alias=True, exclude_none=True) if dump is not None else answer
        return responses
