"""What a search result card needs before "Set up": can this machine run the server?

A summary names its package types only (``npm``, ``pypi``, ``oci``, ``nuget``, ``mcpb``,
``remote``); each type's runner (:data:`setup_agent.launch.packages.RUNNERS`) is looked up on PATH
with the service's ``which``. The server runs here when one of its types does (a remote or an
MCPB bundle needs no runner; a bundle's own runtime is checked after download). A summary
without package types (some Smithery results) gets no verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from setup_agent.launch import RUNNERS, runner_availability, runner_words

__all__ = ["with_runtime_verdict"]


def with_runtime_verdict(card: dict[str, Any], which: Callable[[str], str | None]) -> dict[str, Any]:
    """``card`` (a ``Summary.public()``) plus ``runs_here``; when true, ``runs_with`` (which runner
    runs it: the one that comes with mcp-setup, or this computer's), when false ``runs_here_reason``."""
    types = [t for t in card.get("package_types") or [] if t in RUNNERS]
    if not types:
        return card
    reasons: list[str] = []
    for package_type in types:
        runner = RUNNERS[package_type]
        ok, reason = runner_availability(runner, which=which)
        if ok:
            found = which(runner) if runner else None
            return {
                **card,
                "runs_here": True,
                **({"runs_with": runner_words(runner, found)} if runner and found else {}),
            }
        if reason and reason not in reasons:
            reasons.append(reason)
    return {**card, "runs_here": False, "runs_here_reason": "; ".join(reasons)}
