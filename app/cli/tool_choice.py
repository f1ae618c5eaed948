"""``mcp-setup enable NAME --tool TOOL`` / ``disable NAME --tool TOOL``: the person turns back on a
tool they unticked in the install's consent, or leaves one out afterwards.

A left-out tool is held back like an unapproved one: neither listed nor callable through the
gateway (``store.pins.set_hidden_tools``; a call is refused with ``tool_left_out``, whose sentence names
this command). Running mcp-setup sessions see the change within about a second.
"""

from __future__ import annotations

import sys
from typing import Any

from .readonly import open_store, resolve

__all__ = ["set_tools_shown"]


def set_tools_shown(settings: Any, name: str, tools: list[str], *, shown: bool) -> int:
    with open_store(settings) as store:
        server = resolve(store, name)
        known = {str(t.get("name")) for t in (*server.tools, *server.live_tools)}
        unknown = [t for t in tools if t not in known]
        if unknown:
            listed = ", ".join(sorted(known)) or "none"
            print(
                f"mcp-setup: {server.qualified_name} has no tool named {unknown[0]!r} (its tools: {listed}).",
                file=sys.stderr,
            )
            return 1
        offers = store.pins.offers().get(server.server_id)
        hidden = set(offers.hidden_tools if offers is not None else ())
        hidden = (hidden - set(tools)) if shown else (hidden | set(tools))
        store.pins.set_hidden_tools(server.server_id, sorted(hidden), actor="user:terminal")
    names = ", ".join(tools)
    if shown:
        print(f"{names}: back on for {server.qualified_name}; your AI clients' sessions list it at once.")
    else:
        print(
            f"{names}: left out of {server.qualified_name}; your AI clients no longer see it "
            f"(`mcp-setup enable {server.slug} --tool TOOL` turns it back on)."
        )
    if hidden:
        print(f"Left out now: {', '.join(sorted(hidden))}.")
    return 0
