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

from setup_agent.launch import RUNNERS, runner_availability

__all__ = ["with_runtime_verdict"]


def with_runtime_verdict(card: dict[str, Any], which: Callable[[str], str | None]) -> dict[str, Any]:
    """``card`` (a ``Summary.public()``) plus ``runs_here`` and, when false, ``runs_here_reason``."""
    types = [t for t in card.get("package_types") or [] if t in RUNNERS]
    if not types:
        return card
    reasons: list[str] = []
    for package_type in types:
        ok, reason = runner_availability(RUNNERS[package_type], which=which)
        if ok:
            return {**card, "runs_here": True}
        if reason and reason not in reasons:
            reasons.append(reason)
    return {**card, "runs_here": False, "runs_here_reason": "; ".join(reasons)}
