"""Calls passed through as sent: a ``tools/call`` to an installed server whose answer comes back
as the JSON object the server sent (validated against the negotiated protocol by the SDK, never
re-built from models), with the server's progress notifications handed to the caller.

A server's answer that the SDK cannot read (e.g. a 2026-07-28 result without ``resultType``)
is said in words with the server's name, not as a validation dump (which may quote the result).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from setup_agent.errors import ProtocolError

__all__ = ["Progress", "raw_call"]

#: ``await progress(progress, total, message)``: one progress notification of a call.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]

_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


async def raw_call(
    client: Any, name: str, arguments: dict[str, Any], progress: Progress | None, *, label: str
) -> dict[str, Any]:
    """``tools/call`` on ``client`` (an ``mcp.Client``): the result object as the server sent it."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    try:
        result = await client.session.send_request(request, _RAW, progress_callback=progress)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in err.get("loc", ())[:2]) or "(the result)" for err in exc.errors()})
        raise ProtocolError(
            f"The server {label} answered the call of {name} with a result mcp-setup cannot read "
            f"(not a valid tools/call result for its protocol version; look at: {', '.join(fields[:5])})."
        ) from None
    return result
