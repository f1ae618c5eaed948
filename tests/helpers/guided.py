"""A guided run of the setup agent with a scripted ChatIO."""

from __future__ import annotations

import anyio

from setup_agent.agent.spawn import spawn_subagent
from tests.helpers.timeouts import scaled


async def run(runtime, io, goal: str = "set up the stub server") -> dict:
    with anyio.fail_after(scaled(60)):
        return await spawn_subagent(
            "mcp_setup", {"goal": goal}, service=runtime.service, redactor=runtime.redactor, io=io
        )
