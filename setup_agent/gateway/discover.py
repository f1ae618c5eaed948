"""Two gateway tools for clients that never re-list (Claude Desktop, the Claude Code desktop
app) or that want a small context: ``mcp_setup_find_tools`` searches the installed, enabled,
approved tools (the catalog: what ``tools/list`` would list) and ``mcp_setup_call_tool`` calls
one of them through :meth:`~setup_agent.gateway.router.Gateway.call` (the same guard, pins,
redactor and size cap as a direct call).

They are the gateway's, not the setup sub-agent's: no agent allowlist names them. With
``MCP_SETUP_GATEWAY_TOOLS=discover`` a face lists only the setup tools and these two.
"""

from __future__ import annotations

import re
from typing import Any

from setup_agent.store import Catalog, GatewayTool

__all__ = ["CALL_TOOL", "DISCOVER_NAMES", "DISCOVER_SPECS", "FIND_TOOLS", "find_tools"]

FIND_TOOLS = "mcp_setup_find_tools"
CALL_TOOL = "mcp_setup_call_tool"
DISCOVER_NAMES = frozenset({FIND_TOOLS, CALL_TOOL})
MAX_LIMIT = 50

DISCOVER_SPECS: list[dict[str, Any]] = [
    {
        "name": FIND_TOOLS,
        "title": "Find installed tools",
        "description": (
            "Search the tools of the installed MCP servers by name and description, also those installed "
            "after this session listed its tools. Returns each tool's gateway name, title, description and "
            "input schema, best match first; call one with mcp_setup_call_tool."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for, e.g. 'issue github' or 'weather'."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 10},
            },
            "required": ["query"],
        },
        "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    },
    {
        "name": CALL_TOOL,
        "title": "Call an installed tool",
        "description": (
            "Call a tool of an installed MCP server by the gateway name mcp_setup_find_tools gave, with its "
            "arguments. Returns that tool's own result."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's gateway name, e.g. 'github__create_issue'."},
                "arguments": {"type": "object", "description": "The tool's arguments (its input schema)."},
            },
            "required": ["name"],
        },
        "annotations": {"destructiveHint": True, "openWorldHint": True},
    },
]

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _score(entry: GatewayTool, words: list[str], phrase: str) -> float:
    tool = entry.tool
    name = " ".join(_words(f"{entry.name} {tool.get('name', '')}"))
    title = " ".join(_words(str(tool.get("title") or (tool.get("annotations") or {}).get("title") or "")))
    server = " ".join(_words(f"{entry.server.slug} {entry.server.title or ''} {entry.server.qualified_name}"))
    description = " ".join(_words(str(tool.get("description") or "")))
    score = 0.0
    name_words, title_words, server_words, description_words = (
        set(text.split()) for text in (name, title, server, description)
    )
    for word in words:
        part = len(word) >= 3  # a part of a word counts from three letters on ("issu" in "issues")
        if word in name_words:
            score += 4
        elif part and word in name:
            score += 2.5
        if word in title_words:
            score += 2
        elif part and word in title:
            score += 1
        if word in server_words or (part and word in server):
            score += 1
        if word in description_words:
            score += 1
        elif part and word in description:
            score += 0.5
    if phrase and (phrase in name or phrase in description):
        score += 2
    return score


def find_tools(catalog: Catalog, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """The catalog's tools that match ``query`` (every word counts; names weigh most), ranked;
    an empty query lists them all (up to ``limit``)."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    words = _words(query)
    phrase = " ".join(words)
    ranked: list[tuple[float, str, GatewayTool]] = []
    for entry in catalog.tools():
        score = _score(entry, words, phrase) if words else 1.0
        if score > 0:
            ranked.append((score, entry.name, entry))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    out = []
    for *_, entry in ranked[:limit]:
        tool = entry.tool
        item: dict[str, Any] = {
            "name": entry.name,
            "server": entry.server.title or entry.server.qualified_name,
            "description": str(tool.get("description") or ""),
            "inputSchema": tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else {"type": "object"},
        }
        if tool.get("title"):
            item["title"] = tool["title"]
        out.append(item)
    return out
