"""Two gateway tools for clients that never re-list (Claude Desktop, the Claude Code desktop
app) or that want a small context: ``mcp_setup_find_tools`` searches the installed, enabled,
approved tools (the catalog: what ``tools/list`` would list) and ``mcp_setup_call_tool`` calls
one of them through :meth:`~setup_agent.gateway.router.Gateway.call` (the same guard, pins,
redactor and size cap as a direct call).

They are the gateway's, not the setup sub-agent's: no agent allowlist names them. With
``MCP_SETUP_GATEWAY_TOOLS=discover`` a face lists only the setup tools and these two.

The context budget (``MCP_SETUP_TOOLS_BUDGET``, in tokens) keeps ``tools/list`` small when many
servers are installed: while every tool fits, every tool is listed; past it, the face lists its
own tools, this pair, and then the tools used most recently (:class:`RecentTools`) until the
budget is spent (:func:`within_budget`). The rest stay callable through the pair, whose
description then says how many there are and of which servers.
"""

from __future__ import annotations

import json
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from setup_agent.store import Catalog, GatewayTool

__all__ = [
    "CALL_TOOL",
    "DISCOVER_NAMES",
    "DISCOVER_SPECS",
    "FIND_TOOLS",
    "Listing",
    "RecentTools",
    "estimated_tokens",
    "find_tools",
    "within_budget",
]

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


#: About four characters of a tool's JSON definition per token (as the consent estimates).
CHARS_PER_TOKEN = 4
#: The most tool names remembered as used (far more than any budget lists).
_MAX_RECENT = 1000


def estimated_tokens(tools: Iterable[dict[str, Any]]) -> int:
    """About how many tokens these tool definitions take in a model's context."""
    chars = sum(len(json.dumps(t, ensure_ascii=False, separators=(",", ":"))) for t in tools)
    return -(-chars // CHARS_PER_TOKEN)


class RecentTools:
    """The installed tools called through this gateway, most recent first (in this process)."""

    def __init__(self) -> None:
        self._used: OrderedDict[str, None] = OrderedDict()

    def used(self, name: str) -> None:
        self._used.pop(name, None)
        self._used[name] = None
        while len(self._used) > _MAX_RECENT:
            self._used.popitem(last=False)

    def newest_first(self) -> list[str]:
        return list(reversed(self._used))


@dataclass(frozen=True)
class Listing:
    """What ``tools/list`` shows of the installed tools under a budget."""

    tools: list[dict[str, Any]]
    #: Tools left unlisted, per server (its title or name): reachable through find/call.
    unlisted: dict[str, int]

    def note(self) -> str:
        """The sentence the find/call pair's descriptions carry while tools are left unlisted."""
        if not self.unlisted:
            return ""
        count = sum(self.unlisted.values())
        servers = ", ".join(
            f"{name} ({n})" for name, n in sorted(self.unlisted.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return (
            f" {count} more installed tool{'s are' if count != 1 else ' is'} not listed here, to keep your context "
            f"small: {servers}. Find them with {FIND_TOOLS} and call them with {CALL_TOOL}."
        )


def within_budget(catalog: Catalog, own_tokens: int, budget: int, recent: Sequence[str]) -> Listing:
    """The installed tools to list: all of them while they fit ``budget`` (tokens, with the face's
    own tools' ``own_tokens``; 0: no budget), else the most recently used ones that fit."""
    entries = catalog.tools()
    wire = catalog.wire_tools()
    if budget <= 0 or own_tokens + estimated_tokens(wire) <= budget:
        return Listing(wire, {})
    by_name = {t["name"]: t for t in wire}
    spent, chosen = own_tokens, []
    for name in recent:
        tool = by_name.get(name)
        if tool is None:
            continue
        cost = estimated_tokens([tool])
        if spent + cost > budget:
            continue  # a smaller one used a little earlier may still fit
        spent += cost
        chosen.append(tool)
    listed = {t["name"] for t in chosen}
    unlisted = Counter(e.server.title or e.server.qualified_name for e in entries if e.name not in listed)
    return Listing(chosen, dict(unlisted))
