"""Item 4: search fan-out over both fake registries, each answering 200 ms late.

The fakes (official + Smithery, ``tests/fakes``) run in their own process
(``bench/fakes_proc.py``) with ``latency = 0.2``. The hub is the product's own, built by
``build_runtime`` from settings pointing at the fakes. Interleaved rounds (order rotated),
each on a fresh ``RegistryHub`` and fresh sources (empty caches) sharing the runtime's HTTP
client (warm connections):

* ``fanout``   — ``hub.search(q)``: both registries at once;
* ``official`` / ``smithery`` — ``hub.search(q, source=...)``: one registry alone.

Ratio: per round, fanout / the slower of the two single-registry searches (same query),
median over rounds; also median(fanout) / max(median(official), median(smithery)).
Then the cache: the same search again on a hub that has it (``hub_cached``), and the whole
tool ``SetupService.call("mcp_setup_search")`` served from the cache (``tool_cached``:
argument checks, the cache, the redactor), both in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from bench.common import REPO, Root, emit, median, summary

QUERIES = ("mcp", "server", "search", "github", "time", "notion", "weather", "json")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import keyring.backends.fail

    from app.runtime import build_runtime
    from app.settings import Settings
    from registry_clients.hub import RegistryHub, build_sources
    from setup_agent.setup.service import CallContext

    root = Root("search")
    out: dict[str, Any] = {"section": "search", "latency_s": args.latency}
    fakes = subprocess.Popen(
        [sys.executable, "-m", "bench.fakes_proc", str(args.latency)],
        cwd=str(REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert fakes.stdout is not None
        urls = json.loads(fakes.stdout.readline())
        settings = Settings(
            home=root.path / "data",
            registries="official,smithery",
            official_registry_url=urls["official"],
            smithery_url=urls["smithery"],
            smithery_api_key=urls["api_key"],
            registry_timeout_seconds=10,
        )
        runtime = build_runtime(settings, keyring_backend=keyring.backends.fail.Keyring())

        def fresh() -> RegistryHub:
            # new source objects too: the official client keeps per-query cursor state
            sources, _ = build_sources(
                ["official", "smithery"],
                official_url=urls["official"],
                smithery_url=urls["smithery"],
                smithery_api_key=urls["api_key"],
                http=runtime.http,
                timeout=10,
            )
            return RegistryHub(sources, timeout=10)

        async def timed(coro: Any) -> tuple[float, Any]:
            t0 = time.perf_counter()
            res = await coro
            return time.perf_counter() - t0, res

        # warm-up: connections to both fakes
        for _ in range(2):
            await fresh().search("mcp")
        t: dict[str, list[float]] = {"fanout": [], "official": [], "smithery": []}
        kinds = list(t)
        for i in range(args.rounds):
            q = QUERIES[i % len(QUERIES)]
            for kind in kinds[i % 3 :] + kinds[: i % 3]:
                hub = fresh()
                if kind == "fanout":
                    secs, res = await timed(hub.search(q))
                    assert not [e for e in res.errors if e.source in ("official", "smithery")], res.errors
                else:
                    secs, res = await timed(hub.search(q, source=kind))
                t[kind].append(secs)
        slowest = max(median(t["official"]), median(t["smithery"]))
        out["times"] = {k: summary(v) for k, v in t.items()}
        out["ratio_fanout_slowest_of_medians"] = median(t["fanout"]) / slowest
        # paired: each round's fan-out against that round's slower single registry (same query)
        out["ratio_fanout_slowest"] = median(
            f / max(o, s) for f, o, s in zip(t["fanout"], t["official"], t["smithery"])
        )

        # cache hits
        hub = fresh()
        await hub.search("mcp")
        cached = [(await timed(hub.search("mcp")))[0] for _ in range(args.cached_rounds)]
        await runtime.service.call("mcp_setup_search", {"query": "mcp"}, CallContext())
        tool_cached = []
        for _ in range(args.cached_rounds):
            secs, res = await timed(runtime.service.call("mcp_setup_search", {"query": "mcp"}, CallContext()))
            assert res.get("ok") is not False and res["servers"], res
            tool_cached.append(secs)
        out["servers_per_search"] = len(res["servers"])
        out["hub_cached_ms"] = {k: (v * 1000 if k != "n" else v) for k, v in summary(cached).items()}
        out["tool_cached_ms"] = {k: (v * 1000 if k != "n" else v) for k, v in summary(tool_cached).items()}
        await runtime.aclose()
    finally:
        if fakes.stdin:
            fakes.stdin.close()
        try:
            fakes.wait(15)
        except subprocess.TimeoutExpired:
            fakes.kill()
            fakes.wait(5)
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cached-rounds", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
