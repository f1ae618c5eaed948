"""Item 13 (#28 item 2): an install on replica A seen by a client of replica B, NOTIFY vs polling.

Two pairs of ``mcp-setup serve`` replicas (real subprocesses), each pair on its own PostgreSQL
database with one data key: one pair as shipped (``LISTEN/NOTIFY``), the other with
``MCP_SETUP_LISTEN_NOTIFY=false`` (the half-second polling only: the baseline, what every replica
did before #28). The stub is installed through replica A of each pair; an SDK client holds an
``/mcp`` session on replica B. Each round ``servers.enable`` (then ``servers.disable``) on A over
``/rpc`` — an enable changes B's tool list as an install does: the server's tools appear, B starts
it in the background — timed from the request to B's client getting
``notifications/tools/list_changed`` (the headline: the enables). The two pairs' rounds are interleaved. B's gateway
sends it after syncing its connections: a disable waits for B to stop the server first, so the
disables are reported apart. The database
URL: ``MCP_SETUP_BENCH_POSTGRES_URL`` (or ``MCP_SETUP_TEST_POSTGRES_URL``); without either the
section starts a throwaway cluster of its own (``bench/postgres.py``, as ``scripts/test.sh`` does).
Each pair gets a fresh database there, dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

from bench.common import SECRET, Root, emit, mcp_setup_argv, median, summary
from bench.section_load import Serve, make_catalog, rpc


def database(base_url: str) -> Any:
    from tests.helpers.postgres_databases import throwaway_database

    return throwaway_database(base_url, prefix="bench_")


class Pair:
    def __init__(self, root: Root, name: str, url: str, catalog: Any, key_file: str, notify: bool) -> None:
        env = {
            "MCP_SETUP_DATABASE_URL": url,
            "MCP_SETUP_DATA_KEY_FILE": key_file,
            "MCP_SETUP_LISTEN_NOTIFY": "true" if notify else "false",
        }
        self.a = Serve(root, root.path / f"{name}-a", catalog, extra_env=env)
        self.b = Serve(root, root.path / f"{name}-b", catalog, extra_env=env)
        # B's /mcp client has a client token of its own (the page link's token is refused on /mcp).
        made = subprocess.run(
            mcp_setup_argv("token", "create", f"bench-{name}", "--client"),
            env=root.face_env(root.path / f"{name}-a", **env),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        self.client_token = made.stdout.split()[0]
        self.heard: asyncio.Queue[float] = asyncio.Queue()
        self.server_id = ""
        self.enabled = True

    async def message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self.heard.put_nowait(time.perf_counter())

    def stop(self) -> None:
        for serve in (self.a, self.b):
            serve.stop()


@contextlib.asynccontextmanager
async def session_on_b(pair: Pair) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {pair.client_token}"}, timeout=30)
    async with (
        http,
        Client(
            streamable_http_client(f"{pair.b.base}/mcp", http_client=http), mode="legacy", message_handler=pair.message
        ) as client,
    ):
        await client.list_tools()
        yield client


async def install_on_a(http: Any, pair: Pair) -> None:
    asked = await rpc(
        http,
        pair.a,
        "mcp_setup_request_secret",
        {"key_name": "STUB_API_KEY", "prompt": "key", "server": "io.bench/stub-00"},
    )
    answered = await http.post(
        f"{pair.a.base}/api/secrets/{asked['prompt_id']}", json={"value": SECRET}, headers=pair.a.headers
    )
    answered.raise_for_status()
    installed = await rpc(
        http,
        pair.a,
        "mcp_setup_install_and_connect",
        {"qualified_name": "io.bench/stub-00", "env_refs": {"STUB_API_KEY": asked["ref"]}},
    )
    pair.server_id = installed["server_id"]


async def one_round(http: Any, pair: Pair) -> float:
    """Disable the server on A when it is enabled, else enable it: B's tool list changes either way."""
    enable = not pair.enabled
    pair.enabled = enable
    while not pair.heard.empty():
        pair.heard.get_nowait()
    t0 = time.perf_counter()
    await rpc(http, pair.a, "servers.enable" if enable else "servers.disable", {"server_id": pair.server_id})
    heard = await asyncio.wait_for(pair.heard.get(), 10)
    return heard - t0


async def main_async(args: argparse.Namespace) -> dict[str, Any]:

    base = os.environ.get("MCP_SETUP_BENCH_POSTGRES_URL") or os.environ.get("MCP_SETUP_TEST_POSTGRES_URL")
    if not base:
        from bench.postgres import throwaway_cluster

        with throwaway_cluster() as own:
            return await measure(args, own)
    return await measure(args, base)


async def measure(args: argparse.Namespace, base: str) -> dict[str, Any]:
    import httpx

    from setup_agent.secrets.vault import Vault

    root = Root("team")
    catalog = make_catalog(root, 1)
    key_file = root.path / "team.key"
    Vault.in_memory().export_key(key_file)
    times: dict[str, list[float]] = {f"{m}{d}": [] for m in ("notify", "polling") for d in ("", "_enable", "_disable")}
    with database(base) as url_n, database(base) as url_p:
        pairs = {
            "notify": Pair(root, "n", url_n, catalog, str(key_file), True),
            "polling": Pair(root, "p", url_p, catalog, str(key_file), False),
        }
        try:
            async with httpx.AsyncClient(timeout=120, trust_env=False) as http:
                for pair in pairs.values():
                    await rpc(http, pair.a, "servers.list", {"wait_seconds": 30})
                    await install_on_a(http, pair)
                async with session_on_b(pairs["notify"]), session_on_b(pairs["polling"]):
                    for mode in pairs:  # warm-up: B connects the server it heard of
                        await one_round(http, pairs[mode])
                        await one_round(http, pairs[mode])
                    for r in range(args.rounds):
                        order = ["notify", "polling"] if r % 2 == 0 else ["polling", "notify"]
                        for mode in order:
                            took = await one_round(http, pairs[mode])
                            times[mode].append(took)
                            times[f"{mode}_{'enable' if pairs[mode].enabled else 'disable'}"].append(took)
        finally:
            for pair in pairs.values():
                pair.stop()
    return {
        "section": "team",
        "rounds": args.rounds,
        "times": {k: summary(v) for k, v in times.items()},
        "ratio": median(times["notify_enable"]) / median(times["polling_enable"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    emit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
