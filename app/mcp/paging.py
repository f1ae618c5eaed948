"""``tools/list`` in pages: the cursor the face hands out, and the page it names.

A cursor is opaque to the client: ``base64url("tools:<offset>")``. One the face never issued
(not base64, another shape, an offset below 1) is a JSON-RPC ``-32602``, as the specification
asks of an invalid cursor. A cursor past the end of a list that shrank since (a server removed
between two pages) gives an empty last page: the client has been sent ``list_changed`` and
lists again from the start.

The page size (``MCP_SETUP_TOOLS_PAGE_SIZE``, :data:`DEFAULT_PAGE_SIZE`) is large on purpose:
several clients read only the first page and ignore ``nextCursor`` (Codex, Claude.ai's
connectors, Copilot CLI, and Claude Code before mid-2026), and Gemini CLI follows cursors only
up to 100 tools. Before pages, the gateway sent every tool in one answer; a page of 1000 keeps
that for every gateway of up to 1000 tools (already beyond what one model request can take:
the OpenAI and Gemini APIs stop at 128 functions), while a client that follows cursors gets
the rest, and no single answer grows without bound (1000 tool definitions are about 1 MB).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TypeVar

from mcp import MCPError

from setup_agent.errors import JSONRPC_INVALID_PARAMS

__all__ = ["DEFAULT_PAGE_SIZE", "page"]

#: Tools per ``tools/list`` answer (see the module doc for why so many).
DEFAULT_PAGE_SIZE = 1000

_PREFIX = "tools:"

T = TypeVar("T")


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_PREFIX}{offset}".encode()).decode().rstrip("=")


def _offset(cursor: str) -> int:
    """The offset a cursor of ours names; MCPError ``-32602`` for any other string."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        text = ""
    number = text.removeprefix(_PREFIX) if text.startswith(_PREFIX) else ""
    if not number.isdigit() or int(number) < 1 or _cursor(int(number)) != cursor:
        raise MCPError(
            JSONRPC_INVALID_PARAMS, "Invalid cursor: list again without one, then pass on nextCursor as given."
        )
    return int(number)


def page(items: Sequence[T], cursor: str | None, size: int) -> tuple[list[T], str | None]:
    """The page of ``items`` that ``cursor`` (None: the first) names, and the cursor of the
    next one (None on the last page)."""
    start = 0 if cursor is None else _offset(cursor)
    end = start + max(1, size)
    return list(items[start:end]), _cursor(end) if end < len(items) else None
