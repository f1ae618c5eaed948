"""The MCP face: :class:`McpFace` (``face.py``), the gateway's server for stdio and ``/mcp``,
and the stdio plumbing of ``mcp-setup mcp`` (``stdio.py``).

May import pages, ``app.runtime``, ``app.settings`` and the core; never cli or web.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .face import McpFace
    from .stdio import end_servers_now, run_stdio

__all__ = [
    "McpFace",
    "end_servers_now",
    "run_stdio",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "McpFace": "face",
        "end_servers_now": "stdio",
        "run_stdio": "stdio",
    },
)
