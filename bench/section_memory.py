"""Item 7: resident memory (VmRSS) of the service process alone, idle and with 20 servers.

* ``serve_idle``  — ``mcp-setup serve`` on an empty data dir, after one ``servers.list``;
* ``serve_20``    — ``mcp-setup serve`` on a data dir holding 20 installed stub servers
  (installed beforehand into the same store; the service boot-spawns them), once
  ``servers.list {wait_seconds: 30}`` shows all 20 connected;
* ``mcp_idle``    — ``mcp-setup mcp`` after ``initialize`` (the stdio face), and the minimal
  SDK server of the cold-start section after ``initialize``, for reference;
* ``mcp_listed``  — ``mcp-setup mcp`` on a data dir with 3 installed servers, after ``initialize``
  + ``tools/list`` (what a client does at launch; the core is not loaded until a tool call,
  #17 item 5: target ≤ 1.3× the minimal SDK server), then after one ``mcp_setup_list_servers``
  call (the core loaded; no server is started by it).

RSS is read from ``/proc/<pid>/status`` of the service process only (the stub servers are
its children and are not counted; their total is reported apart). Each value is the
median of 5 reads 0.2 s apart, after 1 s of quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from bench.common import BENCH, REPO, Root, children_of, emit, mcp_setup_argv, median, processes_mentioning, rss_kib
from bench.section_coldstart import INIT
from bench.section_gateway import install_stubs
from bench.section_load import Serve, rpc


async def settled_rss(pid: int) -> int:
    await asyncio.sleep(1.0)
    reads = []
    for _ in range(5):
        reads.append(rss_kib(pid))
        await asyncio.sleep(0.2)
    return int(median(reads))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    root = Root("memory")
    out: dict[str, Any] = {"section": "memory", "servers": args.servers}
    serves: list[Serve] = []
    try:
        async with httpx.AsyncClient(timeout=120, trust_env=False) as http:
            idle = Serve(root, root.path / "idle", None)
            serves.append(idle)
            await rpc(http, idle, "servers.list", {})
            out["serve_idle_kib"] = await settled_rss(idle.pid)
            out["serve_idle_exit"] = idle.stop()

            data = root.path / "with-servers"
            install_stubs(root, data, args.servers, tools=None)  # serve connects them: nothing recorded
            busy = Serve(root, data, None)
            serves.append(busy)
            listed = await rpc(http, busy, "servers.list", {"wait_seconds": 30})
            out["connected"] = sum(1 for s in listed["servers"] if s["status"] == "connected")
            out["serve_20_kib"] = await settled_rss(busy.pid)
            kids = children_of(busy.pid)
            out["children"] = len(kids)
            out["children_total_kib"] = sum(rss_kib(k) for k in kids)
            out["serve_20_exit"] = busy.stop()

        # the stdio face, idle after initialize; and the minimal SDK server for reference
        env = root.face_env(root.path / "mcp-data", MCP_SETUP_REGISTRIES="local")
        for key, argv in (
            ("mcp_idle_kib", mcp_setup_argv("mcp")),
            ("min_sdk_idle_kib", [sys.executable, str(BENCH / "minimal_server.py"), "lowlevel"]),
        ):
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=str(REPO),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                assert proc.stdin and proc.stdout
                proc.stdin.write((json.dumps(INIT) + "\n").encode())
                proc.stdin.flush()
                assert json.loads(proc.stdout.readline())["id"] == 1
                out[key] = await settled_rss(proc.pid)
                proc.stdin.close()
                proc.wait(15)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
        # a client's launch on an existing data dir: initialize + tools/list, then a first tool call
        listed_data = root.path / "mcp-listed"
        install_stubs(root, listed_data, 3)  # tools recorded: listing starts no server
        proc = subprocess.Popen(
            mcp_setup_argv("mcp"),
            env=root.face_env(listed_data, MCP_SETUP_REGISTRIES="local"),
            cwd=str(REPO),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            assert proc.stdin and proc.stdout
            for msg in (
                INIT,
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            ):
                proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 1
            listed = json.loads(proc.stdout.readline())
            out["mcp_listed_tools"] = len(listed["result"]["tools"])
            out["mcp_listed_kib"] = await settled_rss(proc.pid)
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "mcp_setup_list_servers", "arguments": {}},
            }
            proc.stdin.write((json.dumps(call) + "\n").encode())
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 3
            out["mcp_after_call_kib"] = await settled_rss(proc.pid)
            out["mcp_after_call_children"] = len(children_of(proc.pid))
            proc.stdin.close()
            proc.wait(15)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and processes_mentioning(str(root.path)):
            await asyncio.sleep(0.1)
    finally:
        for s in serves:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait(10)
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=20)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
