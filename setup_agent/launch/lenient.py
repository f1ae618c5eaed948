"""Answers of a server read leniently, where a lenient client (Claude Desktop, the TypeScript SDK)
would accept them and the Python SDK would not.

A tool's ``inputSchema`` without ``type`` (npm ``mcp-obsidian`` 1.0.0 lists
``{"$schema": "…draft-07…"}``: a schema conversion that lost its object) is read as
``"type": "object"`` (a tool's arguments are an object, whatever the schema says of them), with
a note in the log naming the server and the tools (:func:`object_inputs`).

A 2026-07-28 server: that revision makes ``resultType`` (and, on cacheable results, ``ttlMs`` and ``cacheScope``)
required, and the SDK rejects an answer without them: a server that negotiated 2026-07-28
but omits them would fail every call. Where the content is unambiguous (the answer carries
the field that only that method's complete result has: ``content`` for ``tools/call``,
``tools`` for ``tools/list``, …) the missing fields are filled in (``complete``; no caching)
before the SDK validates the answer. Anything else is left for the SDK to reject (the gateway
then says so in words, setup_agent/gateway/passthrough.py).

It wraps the one client session's raw request sender (``session._dispatcher``, a private
attribute of the SDK's ``ClientSession``); when the SDK has no such attribute nothing changes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["fill_result", "object_inputs", "read_leniently"]

logger = logging.getLogger(__name__)

#: The field only a complete result of each method carries.
_CONTENT = {
    "tools/call": "content",
    "tools/list": "tools",
    "prompts/list": "prompts",
    "prompts/get": "messages",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "resources/read": "contents",
    "completion/complete": "completion",
}
_CACHEABLE = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")


def fill_result(method: str, raw: Any, version: str | None) -> Any:
    """``raw`` with ``resultType`` (and cache fields) filled in where unambiguous, else as is."""
    if version not in MODERN_PROTOCOL_VERSIONS or not isinstance(raw, dict) or "resultType" in raw:
        return raw
    key = _CONTENT.get(method)
    if key is None or key not in raw:
        return raw
    out = {**raw, "resultType": "complete"}
    if method in _CACHEABLE:
        out.setdefault("ttlMs", 0)
        out.setdefault("cacheScope", "private")
    return out


def object_inputs(method: str, raw: Any) -> tuple[Any, list[str]]:
    """A ``tools/list`` answer with ``"type": "object"`` filled into each tool input schema (a JSON
    object) that lacks it, and the names of the tools so read; anything else as is (a tool with
    no input schema at all stays for the SDK to refuse, in words: setup_agent/setup/probe.py)."""
    tools = raw.get("tools") if method == "tools/list" and isinstance(raw, dict) else None
    if not isinstance(tools, list):
        return raw, []
    filled, names = [], []
    for tool in tools:
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        if isinstance(tool, dict) and isinstance(schema, dict) and "type" not in schema:
            tool = {**tool, "inputSchema": {**schema, "type": "object"}}
            names.append(str(tool.get("name")))
        filled.append(tool)
    return ({**raw, "tools": filled}, names) if names else (raw, [])


def read_leniently(client: Client, label: str) -> None:
    """Fill in what a sloppy 2026-07-28 server leaves out, on every answer ``client`` reads."""
    session = getattr(client, "session", None)
    dispatcher = getattr(session, "_dispatcher", None)
    send = getattr(dispatcher, "send_raw_request", None)
    if dispatcher is None or send is None or getattr(dispatcher, "_mcp_setup_lenient", False):
        return
    warned = False

    async def lenient(method: str, params: Any, opts: Any = None) -> Any:
        nonlocal warned
        raw, schemaless = object_inputs(method, await send(method, params, opts))
        if schemaless:
            logger.warning(
                "%s lists tools whose input schema has no type (%s): read as taking an object of arguments, "
                "as lenient clients do",
                label,
                ", ".join(schemaless[:10]),
            )
        filled = fill_result(method, raw, getattr(session, "_negotiated_version", None))
        if filled is not raw and not warned:
            warned = True
            logger.warning(
                "%s negotiated 2026-07-28 but answers without resultType; its answers are read leniently", label
            )
        return filled

    try:
        dispatcher.send_raw_request = lenient
        dispatcher._mcp_setup_lenient = True
    except AttributeError:  # a dispatcher with slots: strict, as the SDK reads it
        pass
