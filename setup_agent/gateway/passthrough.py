"""Calls passed through as sent: a ``tools/call`` (or ``resources/read``) to an installed server
whose answer comes back as the JSON object the server sent (validated against the negotiated
protocol by the SDK, never re-built from models), with the server's progress notifications
handed to the caller; and which server a resource URI a tool result named belongs to
(:class:`ResourceLinks`), so that a client's ``resources/read`` of a ``resource_link`` reaches it.

A server's answer that the SDK cannot read (e.g. a 2026-07-28 result without ``resultType``)
is said in words with the server's name, not as a validation dump (which may quote the result).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from setup_agent.errors import ProtocolError

__all__ = ["Progress", "ResourceLinks", "raw_call", "raw_read", "raw_request"]

#: ``await progress(progress, total, message)``: one progress notification of a call.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]

_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


async def raw_call(
    client: Any,
    name: str,
    arguments: dict[str, Any],
    progress: Progress | None,
    *,
    label: str,
    sent_as: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """``tools/call`` on ``client`` (an ``mcp.Client``): the result object as the server sent it.
    ``sent_as(token)`` hears the progress token the call goes out with, when it can be known."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    if sent_as is not None and progress is not None:
        sent_as(_next_request_id(client))
    try:
        result = await client.session.send_request(request, _RAW, progress_callback=progress)
    except ValidationError as exc:
        raise _unreadable_call(label, name, exc) from None
    return result


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
    "prompts/list": (types.ListPromptsRequest, types.PaginatedRequestParams),
    "prompts/get": (types.GetPromptRequest, types.GetPromptRequestParams),
    "resources/list": (types.ListResourcesRequest, types.PaginatedRequestParams),
    "resources/templates/list": (types.ListResourceTemplatesRequest, types.PaginatedRequestParams),
    "completion/complete": (types.CompleteRequest, types.CompleteRequestParams),
}


async def raw_request(client: Any, method: str, params: dict[str, Any] | None, *, label: str) -> dict[str, Any]:
    """One of :data:`_REQUESTS` on ``client``: the result object as the server sent it."""
    model, params_model = _REQUESTS[method]
    request = model(params=params_model.model_validate(params) if params is not None else None)
    try:
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
