"""The gateway's own tools in the MCP face: which tools ``tools/list`` shows
(``MCP_SETUP_GATEWAY_TOOLS``: ``all`` lists every installed tool that fits the context budget,
``MCP_SETUP_TOOLS_BUDGET``: the most recently used first, then by server in install order;
``discover`` only the setup tools and the
find/call pair), the pair's calls (see :mod:`setup_agent.gateway.discover`), and
the install result's sentence that the pair works at once, and reads of the resources that
installed servers' tool results link to.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from setup_agent.gateway import (
    CALL_TOOL,
    DISCOVER_NAMES,
    DISCOVER_SPECS,
    FIND_TOOLS,
    within_budget,
)
from setup_agent.setup import FACE_TOKENS, TOOL_SPECS

from .passing import LIST_ENVELOPE

if TYPE_CHECKING:
    from app.runtime import Runtime
    from setup_agent.store import Catalog

__all__ = [
    "OWN_TOKENS",
    "call_installed",
    "face_listing",
    "install_hint",
    "listed_tools",
    "read_installed",
    "used_tool",
]


#: What the face's own tools take of a model's context (the setup tools and the find/call pair).
OWN_TOKENS = FACE_TOKENS


def listed_tools(
    mode: str | None, catalog: Catalog, *, budget: int = 0, recent: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """What ``tools/list`` shows: the setup tools, the find/call pair and (``all``, the default)
    the installed tools as their servers sent them, as many as fit ``budget`` tokens (0: every
    one), the ``recent``ly used first, then by server in install order
    (:func:`~setup_agent.gateway.within_budget`); the pair then says how many more there are, of
    which servers."""
    return face_listing(mode, catalog, budget=budget, recent=recent)[0]


def face_listing(
    mode: str | None, catalog: Catalog, *, budget: int = 0, recent: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], bool]:
    """:func:`listed_tools`, and whether the budget left installed tools out (only then can a
    call of an unlisted tool change what is listed)."""
    if mode == "discover":
        return [*TOOL_SPECS, *DISCOVER_SPECS], False
    listing = within_budget(catalog, OWN_TOKENS, budget, recent)
    note = listing.note()
    pair = [{**spec, "description": spec["description"] + note} for spec in DISCOVER_SPECS] if note else DISCOVER_SPECS
    return [*TOOL_SPECS, *pair, *listing.tools], bool(listing.unlisted)


def used_tool(name: str, arguments: dict[str, Any]) -> str | None:
    """The installed tool a call uses (by its gateway name; the pair's call names it in its
    arguments), or None (``mcp_setup_find_tools`` uses none)."""
    if name == FIND_TOOLS:
        return None
    if name == CALL_TOOL:
        target = arguments.get("name")
        return target if isinstance(target, str) else None
    return name


def _json_result(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}],
        "structuredContent": result,
        "isError": result.get("ok") is False,
    }


async def call_installed(
    runtime: Runtime, name: str, arguments: dict[str, Any], *, session: str, progress: Any = None, caller: Any = None
) -> dict[str, Any]:
    """An installed tool's call (raises :class:`~setup_agent.gateway.UnknownTool`), or the pair's;
    ``caller`` answers what the server asks the client meanwhile."""
    if name in DISCOVER_NAMES:
        return await call_discover(runtime, name, arguments, session=session, progress=progress, caller=caller)
    return await runtime.gateway.call(name, arguments, session=session, progress=progress, caller=caller)


async def read_installed(runtime: Runtime, uri: str) -> dict[str, Any]:
    """``resources/read`` of a URI an installed server's tool result named, as it answered."""
    from mcp import MCPError

    from setup_agent.errors import JSONRPC_INVALID_PARAMS, SetupError
    from setup_agent.gateway import UnknownResource

    try:
        result = await runtime.gateway.read_resource(uri)
    except UnknownResource:
        raise MCPError(JSONRPC_INVALID_PARAMS, "Unknown resource: resources/list lists them.") from None
    except SetupError as exc:
        raise MCPError(JSONRPC_INVALID_PARAMS, runtime.gateway.redactor.redact(exc.message)) from None
    except MCPError as exc:  # the server's own error, redacted on the way back
        raise MCPError(exc.error.code, runtime.gateway.redactor.redact(exc.error.message)) from None
    return {**LIST_ENVELOPE, **result}  # 2026-07-28 wants resultType, ttlMs and cacheScope (the server's win)


async def call_discover(
    runtime: Runtime, name: str, arguments: dict[str, Any], *, session: str, progress: Any = None, caller: Any = None
) -> dict[str, Any]:
    """``mcp_setup_find_tools`` or ``mcp_setup_call_tool`` (a tools/call result, plain JSON)."""
    from setup_agent.gateway import UnknownTool, find_tools

    gateway = runtime.gateway
    if name == FIND_TOOLS:
        query, limit = arguments.get("query", ""), arguments.get("limit", 10)
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool):
            return _invalid("query must be a string and limit an integer.")
        tools = find_tools(await gateway.ready(), query, limit)
        return _json_result({"ok": True, "tools": tools, "count": len(tools)})
    assert name == CALL_TOOL
    target, args = arguments.get("name"), arguments.get("arguments") or {}
    if not isinstance(target, str) or not isinstance(args, dict):
        return _invalid("name must be a tool's gateway name (a string) and arguments an object.")
    try:
        return await gateway.call(target, args, session=session, progress=progress, caller=caller)
    except UnknownTool:
        return _invalid(
            f"No installed, enabled and approved tool is named {target[:80]!r}; mcp_setup_find_tools lists them."
        )


def _invalid(message: str) -> dict[str, Any]:
    return _json_result({"ok": False, "error": {"code": "invalid_input", "message": message}})


def install_hint(result: dict[str, Any]) -> dict[str, Any]:
    """An install result that connected, with the sentence that its tools work at once (also in a
    client that shows new tools only after a restart)."""
    if result.get("status") != "connected" or result.get("ok") is False:
        return result
    use_now = (
        "Its tools are callable now: find them with mcp_setup_find_tools and call them with "
        "mcp_setup_call_tool (this works even if the client does not show the new tools yet)."
    )
    if result.get("left_out_by_user"):  # not a failure, the user's choice
        use_now += " The user left out the tools in left_out_by_user: they are not available; do not try them."
    return {**result, "use_now": use_now}
