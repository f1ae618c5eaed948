"""The gateway's tool catalog: every installed server's tools under one stable name each.

This is the one place where gateway names are made (no face derives its own):

* **slug** — per installed server, chosen once at install and stored (``mcp_servers.slug``):
  the last path segment of the qualified name (``io.github.acme/brave-search`` →
  ``brave-search``), lower-cased, every run of other characters turned into ``-``, at most
  24 characters; when taken by another installed server, ``-2``, ``-3``, … is appended.
  A slug never holds ``_``, so the first ``__`` of a gateway name ends the slug.
* **gateway name** — ``<slug>__<tool>``, at most :data:`MAX_TOOL_NAME` (48) characters of
  ``A-Z a-z 0-9 _ -``. 48, not MCP's 64: Claude Code names a tool ``mcp__<entry>__<tool>`` and
  the model API rejects any name over 64, which with the entry ``client connect`` writes
  (``mcp-setup``, 16 characters with its ``mcp__`` and ``__``) leaves 48. ``.`` is left out too
  (some clients refuse it). A tool name that fits is kept as it is. Otherwise (a character
  outside that set, or too long) every other character becomes ``_``, the name is cut to fit,
  and ``_`` plus the first 8 hex digits of the SHA-256 of the *original* tool name are
  appended, so two tools that differ only in the replaced characters still get different
  names and the same tool always gets the same name (across restarts and processes).
* **definition** — the tool as its server sent it (every field: ``execution``, ``_meta``,
  ``icons`` and what later revisions add), touched only where the gateway must: the name, and
  the description prefixed with the server's label.

The catalog is built from the store's rows (tools are recorded at install and refreshed
whenever a server connects), so listing never waits for a server to start. This module
imports only the standard library: the stdio face reads the catalog of a SQLite data dir
(:func:`read_sqlite_catalog`) before the rest of the core has loaded.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .schema import CHANGES, PREFERENCES, SERVER_EXTRAS, SERVERS, TOOL_USE

__all__ = [
    "Catalog",
    "CatalogServer",
    "context_cost",
    "read_sqlite_counter",
    "GatewayTool",
    "SQLITE_FILE_NAME",
    "MAX_SLUG",
    "MAX_TOOL_NAME",
    "SEPARATOR",
    "gateway_name",
    "make_slug",
    "names_too_long",
    "read_sqlite_catalog",
    "read_sqlite_hidden",
    "read_sqlite_preference",
    "read_sqlite_recent",
    "wire_tool",
]

#: The SQLite file of a data dir (the store's default database).
SQLITE_FILE_NAME = "mcp-setup.db"
SEPARATOR = "__"
#: The longest gateway name (module doc: Claude Code's 64 less ``mcp__mcp-setup__``).
MAX_TOOL_NAME = 48
MAX_SLUG = 24
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_NOT_TOOL = re.compile(r"[^A-Za-z0-9_-]")
#: The fields of a server's tool that the gateway sets itself (everything else passes as sent).
_OWN = ("name", "description")


def make_slug(qualified_name: str, taken: Collection[str] = ()) -> str:
    """A short slug for ``qualified_name`` that is not in ``taken``."""
    last = qualified_name.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    base = _NOT_SLUG.sub("-", last).strip("-")[:MAX_SLUG].strip("-") or "server"
    slug, n = base, 2
    while slug in taken:
        suffix = f"-{n}"
        slug = base[: MAX_SLUG - len(suffix)].rstrip("-") + suffix
        n += 1
    return slug


def gateway_name(slug: str, tool_name: str) -> str:
    """``<slug>__<tool>``, made to fit the MCP tool-name rules deterministically (module doc)."""
    name = f"{slug}{SEPARATOR}{tool_name}"
    if len(name) <= MAX_TOOL_NAME and not _NOT_TOOL.search(tool_name):
        return name
    digest = hashlib.sha256(tool_name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    room = MAX_TOOL_NAME - len(slug) - len(SEPARATOR) - 1 - len(digest)
    clean = _NOT_TOOL.sub("_", tool_name)[: max(room, 0)]
    return f"{slug}{SEPARATOR}{clean}_{digest}"


@dataclass(frozen=True)
class CatalogServer:
    """One installed server as the catalog sees it (no env, no launch spec)."""

    server_id: str
    qualified_name: str
    slug: str
    title: str | None
    enabled: bool
    tools: tuple[dict[str, Any], ...] = ()
    package_type: str = ""
    version: str | None = None


@dataclass(frozen=True)
class GatewayTool:
    name: str
    server: CatalogServer
    tool: dict[str, Any]

    @property
    def tool_name(self) -> str:
        """The tool's own name at its server."""
        return str(self.tool.get("name", ""))


def wire_tool(entry: GatewayTool) -> dict[str, Any]:
    """The tool as the gateway lists it (wire field names)."""
    tool = entry.tool
    label = entry.server.title or entry.server.qualified_name
    description = str(tool.get("description") or "").strip()
    out: dict[str, Any] = {
        "name": entry.name,
        "description": f"[{label}] {description}" if description else f"[{label}]",
    }
    for key, value in tool.items():
        if key not in _OWN and value is not None:
            out[key] = value
    if not isinstance(out.get("inputSchema"), dict):
        out["inputSchema"] = {"type": "object"}
    return out


@dataclass(frozen=True)
class Catalog:
    """Every tool of every installed server, by gateway name; enabled servers only are listed."""

    servers: tuple[CatalogServer, ...] = ()
    _by_name: dict[str, GatewayTool] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, servers: Iterable[CatalogServer]) -> Catalog:
        servers = tuple(servers)
        by_name: dict[str, GatewayTool] = {}
        for server in servers:
            if not server.enabled:
                continue
            for tool in server.tools:
                name = gateway_name(server.slug, str(tool.get("name", "")))
                by_name.setdefault(name, GatewayTool(name, server, tool))
        return cls(servers, by_name)

    def tools(self) -> list[GatewayTool]:
        return list(self._by_name.values())

    def wire_tools(self) -> list[dict[str, Any]]:
        return [wire_tool(t) for t in self._by_name.values()]

    def route(self, name: str) -> GatewayTool | None:
        return self._by_name.get(name)

    def server(self, key: str) -> CatalogServer | None:
        """A server by id, qualified name or slug."""
        for server in self.servers:
            if key in (server.server_id, server.qualified_name, server.slug):
                return server
        return None

    def signature(self) -> tuple[Any, ...]:
        """Equal for two catalogs that list the same tools (used to decide on list_changed)."""
        return tuple(sorted((n, json.dumps(wire_tool(t), sort_keys=True)) for n, t in self._by_name.items()))


#: Characters per token in the estimate of :func:`context_cost` (JSON of tool definitions:
#: about 4 for English text and schemas with the common tokenizers; an estimate, not a count).
CHARS_PER_TOKEN = 4


def context_cost(tools: Iterable[dict[str, Any]], slug: str = "server", label: str = "") -> dict[str, Any]:
    """What a server's tools add to a client's context: how many there are and
    an estimate of the tokens their definitions take, as the gateway lists them."""
    server = CatalogServer("", label or slug, slug, label or None, True, tuple(tools))
    wire = Catalog.build([server]).wire_tools()
    chars = sum(len(json.dumps(t, ensure_ascii=False, separators=(",", ":"))) for t in wire)
    return {"tool_count": len(wire), "estimated_tokens": -(-chars // CHARS_PER_TOKEN)}


#: How a client names an MCP tool (``{entry}``: its config entry's name) and the longest name it
#: takes: Claude Code's ``mcp__<entry>__<tool>``, which the model API cuts off at 64.
CLIENT_NAME_RULES: dict[str, tuple[str, int]] = {"claude-code": ("mcp__{entry}__", 64)}


def names_too_long(catalog: Catalog, client: str, entry: str | None = None) -> list[str]:
    """The tool names ``client`` would refuse: the gateway's names under ``entry``, or with
    ``entry=None`` (one entry per server, named by its slug) each server's own tool names."""
    rule = CLIENT_NAME_RULES.get(client)
    if rule is None:
        return []
    prefix, limit = rule
    out = []
    for tool in catalog.tools():
        name = tool.name if entry is not None else tool.tool_name
        if len(prefix.format(entry=entry if entry is not None else tool.server.slug)) + len(name) > limit:
            out.append(name)
    return out


def parse_tools(text: str | None) -> tuple[dict[str, Any], ...]:
    if not text:
        return ()
    try:
        tools = json.loads(text)
    except ValueError:
        return ()
    return tuple(t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str))


def _read_only(db_path: Path, query: tuple[str, tuple[object, ...]]) -> list[tuple[Any, ...]] | None:
    """The rows of ``query`` (``(sql, parameters)`` as :meth:`~setup_agent.store.schema.Table.select`
    makes it) from a SQLite store opened read-only; None when there is no store (or not the
    expected schema yet)."""
    if not Path(db_path).is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=2)
    except sqlite3.Error:
        return None
    try:
        return conn.execute(*query).fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


_CATALOG = SERVERS.select(
    "server_id",
    "qualified_name",
    "slug",
    "title",
    "enabled",
    "tools_json",
    "package_type",
    "version",
    order_by=("installed_at", "qualified_name"),
)


def read_sqlite_catalog(db_path: Path) -> Catalog | None:
    """The catalog of a SQLite store, read with the standard library (read-only, no migration).

    None when the file or the gateway columns are not there yet (a new data dir, or one not
    yet migrated): the caller then waits for the store.
    """
    rows = _read_only(db_path, _CATALOG)
    if rows is None:
        return None
    hidden = read_sqlite_hidden(db_path)
    return Catalog.build(
        CatalogServer(
            sid,
            qn,
            slug or make_slug(qn),
            title,
            bool(enabled),
            tuple(t for t in parse_tools(tools) if t["name"] not in hidden.get(sid, ())),
            ptype,
            version,
        )
        for sid, qn, slug, title, enabled, tools, ptype, version in rows
    )


def read_sqlite_hidden(db_path: Path) -> dict[str, frozenset[str]]:
    """The tools the user unticked, by server id; no table yet: none."""
    hidden: dict[str, frozenset[str]] = {}
    for sid, text in _read_only(db_path, SERVER_EXTRAS.select("server_id", "hidden_tools_json")) or ():
        try:
            if names := frozenset(n for n in json.loads(text or "[]") if isinstance(n, str)):
                hidden[sid] = names
        except ValueError:
            continue
    return hidden


def read_sqlite_counter(db_path: Path) -> int | None:
    """The store's change counter, read with the standard library (None: no store yet)."""
    rows = _read_only(db_path, CHANGES.select("counter", where={"id": 1}))
    if rows is None:
        return None
    return int(rows[0][0]) if rows else 0


def read_sqlite_recent(db_path: Path, limit: int = 1000) -> list[str]:
    """The tools used, the most recent first (``usage.py``), read with the standard library
    (none yet, or no such table yet: empty)."""
    rows = _read_only(db_path, TOOL_USE.select("name", order_by=("used_at DESC",), limit=limit))
    return [str(name) for (name,) in rows or ()]


def read_sqlite_preference(db_path: Path, name: str) -> str | None:
    """One of the person's gateway-wide settings (``preferences.py``), read with the standard
    library (None: not set, or no store yet)."""
    rows = _read_only(db_path, PREFERENCES.select("value", where={"name": name}))
    return str(rows[0][0]) if rows else None
