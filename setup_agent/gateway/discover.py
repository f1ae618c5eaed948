"""Two gateway tools for clients that never re-list (Claude Desktop, the Claude Code desktop
app) or that want a small context: ``mcp_setup_find_tools`` searches the installed, enabled,
approved tools (the catalog: what ``tools/list`` would list) and ``mcp_setup_call_tool`` calls
one of them through :meth:`~setup_agent.gateway.router.Gateway.call` (the same guard, pins,
redactor and size cap as a direct call).

They are the gateway's, not the setup sub-agent's: no agent allowlist names them. With
``MCP_SETUP_GATEWAY_TOOLS=discover`` a face lists only the setup tools and these two.

The context budget (``MCP_SETUP_TOOLS_BUDGET``, in tokens) keeps ``tools/list`` small when many
servers are installed: while every tool fits, every tool is listed; past it, the face lists its
own tools, this pair, the tools used most recently (:class:`RecentTools`: by any gateway on the
store, in this session or an earlier one), then, in the room left, the others by server in the
order the servers were installed (:func:`within_budget`). The rest stay callable through the
pair, whose description then says how many there are and of which servers.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from setup_agent.store import Catalog, GatewayTool

__all__ = [
    "CALL_TOOL",
    "DISCOVER_NAMES",
    "DISCOVER_SPECS",
    "FIND_TOOLS",
    "Listing",
    "RecentTools",
    "UseRecord",
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

#: Words of a request that say nothing about which tool ("show me the …").
_STOP = frozenset(
    "a an and any are as at be by can do does for from give i in into is it its me my of on or our "
    "please that the their them then there this to up us we what when where which who with you your".split()
)

#: Everyday words and the words tools use for the same thing (both ways where it reads so).
_SAME = {
    "folder": ("directory",),
    "directory": ("folder",),
    "photo": ("image", "media"),
    "picture": ("image", "media"),
    "image": ("media",),
    "website": ("url", "web", "internet"),
    "site": ("url", "web", "internet"),
    "page": ("url", "web"),
    "article": ("url", "web", "internet"),
    "web": ("url", "internet"),
    "download": ("fetch",),
    "url": ("fetch", "internet"),
    "remember": ("memory", "knowledge", "entity", "observation"),
    "memory": ("knowledge", "graph"),
    "fact": ("observation",),
    "forget": ("delete", "remove"),
    "remove": ("delete",),
    "delete": ("remove",),
    "rename": ("move",),
    "repeat": ("echo",),
    "history": ("log",),
    "modified": ("info", "metadata", "time"),
    "size": ("info", "metadata"),
    "link": ("relation",),
    "save": ("write", "create"),
    "add": ("create", "sum"),
    "new": ("create",),
    "make": ("create",),
    "show": ("list", "read", "get"),
    "look": ("read", "view"),
    "find": ("search",),
    "switch": ("checkout",),
    "unstage": ("reset",),
    "clean": ("status",),
    "compare": ("diff",),
    "changed": ("diff",),
    "change": ("diff", "edit"),
    "replace": ("edit",),
    "structure": ("tree",),
    "logging": ("log",),
    "timezone": ("time",),
    "open": ("read",),
    "undo": ("reset",),
    "recent": ("log",),
    "last": ("log",),
    "connect": ("relation", "link"),
    "person": ("entity",),
    "people": ("entity",),
    "know": ("search", "knowledge"),
    "stage": ("add",),
}

#: How much a word found in each part of a tool counts (before its rarity).
_WEIGHTS = {"name": 3.0, "title": 2.0, "server": 1.5, "description": 1.0}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _stem(word: str) -> str:
    """A word without its plural or tense ("branches", "changed", "files" → "branch", "chang", "fil"),
    so the forms of a word meet; short words stay as they are."""
    if len(word) <= 3:
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)] + keep
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def _fields(entry: GatewayTool) -> dict[str, set[str]]:
    """Each part of a tool as a set of stemmed words."""
    tool = entry.tool
    title = str(tool.get("title") or (tool.get("annotations") or {}).get("title") or "")
    texts = {
        "name": f"{entry.name} {tool.get('name', '')}",
        "title": title,
        "server": f"{entry.server.slug} {entry.server.title or ''} {entry.server.qualified_name}",
        "description": str(tool.get("description") or ""),
    }
    return {part: {_stem(w) for w in _words(text)} for part, text in texts.items()}


def _query(query: str) -> list[set[str]]:
    """The request as groups of stemmed words: each word of it with the words tools use for it."""
    words = _words(query)
    groups = []
    for i, word in enumerate(words):
        if word in _STOP:
            continue
        group = {_stem(word), *(_stem(w) for w in _SAME.get(word, ()))}
        if i + 1 < len(words):  # "check out", "log in": also as one word
            group.add(_stem(word + words[i + 1]))
        groups.append(group)
    return groups


def _score(fields: dict[str, set[str]], groups: list[set[str]], rarity: dict[str, float]) -> float:
    """Each word of the request counts once, where it weighs most (a name over a description),
    by how rare it is among the tools (a word every tool has tells little)."""
    score = 0.0
    for group in groups:
        best = 0.0
        for word in group:
            for part, words in fields.items():
                if word in words:
                    best = max(best, _WEIGHTS[part] * rarity.get(word, 0.0))
                elif part == "name" and len(word) >= 4 and any(w.startswith(word) for w in words):
                    best = max(best, 1.5 * rarity.get(word, 1.0))  # "dir" in "directory"
        score += best
    return score


def find_tools(catalog: Catalog, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """The catalog's tools that match ``query`` (in a person's words: every word counts, in any
    form, with the words tools use for it; names weigh most, rare words more than common ones),
    ranked; an empty query lists them all (up to ``limit``)."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    entries = catalog.tools()
    groups = _query(query)
    fields = [_fields(entry) for entry in entries]
    seen: Counter[str] = Counter()
    for parts in fields:
        seen.update(set().union(*parts.values()))
    rarity = {word: math.log(1 + len(entries) / count) for word, count in seen.items()}
    ranked: list[tuple[float, str, GatewayTool]] = []
    for entry, parts in zip(entries, fields, strict=True):
        score = _score(parts, groups, rarity) if groups else (0.0 if query.strip() else 1.0)
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
#: How often, at most, the uses collected are written to the store (and once when the gateway stops).
FLUSH_SECONDS = 5.0


def estimated_tokens(tools: Iterable[dict[str, Any]]) -> int:
    """About how many tokens these tool definitions take in a model's context."""
    chars = sum(len(json.dumps(t, ensure_ascii=False, separators=(",", ":"))) for t in tools)
    return -(-chars // CHARS_PER_TOKEN)


class UseRecord(Protocol):
    """Where the uses are kept across sessions and processes (``store.tool_use``)."""

    def record(self, uses: Mapping[str, datetime]) -> None: ...

    def newest_first(self, limit: int = ...) -> list[tuple[str, datetime]]: ...


class RecentTools:
    """The installed tools called, most recent first: this process's calls over the ones any
    gateway on the store recorded before (:meth:`load`). A call costs no I/O: the uses collected
    are written in one batch by :meth:`flush` (the gateway's watch, at most every
    :data:`FLUSH_SECONDS`, and when it stops)."""

    def __init__(self, record: UseRecord | None = None, *, clock: Callable[[], datetime] | None = None) -> None:
        self._record = record
        self._clock = clock or (lambda: datetime.now(UTC))
        self._used: OrderedDict[str, datetime] = OrderedDict()  # oldest first
        self._pending: dict[str, datetime] = {}
        self._flushed = 0.0  # time.monotonic() of the last flush

    def used(self, name: str) -> None:
        at = self._clock()
        self._used.pop(name, None)
        self._used[name] = at
        while len(self._used) > _MAX_RECENT:
            self._used.popitem(last=False)
        if self._record is not None:
            self._pending[name] = at

    def newest_first(self) -> list[str]:
        return list(reversed(self._used))

    async def load(self) -> None:
        """Merge the uses recorded on the store (a later time wins, wherever it was made)."""
        if self._record is None:
            return
        stored = await asyncio.to_thread(self._record.newest_first, _MAX_RECENT)
        merged = dict(stored)
        for name, at in self._used.items():
            if name not in merged or at > merged[name]:
                merged[name] = at
        newest = sorted(merged.items(), key=lambda kv: kv[1])[-_MAX_RECENT:]
        self._used = OrderedDict(newest)

    async def flush(self, *, every: float = 0.0) -> None:
        """Write the uses collected since the last flush in one batch (none: nothing written);
        ``every``: not sooner than this many seconds after the last one."""
        if self._record is None or not self._pending or time.monotonic() - self._flushed < every:
            return
        pending, self._pending = self._pending, {}
        self._flushed = time.monotonic()
        try:
            await asyncio.to_thread(self._record.record, pending)
        except BaseException:
            for name, at in pending.items():  # kept for the next flush
                self._pending.setdefault(name, at)
            raise


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

    def note_tokens(self) -> int:
        """About how many tokens :meth:`note` adds to the listing (it is in both of the pair's descriptions)."""
        chars = len(json.dumps(self.note(), ensure_ascii=False)) - 2  # as JSON text, without the quotes
        return -(-2 * chars // CHARS_PER_TOKEN)


def within_budget(catalog: Catalog, own_tokens: int, budget: int, recent: Sequence[str]) -> Listing:
    """The installed tools to list: all of them while they fit ``budget`` (tokens, with the face's
    own tools' ``own_tokens``; 0: no budget); else the ``recent``ly used ones that fit, the most
    recent first, and then, in the room they leave, the others in the catalog's order: by server in
    the order the servers were installed, each server's tools in the order the server lists them.

    That order rather than the smallest tools first: it keeps what a client sees steady (a server
    installed later comes after the ones listed already and never pushes them out; only a use
    moves a tool forward), it lists a server's tools together and in its authors' order (the main
    ones usually first), and the pair's note can say "Server B (12)" of a whole server rather than
    a scatter of each server's longest tools. Any tool that does not fit is passed over for the
    next that does, so the budget is filled as far as it goes.

    The pair's note is counted at its longest (every installed tool unlisted: it only gets shorter
    as tools are listed), so the listing with its note never exceeds the budget and the choice does
    not depend on the note: listing one more tool never changes whether another fits."""
    entries = catalog.tools()
    wire = catalog.wire_tools()
    if budget <= 0 or own_tokens + estimated_tokens(wire) <= budget:
        return Listing(wire, {})

    def server_of(entry: GatewayTool) -> str:
        return entry.server.title or entry.server.qualified_name

    by_name = {t["name"]: t for t in wire}
    spent = own_tokens + Listing([], dict(Counter(server_of(e) for e in entries))).note_tokens()
    chosen: dict[str, dict[str, Any]] = {}
    for name in [*recent, *by_name]:
        tool = by_name.get(name)
        if tool is None or name in chosen:
            continue
        cost = estimated_tokens([tool])
        if spent + cost > budget:
            continue  # a smaller one further on may still fit
        spent += cost
        chosen[name] = tool
    unlisted = Counter(server_of(e) for e in entries if e.name not in chosen)
    return Listing(list(chosen.values()), dict(unlisted))
