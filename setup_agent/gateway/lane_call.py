"""A proxied ``tools/call`` through a live connection's raw lane (setup_agent/launch/raw_lane.py):
the same request the SDK's session would send, its answer read as the SDK reads it, without the
SDK's memory streams in between ("faster, by passing through").

:func:`lane_call` builds the request from the SDK's own model and the session's own stamp (the
negotiated version's ``_meta`` on a 2026-07-28 session), and reads the answer as
:func:`~setup_agent.gateway.passthrough.raw_call` does through the SDK: an error answer is the
SDK's ``MCPError``, a 2026-07-28 answer without ``resultType`` is filled in where unambiguous
(lenient.py's rule), a negative ``ttlMs`` is floored, the result is checked against the
negotiated version's schema (a result that fails is the same :class:`ProtocolError` in words),
and a later revision's fields are dropped. It returns None, having sent nothing, when the
session is not one it can drive so (no negotiated version, or an SDK without the stamp): the
caller then goes the SDK's way.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types import methods as _methods
from pydantic import ValidationError

from setup_agent.errors import ProtocolError
from setup_agent.launch import LaneClosed, fill_result

from .passthrough import Progress, unreadable_call

__all__ = ["lane_call"]


@cache
def _later_fields(version: str) -> frozenset[str]:
    """The result keys a later revision declares but ``version`` does not (the SDK's own rule)."""
    try:
        from mcp.client.session import _later_revision_fields
    except ImportError:  # an SDK without it: nothing dropped
        return frozenset()
    return _later_revision_fields("tools/call", version)


async def lane_call(
    client: Any, lane: Any, name: str, arguments: dict[str, Any], progress: Progress | None, *, label: str
) -> dict[str, Any] | None:
    """``tools/call`` on ``lane`` beside ``client``'s session: the result object as the server
    sent it, or None (nothing sent) when this session cannot be driven so."""
    session = getattr(client, "session", None)
    version = getattr(session, "_negotiated_version", None)
    stamp = getattr(session, "_stamp", None)
    if not isinstance(version, str) or stamp is None or lane is None or lane.closed:
        return None
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    stamp(data, {})

    on_progress = None
    if progress is not None:

        async def on_progress(params: dict[str, Any]) -> None:
            value = params.get("progress")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total, message = params.get("total"), params.get("message")
                await progress(
                    float(value),
                    float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None,
                    message if isinstance(message, str) else None,
                )

    try:
        answer = await lane.request("tools/call", data.get("params") or {}, on_progress)
    except LaneClosed:
        raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
    error = answer.get("error")
    if error is not None:
        try:
            typed = types.ErrorData.model_validate(error)
        except ValidationError:
            raise ProtocolError(
                f"The server {label} answered the call of {name} with an error mcp-setup cannot read."
            ) from None
        raise MCPError(code=typed.code, message=typed.message, data=typed.data)
    raw = answer.get("result")
    if not isinstance(raw, dict):
        raise unreadable_call(label, name)
    raw = fill_result("tools/call", raw, version)
    ttl = raw.get("ttlMs")
    if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    try:
        _methods.validate_server_result("tools/call", version, raw)
    except KeyError:
        pass
    except ValidationError as exc:
        raise unreadable_call(label, name, exc) from None
    foreign = _later_fields(version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return raw
