"""``spawn_subagent``: one run of an archetype, from its goal to its result.

It loads the archetype (``agents/*.toml``), builds the :class:`~setup_agent.agent.harness.AgentSession`
and hands it to the archetype's driver (:mod:`setup_agent.agent.drivers`) under the time limit.
It sits above both, so the harness never imports a driver and a driver only the harness.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from setup_agent.secrets import Redactor
from setup_agent.setup import SetupService

from .archetypes import ArchetypeRegistry, load_archetypes
from .drivers import driver_factory
from .harness import (
    AgentCancelled,
    AgentInputEnded,
    AgentLimitReached,
    AgentSession,
    ChatIO,
    DriverError,
    installed_summary,
)

__all__ = ["spawn_subagent"]

logger = logging.getLogger(__name__)


async def spawn_subagent(
    archetype_id: str,
    params: dict,
    *,
    service: SetupService,
    redactor: Redactor,
    io: ChatIO,
    registry: ArchetypeRegistry | None = None,
    driver: str | None = None,
    driver_options: dict | None = None,
    installed_by: str = "agent",
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Run the archetype for ``params["goal"]``; returns ``{status, server_id?, tools?, summary, transcript}``.

    Raises ``KeyError`` for an unknown archetype or driver and ``ValueError`` for a missing goal
    (protocol errors for the face); everything else ends in a result.
    """
    archetype = (registry or load_archetypes()).get(archetype_id)
    goal = (params or {}).get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise ValueError("params.goal must be a non-empty string, e.g. 'set up the Notion MCP server'.")
    factory = driver_factory(driver or archetype.driver)
    session = AgentSession(
        archetype, goal.strip(), service=service, redactor=redactor, io=io, installed_by=installed_by, clock=clock
    )
    try:
        status, summary, finished = await _drive(session, factory, dict(driver_options or {}))
        if session.installed is not None:
            done = installed_summary(session.installed)
            summary = (summary or done) if finished else f"{done} ({summary})"
        elif not summary:
            summary = "The agent finished without installing a server."
        elif not finished:
            summary += " Nothing was installed."
        return session.result(status, summary)
    finally:
        session.close()  # also when the face cancels the task


async def _drive(session: AgentSession, factory: Callable[..., Any], options: dict) -> tuple[str, str, bool]:
    """Build and run the driver under the time limit: ``(status, summary, finished normally)``."""
    archetype = session.archetype
    try:
        if session.goal_had_secret:
            await session.io.say(
                "Your request contained something that looks like a secret; I left it out and will not use it."
            )
        driver = factory(archetype=archetype, options=options, redactor=session.redactor)
        timeout = asyncio.timeout(archetype.max_seconds)
        try:
            async with timeout:
                return "failed", await driver.run(session) or "", True
        except TimeoutError:
            if not timeout.expired():
                raise
            return (
                "failed",
                f"Stopped after {archetype.max_seconds:g} seconds: that is the {archetype.id} agent's time limit.",
                False,
            )
    except AgentInputEnded:  # a script's input ran out: a failure, not a cancel
        return "failed", "Stopped: the input ended before a question was answered.", False
    except AgentCancelled:
        return "cancelled", "Cancelled by the user.", False
    except (AgentLimitReached, DriverError) as exc:
        return "failed", str(exc), False
    except Exception:
        logger.exception("agent %s crashed", archetype.id)
        return "failed", "The setup agent stopped on an internal error; the log has details.", False
