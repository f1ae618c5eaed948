"""Bench row 9: the gateway costs nothing you can see.

* ``call`` — a proxied ``tools/call`` of ``<slug>__echo`` through ``mcp-setup mcp`` (an SDK
  ``ClientSession`` to the face, which forwards to the installed stub) against the same call
  made by an SDK ``ClientSession`` directly to a stub of its own and, in the same rounds,
  through the minimal SDK proxy (``minimal_proxy.py``: the floor of any proxy built on the
  SDK). All sessions are connected (and the installed server started by a first call) before
  timing; then interleaved rounds (order rotated), one call each; median ratios (target:
  mcp-setup ÷ minimal proxy ≤ 1.0; mcp-setup ÷ direct is reported beside it).
* ``list`` — spawn → ``initialize`` → ``tools/list`` answered, by a raw stdlib client, of a
  fresh ``mcp-setup mcp`` on a data dir holding ``--servers`` installed servers (their tools
  recorded in the store) against one on a data dir with none (both data dirs already
  created). Interleaved rounds; median ratio (target ≤ 1.10×). The servers' processes are
  counted after the listing: none may have been spawned to answer it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import BENCH, REPO, SECRET, Root, children_of, emit, mcp_setup_argv, median, stub_env, summary
from bench.section_coldstart import INIT

STUB_TOOLS = [
    {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Text to echo"}},
            "required": ["text"],
        },
    },
    {
        "name": "whoami",
        "description": "Answer 'ok' when the server is configured.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def install_stubs(root: Root, data: Path, count: int, *, tools: list[dict[str, Any]] | None = STUB_TOOLS) -> None:
    """``count`` stubs in ``data``'s store (key file vault), with their tools recorded (unless
    ``tools`` is None); or an empty store when ``count`` is 0 (the database exists, no server)."""
    import keyring.backends.fail

    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    vault = Vault.open(data, keyring_backend=keyring.backends.fail.Keyring())
    env = {k: ("${STUB_API_KEY}" if k == "STUB_API_KEY" else v) for k, v in stub_env().items()}
    spec = LaunchSpec(command=str(root.python), args=[str(root.stub)], env=env, runner="python3")
    with Store.for_data_dir(data, vault) as store:
        for i in range(count):
            store.servers.install(
                qualified_name=f"io.bench/stub-{i:02d}",
                source="local",
                version="1.0.0",
                package_type="mcpb",
                launch_spec=spec.model_dump(mode="json"),
                installed_by="bench",
                tools_hash="0" * 64,
                env={"STUB_API_KEY": (SECRET, True)},
                tools=tools,
            )


def time_list(argv: list[str], env: dict[str, str], timeout: float = 30.0) -> tuple[float, int, int]:
    """(seconds from spawn to the tools/list answer, tools listed, child processes after it)."""
    messages = [
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=str(REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
        start_new_session=True,
    )
    try:
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        buf = b""
        fd = proc.stdout.fileno()
        while True:
            remaining = t0 + timeout - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError("no tools/list answer")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise RuntimeError("mcp-setup mcp exited before answering tools/list")
            buf += chunk
            done = None
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == 2:
                    done = msg
            if done is not None:
                elapsed = time.perf_counter() - t0
                tools = len(done["result"]["tools"])
                kids = len(children_of(proc.pid))
                proc.communicate(timeout=15)
                return elapsed, tools, kids
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(5)


async def bench_call(root: Root, data: Path, rounds: int) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    argv = mcp_setup_argv("mcp")
    face = StdioServerParameters(command=argv[0], args=argv[1:], env=root.face_env(data, MCP_SETUP_REGISTRIES="local"))
    direct = StdioServerParameters(command=str(root.python), args=[str(root.stub)], env=stub_env())
    proxy = StdioServerParameters(
        command=sys.executable,
        args=[str(BENCH / "minimal_proxy.py"), str(root.python), str(root.stub)],
        env={**os.environ, **stub_env()},
    )
    t: dict[str, list[float]] = {"gateway": [], "direct": [], "proxy": []}
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(face, errlog=errlog) as (r1, w1),
            ClientSession(r1, w1) as gw,
            stdio_client(direct, errlog=errlog) as (r2, w2),
            ClientSession(r2, w2) as sdk,
            stdio_client(proxy, errlog=errlog) as (r3, w3),
            ClientSession(r3, w3) as px,
        ):
            await gw.initialize()
            await sdk.initialize()
            await px.initialize()
            listed = await gw.list_tools()
            name = next(tool.name for tool in listed.tools if tool.name.endswith("__echo"))
            sessions = {"gateway": (gw, name), "direct": (sdk, "echo"), "proxy": (px, "echo")}
            for _ in range(5):  # warm-up: the face loads its core, the installed stub starts
                for session, tool in sessions.values():
                    res = await session.call_tool(tool, {"text": "hello"})
                    assert not res.is_error, res
            kinds = list(sessions)
            for i in range(rounds):
                for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
                    session, tool = sessions[kind]
                    t0 = time.perf_counter()
                    res = await session.call_tool(tool, {"text": "hello"})
                    t[kind].append(time.perf_counter() - t0)
                    assert not res.is_error and res.content[0].text == "hello", res  # type: ignore[union-attr]
    return {
        "times": {k: summary(v) for k, v in t.items()},
        "ratio": median(t["gateway"]) / median(t["direct"]),
        "per_round_ratio": median(g / d for g, d in zip(t["gateway"], t["direct"])),
        "ratio_proxy_direct": median(t["proxy"]) / median(t["direct"]),
        "ratio_gateway_proxy": median(t["gateway"]) / median(t["proxy"]),
        "per_round_ratio_gateway_proxy": median(g / p for g, p in zip(t["gateway"], t["proxy"])),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    root = Root("gateway")
    out: dict[str, Any] = {"section": "gateway", "servers": args.servers}
    try:
        one = root.path / "one"
        install_stubs(root, one, 1)
        out["call"] = await bench_call(root, one, args.call_rounds)

        dirs = {"with": root.path / "with", "none": root.path / "none"}
        install_stubs(root, dirs["with"], args.servers)
        install_stubs(root, dirs["none"], 0)
        argv = mcp_setup_argv("mcp")
        t: dict[str, list[float]] = {"with": [], "none": []}
        tools: dict[str, int] = {}
        spawned = 0
        kinds = list(dirs)
        for i in range(args.list_rounds + 1):
            for kind in kinds[i % 2 :] + kinds[: i % 2]:
                env = root.face_env(dirs[kind], MCP_SETUP_REGISTRIES="local")
                elapsed, n, kids = await asyncio.to_thread(time_list, argv, env)
                tools[kind] = n
                spawned += kids
                if i > 0:  # the first round is a warm-up (page cache)
                    t[kind].append(elapsed)
        out["list"] = {
            "times": {k: summary(v) for k, v in t.items()},
            "ratio": median(t["with"]) / median(t["none"]),
            "tools": tools,
            "servers_spawned": spawned,
        }
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--call-rounds", type=int, default=200)
    parser.add_argument("--list-rounds", type=int, default=10)
    emit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
