"""Item 11 (#23): what the sandbox adds to a server's start.

Interleaved rounds (order rotated each round), the same stub (``tests/stub_server``, run by the
root's ``bin/python3``), ``Prober.probe(spec, values)`` timed to the tools listed (teardown in the
background, drained untimed), with the prober's sandbox:

* ``off``      — ``MCP_SETUP_SANDBOX=off``: the baseline, unisolated as before #23;
* ``bwrap``    — bubblewrap (what ``auto`` picks where user namespaces work), since #40 with the
  server in a network namespace of its own behind its proxy listener (``network``: the mechanism);
* ``landlock`` — the Landlock launcher (``auto``'s fallback), where the kernel has it, with TCP held
  to the proxy's port where it has TCP rules.

Reported: the median of each round's sandboxed ÷ off, and the milliseconds added (target
≤ 1.15× or ≤ 50 ms added).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

from bench.common import SECRET, Root, emit, median, stub_env, summary


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from setup_agent.launch import LaunchSpec, Sandbox
    from setup_agent.launch.landlock import abi_version
    from setup_agent.secrets import Redactor
    from setup_agent.setup.probe import Prober

    root = Root("sandbox")
    out: dict[str, Any] = {"section": "sandbox"}
    try:
        data = root.path / "data"
        (data / "scratch").mkdir(parents=True)
        host_env = dict(os.environ)
        kinds = ["off", "bwrap"] + (["landlock"] if abi_version() >= 1 else [])
        probers = {}
        for kind in kinds:
            sandbox = Sandbox(kind, hide=(data,), user_home=Path(host_env["HOME"]), host_env=host_env)  # type: ignore[arg-type]
            if kind != "off" and sandbox.mechanism != kind:
                out.setdefault("unavailable", {})[kind] = sandbox.why
                continue
            out.setdefault("network", {})[kind] = sandbox.network_isolation().mechanism
            probers[kind] = Prober(
                Redactor(), scratch_root=data / "scratch", host_env=host_env, timeout=30, sandbox=sandbox
            )
        env = {k: v for k, v in stub_env().items() if k != "STUB_API_KEY"}
        env["STUB_API_KEY"] = "${STUB_API_KEY}"
        spec = LaunchSpec(command=str(root.python), args=[str(root.stub)], env=env)
        names = list(probers)
        times: dict[str, list[float]] = {k: [] for k in names}

        async def once(kind: str) -> float:
            t0 = time.perf_counter()
            result = await probers[kind].probe(spec, {"STUB_API_KEY": SECRET})
            elapsed = time.perf_counter() - t0
            assert {t["name"] for t in result.tools} >= {"echo", "whoami"}
            await probers[kind].drain()
            return elapsed

        for kind in names:  # warm-up: page cache, bwrap's first start
            await once(kind)
        for i in range(args.rounds):
            for kind in names[i % len(names) :] + names[: i % len(names)]:
                times[kind].append(await once(kind))
        out["times"] = {k: summary(v) for k, v in times.items()}
        for kind in names:
            if kind == "off":
                continue
            out[f"ratio_{kind}"] = median(s / o for s, o in zip(times[kind], times["off"], strict=True))
            out[f"added_{kind}_s"] = median(s - o for s, o in zip(times[kind], times["off"], strict=True))
        out["rounds"] = args.rounds
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    emit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
