"""Calls passed through as sent: a ``tools/call`` (or ``resources/read``) to an installed server
whose answer comes back as the JSON object the server sent (validated against the negotiated
protocol by the SDK, never re-built from models), with the server's progress notifications
handed to the caller; and which server a resource URI a tool result named belongs to
(:class:`ResourceLinks`), so that a client's ``resources/read`` of a ``resource_link`` reaches it.

A server's answer that the SDK cannot read (e.g. a 2026-07-28 result without ``resultType``)
is said in words with the server's name, not as a validation dump (which may quote the result).

On a 2026-07-28 connection every request carries its client's capabilities in ``_meta``; the
SDK's client stamps the ones its session declared (everything the relay can pass on), so a
request sent for a client says that client's instead (:func:`_send`): the server asks a client
only what it can answer. A retry of an input-required result carries the client's
``inputResponses`` and the server's own ``requestState`` (input_required.py).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp_types import methods as _methods
from pydantic import TypeAdapter, ValidationError

from setup_agent.errors import ProtocolError

__all__ = ["Envelope", "Progress", "ResourceLinks", "modern", "raw_call", "raw_read", "raw_request"]

#: ``await progress(progress, total, message)``: one progress notification of a call.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]

_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class Envelope:
    """What a request sent for one client carries besides its own params: the capabilities
    that client declared (2026-07-28 ``_meta``; None: the session's own), and, on the retry of
    an input-required result, the client's responses and the server's ``requestState``."""

    __slots__ = ("capabilities", "input_responses", "log_level", "request_state")

    def __init__(
        self,
        capabilities: dict[str, Any] | None = None,
        input_responses: dict[str, Any] | None = None,
        request_state: str | None = None,
        log_level: str | None = None,
    ) -> None:
        self.capabilities, self.input_responses = capabilities, input_responses
        self.request_state, self.log_level = request_state, log_level

    def retry(self, input_responses: dict[str, Any] | None, request_state: str | None) -> Envelope:
        """The same client's envelope for the next round of an input-required call."""
        return Envelope(self.capabilities, input_responses, request_state, self.log_level)

    def fill(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.input_responses is not None:
            params["inputResponses"] = self.input_responses
        if self.request_state is not None:
            params["requestState"] = self.request_state
        return params


def modern(client: Any) -> bool:
    """Whether ``client``'s session speaks 2026-07-28 or later (no server requests, MRTR)."""
    return str(getattr(getattr(client, "session", None), "protocol_version", None) or "") >= "2026"


async def _send(
    client: Any, method: str, params: dict[str, Any], envelope: Envelope | None, progress: Progress | None = None
) -> dict[str, Any]:
    """``method`` with ``params`` on ``client``'s session: the result object as the server sent
    it. The SDK's ``send_request`` stamps the session's own capabilities, which on a modern
    session are replaced here by the envelope's (the session's stamp, then the client's
    capabilities, then its dispatcher: the steps of ``send_request`` without the typed model)."""
    session = client.session
    model, params_model = _REQUESTS[method]
    request = model(params=params_model.model_validate(envelope.fill(params) if envelope else params))
    wanted = envelope.capabilities if envelope is not None else None
    level = envelope.log_level if envelope is not None else None
    stamp, dispatcher = getattr(session, "_stamp", None), getattr(session, "_dispatcher", None)
    if (wanted is None and level is None) or not modern(client) or stamp is None or dispatcher is None:
        return await session.send_request(request, _RAW, progress_callback=progress)
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {}
    stamp(data, opts)
    meta = data.setdefault("params", {}).setdefault("_meta", {})
    if wanted is not None:
        meta[types.CLIENT_CAPABILITIES_META_KEY] = wanted
    if level is not None:
        meta.setdefault(types.LOG_LEVEL_META_KEY, level)
    timeout = getattr(session, "_session_read_timeout_seconds", None)
    if timeout is not None:
        opts["timeout"] = timeout
    if progress is not None:
        opts["on_progress"] = progress
    raw: dict[str, Any] = await dispatcher.send_raw_request(method, data.get("params"), opts)
    with contextlib.suppress(KeyError):
        _methods.validate_server_result(method, session.protocol_version, raw)
    return _RAW.validate_python(raw)


async def raw_call(
    client: Any,
    name: str,
    arguments: dict[str, Any],
    progress: Progress | None,
    *,
    label: str,
    sent_as: Callable[[Any], None] | None = None,
    envelope: Envelope | None = None,
) -> dict[str, Any]:
    """``tools/call`` on ``client`` (an ``mcp.Client``): the result object as the server sent it.
    ``sent_as(token)`` hears the progress token the call goes out with, when it can be known."""
    if sent_as is not None and progress is not None:
        sent_as(_next_request_id(client))
    try:
        return await _send(client, "tools/call", {"name": name, "arguments": arguments}, envelope, progress)
    except ValidationError as exc:
        raise _unreadable_call(label, name, exc) from None


def _next_request_id(client: Any) -> int | None:
    """The id the SDK gives the next request on ``client``'s session (its progress token too),
    or None when this SDK does not say. Read just before ``send_request``: nothing awaits between
    here and the id being taken, so no other request of this loop can take it first."""
    counter = getattr(getattr(getattr(client, "session", None), "_dispatcher", None), "_next_id", None)
    return counter + 1 if isinstance(counter, int) and not isinstance(counter, bool) else None


def _unreadable_call(label: str, name: str, exc: ValidationError) -> ProtocolError:
    """A ``tools/call`` result that is not one for the server's protocol version, in words: the
    fields the check named, never their values (the result may quote a secret)."""
    fields = sorted({".".join(str(p) for p in e.get("loc", ())[:2]) or "(the result)" for e in exc.errors()})
    return ProtocolError(
        f"The server {label} answered the call of {name} with a result mcp-setup cannot read "
        f"(not a valid tools/call result for its protocol version; look at: {', '.join(fields[:5]) or '(the result)'})."
    )


async def raw_read(client: Any, uri: str, *, label: str) -> dict[str, Any]:
    """``resources/read`` of ``uri`` on ``client``: the result object as the server sent it."""
    request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
    try:
        return await client.session.send_request(request, _RAW)
    except ValidationError:
        raise ProtocolError(
            f"The server {label} answered a resources/read with a result mcp-setup cannot read."
        ) from None


#: The requests besides tools/call passed through (prompts, resources, completions): method →
#: (request model, params model or None).
_REQUESTS: dict[str, tuple[Any, Any]] = {
    "tools/call": (types.CallToolRequest, types.CallToolRequestParams),
    "prompts/list": (types.ListPromptsRequest, types.PaginatedRequestParams),
    "prompts/get": (types.GetPromptRequest, types.GetPromptRequestParams),
    "resources/list": (types.ListResourcesRequest, types.PaginatedRequestParams),
    "resources/templates/list": (types.ListResourceTemplatesRequest, types.PaginatedRequestParams),
    "completion/complete": (types.CompleteRequest, types.CompleteRequestParams),
}


async def raw_request(
    client: Any, method: str, params: dict[str, Any] | None, *, label: str, envelope: Envelope | None = None
) -> dict[str, Any]:
    """One of :data:`_REQUESTS` on ``client``: the result object as the server sent it."""
    model, params_model = _REQUESTS[method]
    try:
        if envelope is not None and params is not None:
            return await _send(client, method, dict(params), envelope)
        request = model(params=params_model.model_validate(params) if params is not None else None)
        return await client.session.send_request(request, _RAW)
    except ValidationError:
        raise ProtocolError(f"The server {label} answered a {method} with a result mcp-setup cannot read.") from None


class ResourceLinks:
    """The resource URIs tool results named (``resource_link`` and embedded resources), and the
    server each came from; the newest :attr:`limit` are kept."""

    limit = 2000

    def __init__(self) -> None:
        self._owner: OrderedDict[str, str] = OrderedDict()

    def remember(self, server_id: str, result: dict[str, Any]) -> None:
        content = result.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            uri = block.get("uri") if block.get("type") == "resource_link" else None
            if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
                uri = block["resource"].get("uri")
            if isinstance(uri, str) and uri:
                self._owner[uri] = server_id
                self._owner.move_to_end(uri)
        while len(self._owner) > self.limit:
            self._owner.popitem(last=False)

    def owner(self, uri: str) -> str | None:
        return self._owner.get(uri)
