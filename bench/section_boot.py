"""Item 5: boot-spawn of 20 installed stub servers: wall time of the start vs the serial sum.

Twenty servers are installed in a real SQLite store (launch spec: the stub, its key as an
encrypted secret). Interleaved rounds (order alternated), each on a fresh
``ConnectionManager`` (the product's defaults: ``max_concurrency=8``):

* ``boot``   — ``ConnectionManager.start()``: what the service runs at start; returns when
  every server has settled (all must be ``connected``);
* ``serial`` — the same 20, one at a time: ``connect(server, wait=True)``; the sum.

``aclose()`` (untimed) stops every server between rounds; nothing may be left running.

CPU accounting (``os.times``): this process up to "all connected", and the stubs once
reaped. On a 2-core machine a start that is CPU-bound cannot beat (parent + children CPU) / 2,
and the serial sum is about parent + children CPU, so ≤ 0.5× is the hardware floor for the
stdlib stub (~50 ms of CPU to start a Python interpreter each). To show the concurrency
itself, the same is run for 20 stubs that wait 200 ms before answering (``slow`` mode, like a
launcher resolving a package): there the CPU is not the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from bench.common import SECRET, Root, emit, median, stub_env, summary


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from setup_agent.gateway.connections import ConnectionManager
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.redact import Redactor
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    root = Root("boot")
    out: dict[str, Any] = {"section": "boot", "servers": args.servers}
    try:
        store = Store.for_data_dir(root.path / "data", Vault.in_memory())
        env = {k: ("${STUB_API_KEY}" if k == "STUB_API_KEY" else v) for k, v in stub_env().items()}
        spec = LaunchSpec(command=str(root.python), args=[str(root.stub)], env=env, runner="python3")
        for i in range(args.servers):
            store.servers.install(
                qualified_name=f"io.bench/stub-{i:02d}",
                source="local",
                version="1.0.0",
                package_type="mcpb",
                launch_spec=spec.model_dump(mode="json"),
                installed_by="bench",
                tools_hash="0" * 64,
                env={"STUB_API_KEY": (SECRET, True)},
            )
        servers = store.servers.list(enabled_only=True)

        def manager() -> ConnectionManager:
            return ConnectionManager(store, Redactor(), install_root=root.path / "data" / "servers", connect_timeout=60)

        cpu: dict[str, list[float]] = {
            "boot_parent": [],
            "boot_children": [],
            "serial_parent": [],
            "serial_children": [],
        }

        def account(kind: str, before: os.times_result, after_start: os.times_result) -> None:
            # parent: this process up to "all connected"; children: the stubs' CPU, known once
            # they have been reaped (after aclose)
            end = os.times()
            cpu[f"{kind}_parent"].append(after_start.user + after_start.system - before.user - before.system)
            cpu[f"{kind}_children"].append(
                end.children_user + end.children_system - before.children_user - before.children_system
            )

        async def boot(group: list[Any] | None = None) -> float:
            cm = manager()
            group = servers if group is None else group
            before = os.times()
            t0 = time.perf_counter()
            if group is servers:
                await cm.start()
            else:  # the same as start(), for another set of servers
                for server in group:
                    await cm.connect(server, wait=False)
                await asyncio.gather(*(cm.wait_settled(s.server_id) for s in group))
            elapsed = time.perf_counter() - t0
            mid = os.times()
            bad = [s.server_id for s in group if cm.status(s.server_id).status != "connected"]
            await cm.aclose()
            if group is servers:
                account("boot", before, mid)
            assert not bad, f"not connected: {bad}"
            return elapsed

        async def serial(group: list[Any] | None = None) -> tuple[float, list[float]]:
            cm = manager()
            group = servers if group is None else group
            each = []
            before = os.times()
            for server in group:
                t0 = time.perf_counter()
                status = await cm.connect(server, wait=True)
                each.append(time.perf_counter() - t0)
                assert status.status == "connected", status
            mid = os.times()
            await cm.aclose()
            if group is servers:
                account("serial", before, mid)
            return sum(each), each

        await boot()  # warm-up, untimed
        t: dict[str, list[float]] = {"boot": [], "serial_sum": [], "serial_each": []}
        for i in range(args.rounds):
            for kind in ("boot", "serial") if i % 2 == 0 else ("serial", "boot"):
                if kind == "boot":
                    t["boot"].append(await boot())
                else:
                    total, each = await serial()
                    t["serial_sum"].append(total)
                    t["serial_each"].extend(each)
            out.setdefault("left_between_rounds", []).append(len(root.leftovers()))
        out["times"] = {k: summary(v) for k, v in t.items()}
        out["ratio_boot_serial"] = median(t["boot"]) / median(t["serial_sum"])
        out["per_round_ratio"] = median(b / s for b, s in zip(t["boot"], t["serial_sum"]))
        out["cpu_s"] = {k: median(v) for k, v in cpu.items()}
        cores = os.cpu_count() or 1
        # the wall-time floor of a CPU-bound start on this machine: all the CPU spread over every core
        out["cpu_floor_s"] = (out["cpu_s"]["boot_parent"] + out["cpu_s"]["boot_children"]) / cores
        out["cores"] = cores

        # The same with servers that take 200 ms to start (waiting, not computing: like an
        # npx/uvx launcher resolving a package): concurrency shows without the CPU bound.
        slow_env = dict(env, STUB_MODE="slow", STUB_SLOW_SECONDS=str(args.slow_seconds))
        slow_spec = LaunchSpec(command=str(root.python), args=[str(root.stub)], env=slow_env, runner="python3")
        for i in range(args.servers):
            store.servers.install(
                qualified_name=f"io.bench/slow-{i:02d}",
                source="local",
                version="1.0.0",
                package_type="mcpb",
                launch_spec=slow_spec.model_dump(mode="json"),
                installed_by="bench",
                tools_hash="0" * 64,
                env={"STUB_API_KEY": (SECRET, True)},
            )
        slow = [s for s in store.servers.list() if s.qualified_name.startswith("io.bench/slow-")]
        ts: dict[str, list[float]] = {"boot": [], "serial_sum": []}
        for i in range(args.slow_rounds):
            for kind in ("boot", "serial") if i % 2 == 0 else ("serial", "boot"):
                if kind == "boot":
                    ts["boot"].append(await boot(slow))
                else:
                    ts["serial_sum"].append((await serial(slow))[0])
        out["slow"] = {k: summary(v) for k, v in ts.items()}
        out["slow"]["ratio_boot_serial"] = median(ts["boot"]) / median(ts["serial_sum"])
        out["slow"]["start_delay_s"] = args.slow_seconds
        store.close()
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--slow-rounds", type=int, default=2)
    parser.add_argument("--slow-seconds", type=float, default=0.2)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
