"""Agent drivers: the policy that decides the next tool call.

A driver is built by ``factory(archetype=, options=, redactor=)`` and has one coroutine,
``run(session) -> summary``: it works only through :class:`~setup_agent.agent.harness.AgentSession`
(``session.call(name, args)``), which enforces the allowlist, redaction and limits. The run's
status comes from the session (did an install succeed), not from what the driver says.

- ``guided``: deterministic and offline, no model (the default).
- ``openai``: any OpenAI-compatible chat-completions endpoint with tool calling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..harness import AgentSession

__all__ = ["DRIVERS", "Driver", "driver_factory"]


class Driver(Protocol):
    async def run(self, session: AgentSession) -> str: ...


def _guided(**kwargs: Any) -> Driver:
    from .guided import GuidedDriver

    return GuidedDriver(**kwargs)


def _openai(**kwargs: Any) -> Driver:
    from .openai import OpenAIDriver

    return OpenAIDriver(**kwargs)


DRIVERS: dict[str, Callable[..., Driver]] = {"guided": _guided, "openai": _openai}


def driver_factory(name: str) -> Callable[..., Driver]:
    """The factory for driver ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return DRIVERS[name]
    except KeyError:
        raise KeyError(f"No agent driver {name!r} (known: {', '.join(sorted(DRIVERS))}).") from None
