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

Then the official client's widened search (``widened``): ``OfficialRegistry.search(q)`` on a
fresh client (stems, synonyms, the most selective word paged, a typo's halves in one more
round, the union ranked) against the baseline, one name-only request of the API for the
same query (``GET /v0.1/servers?search=q&limit=100``: all the API itself can do), timed on the
same HTTP client, interleaved with the order rotated. Per kind of query (one word with
nothing to widen, a word with synonyms, several words, a typo): the median of each round's
ratio and of the milliseconds added, and the requests the widened search made.
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

#: The widened official search, by kind of query.
WIDENED = {
    "plain": ("notion", "github", "slack", "time"),  # one word, nothing to widen: one request
    "synonyms": ("kubernetes", "jira", "email", "browser"),  # a word and its stem/synonyms at once
    "words": ("browser automation", "web scraping", "database queries", "jira issues"),
    "typo": ("notoin", "githbu", "wheather", "spotfiy"),  # nothing by name: the halves, one more round
}


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
        out["widened"] = await widened(runtime.http, urls["official"], args.widened_rounds)
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


async def widened(http: Any, url: str, rounds: int) -> dict[str, Any]:
    """The widened official search against one name-only request, per kind of query."""
    from registry_clients.official import OfficialRegistry

    class Counting:  # counts the widened search's requests, on the same client
        def __init__(self) -> None:
            self.n = 0

        async def get(self, *a: Any, **kw: Any) -> Any:
            self.n += 1
            return await http.get(*a, **kw)

    async def name_only(q: str) -> float:
        t0 = time.perf_counter()
        resp = await http.get(f"{url}/v0.1/servers", params={"search": q, "limit": 100, "version": "latest"})
        resp.raise_for_status()
        return time.perf_counter() - t0

    async def widened_search(q: str, counter: Counting) -> float:
        registry = OfficialRegistry(url, http=counter)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        await registry.search(q, 1, 10)
        return time.perf_counter() - t0

    out: dict[str, Any] = {}
    for kind, queries in WIDENED.items():
        mine: list[float] = []
        base: list[float] = []
        requests: list[int] = []
        for i in range(rounds):
            q = queries[i % len(queries)]
            counter = Counting()
            if i % 2:
                base.append(await name_only(q))
                mine.append(await widened_search(q, counter))
            else:
                mine.append(await widened_search(q, counter))
                base.append(await name_only(q))
            requests.append(counter.n)
        out[kind] = {
            "queries": list(queries),
            "widened": summary(mine),
            "baseline": summary(base),
            "ratio": median(m / b for m, b in zip(mine, base)),
            "added_ms": median((m - b) * 1000 for m, b in zip(mine, base)),
            "requests": median(requests),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cached-rounds", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--widened-rounds", type=int, default=12)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
