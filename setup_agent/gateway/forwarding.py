"""What the connection manager forwards to a connected server, as the server sent it back.

:class:`Forwarding` is held by :class:`~setup_agent.gateway.connections.ConnectionManager` and
passes a request through one of its live sessions: ``tools/call`` (progress relayed, a flood of
notifications ended, the result redacted and capped), ``logging/setLevel``, resource
subscriptions and reads, ``prompts/get`` and ``completion/complete``. It never starts or stops a
session: that is the manager's.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from setup_agent.errors import NotFound, ProtocolError

from .held_calls import HeldCall, HeldCalls, holds
from .input_required import InputRelay
from .passthrough import Envelope, Progress, raw_call, raw_read, raw_request
from .relay import Caller
from .relay_rules import Origin, RelayRules
from .relisting import modern
from .result_cap import cap_result

if TYPE_CHECKING:
    from setup_agent.secrets import Redactor

    from .live import LiveConnection
    from .passthrough import ResourceLinks

__all__ = ["Forwarding", "envelope_for"]

logger = logging.getLogger(__name__)

#: ``await once(envelope, held)``: a request sent to its server once, with ``envelope``; ``held``:
#: the call held open for a 2026-07-28 client that the server's requests are parked on.
Once = Callable[[Envelope, HeldCall | None], Awaitable[dict[str, Any]]]


def envelope_for(caller: Caller | None) -> Envelope:
    """What a request sent for ``caller`` carries (passthrough.py): the capabilities it declared,
    and the log level a 2025-era client gets without asking (all of them; on a 2026-07-28
    connection a server sends log messages only to a request that names a level)."""
    declared = getattr(caller, "capabilities", None)
    capabilities = declared() if callable(declared) else None
    level = None if caller is None or getattr(caller, "modern", False) else "debug"
    return Envelope(capabilities, log_level=level)


async def _client_for(live: LiveConnection, caller: Caller | None) -> Any:
    """The session of ``live`` a request of ``caller`` goes on: a 2025-era client's on the
    server's 2025-11-25 session (:meth:`~setup_agent.gateway.live.LiveConnection.classic`)."""
    if caller is not None and not getattr(caller, "modern", True):
        return await live.classic(caller)
    return live.client


class Forwarding:
    """Requests passed through the live sessions the manager hands it: ``live(server_id)`` (raises
    ``NotFound`` when it has none) and ``every()`` (the sessions now)."""

    def __init__(
        self,
        live: Callable[[str], LiveConnection],
        every: Callable[[], Iterable[LiveConnection]],
        redactor: Redactor,
        links: ResourceLinks,
        *,
        max_call_notifications: int,
        max_result_chars: int,
        rules: RelayRules | None = None,
        inputs: InputRelay | None = None,
        held: HeldCalls | None = None,
    ) -> None:
        self._get = live
        self._every = every
        self.redactor = redactor
        self.links = links
        #: What a relayed request is held to when its connection names no rules of its own.
        self.rules = rules or RelayRules(redactor)
        #: Servers' input-required results, relayed in each client's era (input_required.py).
        self.inputs = inputs or InputRelay()
        #: A 2025-era server's calls held open for 2026-07-28 clients (held_calls.py).
        self.held = held or HeldCalls(self.inputs.states)
        #: A call whose server sends more progress notifications than this is ended.
        self.max_call_notifications = max_call_notifications
        #: A proxied result is cut beyond this many characters, with a note (0: no cap).
        self.max_result_chars = max_result_chars

    async def call_tool(
        self,
        server_id: str,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        caller: Caller | None = None,
    ) -> dict[str, Any]:
        """The server's ``tools/call`` result as it sent it (a JSON object, never re-built from
        models, so fields this gateway does not know survive), redacted. ``progress(progress,
        total, message)`` hears the server's progress notifications for this call; ``caller``
        gets the server's requests and log messages meanwhile (relay.py), as input-required
        results when it is a 2026-07-28 client of a 2025-era server (held_calls.py)."""
        live = self._get(server_id)
        if live.status.status != "connected" or live.client is None:
            raise NotFound(f"Server {server_id} is not connected ({live.status.status}).")
        live.touch()
        limit, heard = self.max_call_notifications, 0
        label = live.server.title or live.server.qualified_name
        call: asyncio.Future[dict[str, Any]] | None = None
        relay_to: Progress | None = progress  # a held call's: its client's latest round

        async def heard_progress(value: float, total: float | None, message: str | None) -> None:
            nonlocal heard
            heard += 1
            if limit and heard == limit + 1 and call is not None:
                call.cancel()  # a flood: end the call rather than spend the loop on it
            elif relay_to is not None and (not limit or heard <= limit):
                await relay_to(value, total, message)

        client = await _client_for(live, caller)

        async def once(envelope: Envelope, held: HeldCall | None) -> dict[str, Any]:
            nonlocal call, relay_to
            with live.inflight.add(caller) as scope:
                if held is not None:
                    scope.hold(held)
                    relay_to = held.progressed  # the server's progress, to the client's latest round
                call = asyncio.ensure_future(
                    raw_call(
                        client,
                        name,
                        arguments or {},
                        heard_progress,
                        label=label,
                        sent_as=scope.bind,
                        envelope=envelope,
                    )
                )
                try:
                    return await asyncio.shield(call)
                except asyncio.CancelledError:
                    if heard <= limit or not call.cancelled():
                        call.cancel()
                        raise
                    raise ProtocolError(
                        f"The server sent more than {limit:,} notifications during one call; the call was ended."
                    ) from None
                finally:
                    live.touch()

        where = f"{server_id}\ntools/call\n{name}"
        result = await self._asking(live, client, caller, where, once, progress)
        self.links.remember(server_id, result)
        return cap_result(
            self.redactor.redact_obj(result), self.max_result_chars
        )  # after redaction: a cut never splits a secret

    async def _asking(
        self,
        live: LiveConnection,
        client: Any,
        caller: Caller | None,
        where: str,
        once: Once,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """The answer to a request of ``caller`` (``where``: server, method, name) that its server
        may answer by asking the client something: ``once(envelope, held)`` sends it once. A
        2026-07-28 client of a 2025-era session gets the server's requests as input-required
        results while the request is held open (held_calls.py); any other client gets a 2026
        server's input-required results in its own era (input_required.py)."""
        label = live.server.title or live.server.qualified_name
        origin = live.inflight.origin or Origin(label, label)
        rules = live.inflight.rules or self.rules
        if holds(caller, modern(client)):
            held, answers = self.held.resume(caller, where)
            if held is None:
                held = self.held.open(caller, origin, rules, lambda held: once(envelope_for(caller), held))
            return await self.held.round(held, caller, where, answers, progress)
        responses, server_state = self.inputs.responses(caller, where, rules)
        envelope = envelope_for(caller).retry(responses or None, server_state)
        with live.inflight.waiting():  # its questions to the client, between rounds, keep it running
            return await self.inputs.settle(
                await once(envelope, None),
                caller=caller,
                where=where,
                origin=origin,
                rules=rules,
                redactor=self.redactor,
                again=lambda answers, state: once(envelope.retry(answers, state), None),
            )

    async def set_logging_level(self, level: str) -> None:
        """``logging/setLevel`` on every connected server that declared ``logging``."""
        for live in list(self._every()):
            for client in (live.client, live.classic_if_open()):  # its 2025-11-25 session too, once open
                caps = getattr(client, "server_capabilities", None) if client is not None else None
                if caps is None or getattr(caps, "logging", None) is None:
                    continue
                try:
                    await client.set_logging_level(level)
                except Exception as exc:  # noqa: BLE001 - one server's refusal is not the client's problem
                    logger.info("logging/setLevel on %s failed: %s", live.server.server_id, type(exc).__name__)

    async def subscribe(self, server_id: str, uri: str, on: bool) -> bool:
        """``resources/subscribe`` (or ``unsubscribe``) at a connected server that declared it: on a
        2026-07-28 connection through its listen stream (relisting.py), else as the request."""
        live = self._get(server_id)
        client = live.client
        caps = getattr(client, "server_capabilities", None) if client is not None else None
        if not getattr(getattr(caps, "resources", None), "subscribe", False):
            return False
        if modern(client):
            followed = await live.relisting.follow(uri, on)
        else:
            from mcp.shared.exceptions import MCPDeprecationWarning

            # On a 2025-era session (2025-11-25 and before) resources/subscribe is the spec's call:
            # only 2026-07-28 replaced it with subscriptions/listen (the branch above). The SDK warns
            # whenever the request is made, whatever the session's version; made here on purpose, so
            # its warning is silenced for this call alone: the filter covers only making the request,
            # no await runs under it (catch_warnings is process-wide; other tasks keep their warnings).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                session = client.session
                request = session.subscribe_resource(uri) if on else session.unsubscribe_resource(uri)
            await request
            followed = True
        if on:  # the idle stop spares a server while a client follows one of its resources
            live.subscriptions.add(uri)
        else:
            live.subscriptions.discard(uri)
        return followed

    async def read_resource(self, server_id: str, uri: str) -> dict[str, Any]:
        """``resources/read`` on a connected server, as it answered, redacted."""
        live = self._get(server_id)
        if live.status.status != "connected" or live.client is None:
            raise NotFound(f"Server {server_id} is not connected ({live.status.status}).")
        live.touch()
        result = await raw_read(live.client, uri, label=live.server.title or live.server.qualified_name)
        return self.redactor.redact_obj(result)

    async def request(
        self, server_id: str, method: str, params: dict[str, Any] | None, *, caller: Caller | None = None
    ) -> dict[str, Any]:
        """``prompts/get`` or ``completion/complete`` on a connected server, as it answered,
        redacted; while a prompt is got, what its server asks reaches ``caller`` as it would
        during a tool call (:meth:`_asking`)."""
        live = self._get(server_id)
        if live.status.status != "connected" or live.client is None:
            raise NotFound(f"Server {server_id} is not connected ({live.status.status}).")
        live.touch()
        client, label = await _client_for(live, caller), live.server.title or live.server.qualified_name
        if method != "prompts/get" or params is None:
            return self.redactor.redact_obj(await raw_request(client, method, params, label=label))
        where = f"{server_id}\nprompts/get\n{params.get('name')}"

        async def once(envelope: Envelope, held: HeldCall | None) -> dict[str, Any]:
            with live.inflight.add(caller) as scope:
                if held is not None:
                    scope.hold(held)
                return await raw_request(client, method, params, label=label, envelope=envelope)

        result = await self._asking(live, client, caller, where, once)
        return self.redactor.redact_obj(result)
