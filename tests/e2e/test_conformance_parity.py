"""The MCP conformance suite scores through the gateway what it scores directly: the same server
(tests/stub_server/conformance_server.py) run over streamable HTTP, and installed in mcp-setup
behind the MCP face over streamable HTTP, in the same run.

The scenarios are picked by one rule: every ``input-required-result-*`` scenario of the
2026-07-28 requirement set (an installed server's multi-round-trip requests, what the gateway
relays between eras), and the ``tools-call-*`` scenarios about a result and about the server's
requests during a call (simple text, error, sampling, elicitation) in every era they exist in.
The whole comparison, every scenario set of both eras against the suite's reference server, is
``python -m bench.conformance`` (CONTRIBUTING.md).

Needs Node 22 and the suite from npm (installed once into ``MCP_SETUP_TEST_CONFORMANCE_DIR``,
default ``~/.cache/mcp-setup-conformance/<version>``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from tests.helpers.conformance import (
    VERSION,
    free_port,
    install_command,
    run_scenarios,
    serve_face,
    tools_dir,
    wait_port,
)
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

STUB = Path(__file__).resolve().parents[1] / "stub_server" / "conformance_server.py"
TOOLS = Path(
    os.environ.get("MCP_SETUP_TEST_CONFORMANCE_DIR") or Path.home() / ".cache" / "mcp-setup-conformance" / VERSION
)
NEW, OLD = "2026-07-28", "2025-11-25"
SCENARIOS = [
    *(
        (f"input-required-result-{name}", NEW)
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "unsupported-methods",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
            "validate-input",
        )
    ),
    *((f"tools-call-{name}", era) for name in ("simple-text", "error") for era in (OLD, NEW)),
]
#: The scenarios whose server asks the client during the call. A server's request is matched to
#: the call its progress token names or to the one call in flight; with several clients' calls
#: in flight and no token the gateway refuses it rather than guess (relay.py), so through the
#: gateway these run one at a time, as one client calls, after the others (directly, with them).
ASKING = [("tools-call-sampling", OLD), ("tools-call-elicitation", OLD)]
#: Passing directly, failing through the gateway, each with the reason the gateway cannot help
#: it; the day one passes, this test says so (an entry that passes fails the test). None now.
GATEWAY_GAPS: set[tuple[str, str]] = set()
#: Suite runs (a Node process each, CPU-bound) at once over both sides: the two sides run side by
#: side, and this bound keeps each run well inside the suite's own 30 s per scenario on a busy machine.
AT_ONCE = 6


async def run_direct(tools: Path, out: Path, slots: asyncio.Semaphore) -> dict[tuple[str, str], tuple[int, int]]:
    """Every scenario against the stub served over HTTP by itself, all in one round."""
    port = free_port()
    direct = subprocess.Popen(
        [sys.executable, str(STUB), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await wait_port(port, scaled(60))
        url = f"http://127.0.0.1:{port}/mcp"
        return await run_scenarios(tools, url, [*SCENARIOS, *ASKING], out, timeout=scaled(60), slots=slots)
    finally:
        direct.terminate()
        await asyncio.to_thread(direct.wait, scaled(10))


async def run_gateway(
    tools: Path, data: Path, out: Path, slots: asyncio.Semaphore, new_runtime: Any, memory_keyring: Any
) -> dict[tuple[str, str], tuple[int, int]]:
    """Every scenario against the stub installed behind the MCP face: :data:`SCENARIOS` several
    at once, then :data:`ASKING` one at a time."""
    slug = install_command(data, memory_keyring, [sys.executable, str(STUB)], identifier="conformance", version="1.0.0")
    runtime = new_runtime(Settings(home=data, registries="local", sandbox="off"), host_env=dict(os.environ))
    port = free_port()
    stop = await serve_face(runtime, port, slug)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        results = await run_scenarios(tools, url, SCENARIOS, out, timeout=scaled(60), slots=slots)
        return {**results, **await run_scenarios(tools, url, ASKING, out, at_once=1, timeout=scaled(60))}
    finally:
        await stop()


async def test_every_scenario_that_passes_directly_passes_through_the_gateway(
    tmp_path: Path, new_runtime: Any, memory_keyring: Any
) -> None:
    assert shutil.which("npm"), "npm is needed for this test (Debian: apt-get install nodejs npm)"
    tools = await asyncio.to_thread(tools_dir, TOOLS)

    # The two sides share nothing but the bound on suite runs: their own ports, folders and server.
    slots = asyncio.Semaphore(AT_ONCE)
    straight, through = await asyncio.gather(
        run_direct(tools, tmp_path / "direct", slots),
        run_gateway(tools, tmp_path / "data", tmp_path / "gateway", slots, new_runtime, memory_keyring),
    )

    def passes(results: dict[tuple[str, str], tuple[int, int]], key: tuple[str, str]) -> bool:
        return results[key][1] == 0

    broken_stub = [key for key in [*SCENARIOS, *ASKING] if not passes(straight, key)]
    assert not broken_stub, f"the stub itself fails {broken_stub} (results under {tmp_path / 'direct'})"
    lost = [key for key in [*SCENARIOS, *ASKING] if key not in GATEWAY_GAPS and not passes(through, key)]
    assert not lost, f"passing directly, failing through the gateway: {lost} (results under {tmp_path / 'gateway'})"
    closed = [key for key in GATEWAY_GAPS if passes(through, key)]
    assert not closed, f"now passing through the gateway, take them out of GATEWAY_GAPS: {closed}"
