"""Item 6: 50 concurrent setups through ``/rpc`` of ``mcp-setup serve``, with stub servers.

``mcp-setup serve --no-browser --port 0`` runs as a real subprocess (isolated home, XDG dirs,
``PYTHON_KEYRING_BACKEND=fail``) on a local catalog of 50 stub servers (``tests/stub_server``
MCPB bundle, one entry per name). 50 clients start at once; each does, over HTTP with the
token header:

1. ``mcp_setup_request_secret`` (JSON-RPC) → ``{ref, prompt_id}``;
2. ``POST /api/secrets/{prompt_id}`` with the value (what the page's modal does);
3. ``mcp_setup_test_connection`` (JSON-RPC) with ``env_refs``;
4. ``mcp_setup_install_and_connect`` (JSON-RPC) → must be ``connected``.

Reported: successes, p50/p95 (and max) of the whole setup and of each step. Then: every one
of the 50 installed servers is connected, no probe process is alive (nothing under
``<home>/scratch``), the scratch dir is empty; after SIGINT the service exits 0 and no
process under the temp root is left.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    SECRET,
    Root,
    cpu_seconds,
    emit,
    mcp_setup_argv,
    pct,
    processes_mentioning,
    rss_kib,
    summary,
)

URL_LINE = re.compile(r"http://127\.0\.0\.1:(\d+)/\?t=([A-Za-z0-9_\-]+)")


def make_catalog(root: Root, count: int) -> Path:
    from tests.stub_server.bundle import build_stub_bundle, stub_server_json

    bundle, sha = build_stub_bundle(root.path / "dist", expected_value=SECRET)
    catalog = root.path / "catalog"
    catalog.mkdir(exist_ok=True)
    docs = [stub_server_json(bundle.resolve().as_uri(), sha, name=f"io.bench/stub-{i:02d}") for i in range(count)]
    (catalog / "stubs.json").write_text(json.dumps(docs))
    return catalog


class Serve:
    """``mcp-setup serve`` as a subprocess; reads the printed URL (bounded)."""

    def __init__(
        self,
        root: Root,
        data: Path,
        catalog: Path | None,
        timeout: float = 60.0,
        argv: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        env = root.face_env(data, MCP_SETUP_REGISTRIES="local", PYTHONUNBUFFERED="1", **(extra_env or {}))
        if catalog is not None:
            env["MCP_SETUP_CATALOG_DIR"] = str(catalog)
        self.stderr_path = root.path / f"serve-{time.monotonic_ns()}.log"
        with open(self.stderr_path, "ab") as errlog:
            self.proc = subprocess.Popen(
                argv or mcp_setup_argv("serve", "--no-browser", "--port", "0"),
                stdout=subprocess.PIPE,
                stderr=errlog,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=str(REPO),
            )
        self.started = time.perf_counter()
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf = b""
        deadline = time.monotonic() + timeout
        try:
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError("mcp-setup serve printed no URL")
                if not sel.select(1):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError("mcp-setup serve exited: " + self.stderr()[-2000:])
                buf += chunk
                m = URL_LINE.search(buf.decode(errors="replace"))
                if m:
                    self.port, self.token = int(m.group(1)), m.group(2)
                    break
        except BaseException:
            self.proc.kill()
            self.proc.wait(10)
            raise
        finally:
            sel.close()
        self.base = f"http://127.0.0.1:{self.port}"
        self.headers = {"X-MCP-Setup-Token": self.token, "Origin": self.base}

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return -9
        return self.proc.returncode

    @property
    def pid(self) -> int:
        return self.proc.pid


async def rpc(http: Any, serve: Serve, method: str, params: dict[str, Any], req_id: int = 1) -> Any:
    body = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
    resp = await http.post(f"{serve.base}/rpc", json=body, headers=serve.headers)
    resp.raise_for_status()
    data = resp.json()
    if "error" in data:
        raise RuntimeError(f"{method}: {json.dumps(data['error'])[:400]}")
    return data["result"]


async def one_setup(http: Any, serve: Serve, i: int, gate: asyncio.Event) -> dict[str, Any]:
    name = f"io.bench/stub-{i:02d}"
    await gate.wait()
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        asked = await rpc(
            http,
            serve,
            "mcp_setup_request_secret",
            {"key_name": "STUB_API_KEY", "prompt": "Stub key", "server": name},
            i,
        )
        t1 = time.perf_counter()
        steps["request_secret"] = t1 - t0
        answered = await http.post(
            f"{serve.base}/api/secrets/{asked['prompt_id']}", json={"value": SECRET}, headers=serve.headers
        )
        assert answered.status_code == 200, answered.text
        t2 = time.perf_counter()
        steps["answer"] = t2 - t1
        refs = {"STUB_API_KEY": asked["ref"]}
        tested = await rpc(http, serve, "mcp_setup_test_connection", {"qualified_name": name, "env_refs": refs}, i)
        assert tested.get("ok") is True and tested["tools"], tested
        t3 = time.perf_counter()
        steps["test_connection"] = t3 - t2
        installed = await rpc(
            http, serve, "mcp_setup_install_and_connect", {"qualified_name": name, "env_refs": refs}, i
        )
        assert installed["status"] == "connected", installed
        t4 = time.perf_counter()
        steps["install_and_connect"] = t4 - t3
        return {"ok": True, "total": t4 - t0, "steps": steps}
    except Exception as exc:  # noqa: BLE001 - counted and reported
        return {
            "ok": False,
            "total": time.perf_counter() - t0,
            "steps": steps,
            "error": f"{type(exc).__name__}: {exc}"[:500],
        }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    root = Root("load")
    out: dict[str, Any] = {"section": "load", "setups": args.setups}
    serve: Serve | None = None
    try:
        catalog = make_catalog(root, args.setups)
        data = root.path / "data"
        serve = Serve(root, data, catalog)
        limits = httpx.Limits(max_connections=args.setups * 2, max_keepalive_connections=args.setups * 2)
        async with httpx.AsyncClient(timeout=300, limits=limits, trust_env=False) as http:
            await rpc(http, serve, "servers.list", {})  # the runtime is up
            gate = asyncio.Event()
            tasks = [asyncio.create_task(one_setup(http, serve, i, gate)) for i in range(args.setups)]
            await asyncio.sleep(0.1)
            peak_children = 0
            cpu0 = (cpu_seconds(serve.pid), cpu_seconds(serve.pid, children=True), os.times())
            t0 = time.perf_counter()
            gate.set()
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=0.25)
                peak_children = max(peak_children, len(processes_mentioning(str(data))))
            wall = time.perf_counter() - t0
            me = os.times()
            # CPU spent during the load: the service, its finished children (the probes), the
            # live installed servers (their start), and this client. On 2 cores, wall ≥ sum / 2.
            live = processes_mentioning(str(data / "servers"))
            cpu = {
                "service": cpu_seconds(serve.pid) - cpu0[0],
                "probes_reaped": cpu_seconds(serve.pid, children=True) - cpu0[1],
                "installed_servers": sum(cpu_seconds(p) for p in live),
                "bench_client": (me.user + me.system) - (cpu0[2].user + cpu0[2].system),
            }
            cpu["total"] = sum(cpu.values())
            cpu["floor_wall_s"] = cpu["total"] / (os.cpu_count() or 1)
            out["cpu_s"] = cpu
            results = [t.result() for t in tasks]
            ok = [r for r in results if r["ok"]]
            out["succeeded"] = len(ok)
            out["failures"] = [r["error"] for r in results if not r["ok"]][:5]
            out["wall_s"] = wall
            out["peak_processes"] = peak_children
            totals = [r["total"] for r in ok]
            if totals:
                out["total"] = summary(totals) | {"p50": pct(totals, 50), "p95": pct(totals, 95)}
                for step in ("request_secret", "answer", "test_connection", "install_and_connect"):
                    xs = [r["steps"][step] for r in ok]
                    out[step] = summary(xs) | {"p50": pct(xs, 50), "p95": pct(xs, 95)}
            listed = await rpc(http, serve, "servers.list", {"wait_seconds": 30})
            statuses = [s["status"] for s in listed["servers"]]
            out["installed"] = len(statuses)
            out["connected"] = statuses.count("connected")
            # the probes' background teardown: wait (bounded) until no probe process/scratch dir is left
            scratch = data / "scratch"
            t_settle = time.perf_counter()
            while time.perf_counter() - t_settle < 15:
                probes = processes_mentioning(str(scratch))
                left = list(scratch.iterdir()) if scratch.exists() else []
                if not probes and not left:
                    break
                await asyncio.sleep(0.1)
            out["settle_s"] = time.perf_counter() - t_settle
            out["probe_processes_left"] = len(processes_mentioning(str(scratch)))
            out["scratch_entries_left"] = len(list(scratch.iterdir())) if scratch.exists() else 0
            out["server_processes"] = len(processes_mentioning(str(data / "servers")))
            out["service_rss_kib_after"] = rss_kib(serve.pid)
        code = serve.stop(signal.SIGINT)
        out["exit_code"] = code
        out["traceback_in_log"] = "Traceback" in serve.stderr()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and processes_mentioning(str(root.path)):
            await asyncio.sleep(0.1)
        out["processes_left_after_stop"] = len(processes_mentioning(str(root.path)))
    finally:
        if serve is not None and serve.proc.poll() is None:
            serve.proc.kill()
            serve.proc.wait(10)
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--setups", type=int, default=50)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
