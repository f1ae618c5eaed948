"""The setup sub-agent: archetypes (``archetypes.py``, the top-level ``agents/`` folder),
the harness (``harness.py``), :func:`spawn_subagent` (``spawn.py``), the drivers (``drivers/``)
and the read-only inventory of every tool an agent can reach (``tool_registry.py``).

The top of the core: it may import every other core package; none of them imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .archetypes import agents_dir, load_archetypes
    from .harness import AgentCancelled, AgentInputEnded
    from .spawn import spawn_subagent
    from .tool_registry import ToolRegistry

__all__ = [
    "AgentCancelled",
    "AgentInputEnded",
    "agents_dir",
    "load_archetypes",
    "spawn_subagent",
    "ToolRegistry",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AgentCancelled": "harness",
        "AgentInputEnded": "harness",
        "agents_dir": "archetypes",
        "load_archetypes": "archetypes",
        "spawn_subagent": "spawn",
        "ToolRegistry": "tool_registry",
    },
)
