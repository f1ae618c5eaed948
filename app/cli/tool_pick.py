"""The terminal's tool boxes in a consent: the tools a test listed, numbered, all
kept unless the person names the ones to untick ("2 5-7"; Enter keeps them all). ``--yes`` keeps
them all. Used by the consent prompt of ``mcp-setup add`` / ``agent`` (app/cli/terminal.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["parse_picks", "pick_hidden", "print_tools"]

_PICK = re.compile(r"^(\d+)(?:-(\d+))?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _plain(text: Any) -> str:
    """A server's text with no control or direction-changing character (shown as ``?``)."""
    return _CONTROL.sub("?", str(text))


def print_tools(request: Any, out: TextIO) -> None:
    """The numbered tool list and what it costs (nothing when the consent lists no tools)."""
    from app.pages import tools_note

    if not request.tools:
        return
    print(f"  Tools: {tools_note(request)}", file=out)
    for n, tool in enumerate(request.tools, 1):
        title = f" {_plain(tool['title'])}" if tool.get("title") else ""
        about = f": {_plain(tool['description'])[:120]}" if tool.get("description") else ""
        print(
            f"    [{n}] {_plain(tool['name'])}{title} (about {tool.get('estimated_tokens', 0)} tokens){about}", file=out
        )
    out.flush()


def parse_picks(text: str, count: int) -> set[int] | None:
    """The 1-based numbers in ``text`` ("2 5-7", commas too); None when a part is not one of them."""
    picked: set[int] = set()
    for part in text.replace(",", " ").split():
        m = _PICK.match(part)
        if m is None:
            return None
        low, high = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= low <= high <= count:
            return None
        picked.update(range(low, high + 1))
    return picked


def pick_hidden(request: Any, read: Callable[[str], str], out: TextIO) -> list[str]:
    """Ask which tools to untick; returns their names (none: every tool stays)."""
    tools = request.tools
    if not tools:
        return []
    while True:
        picked = parse_picks(read("Untick which tools? Their numbers, e.g. 2 5-7 (Enter for none): "), len(tools))
        if picked is not None:
            break
        print(
            f"Type numbers from 1 to {len(tools)}, separated by spaces, or press Enter to keep them all.",
            file=out,
            flush=True,
        )
    hidden = [tools[n - 1]["name"] for n in sorted(picked)]
    if hidden and len(hidden) == len(tools):
        print(
            f"You unticked all {len(tools)} tools: it is installed with none your assistant can use.",
            file=out,
            flush=True,
        )
    elif hidden:
        print(f"Left out: {', '.join(_plain(h) for h in hidden)}.", file=out, flush=True)
    return hidden
