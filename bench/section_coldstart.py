"""Item 3: cold start of ``mcp-setup mcp`` (spawn → answer to ``initialize``) vs a minimal SDK server.

A raw stdlib client spawns the server, writes ``initialize`` at once, and times until the
answer line arrives (so the client costs nothing). Interleaved rounds, order rotated:

* ``mcp_setup``   — ``.venv/bin/mcp-setup mcp`` on an existing data dir (the usual launch by
  an MCP client; the first run that creates the database is untimed);
* ``min_lowlevel`` — ``bench/minimal_server.py lowlevel`` (``mcp.server.Server``, the same
  SDK layer ``mcp-setup mcp`` is built on): the floor, target ratio against it;
* ``min_mcpserver`` — ``bench/minimal_server.py mcpserver`` (high-level ``MCPServer``);
* ``python``      — ``python -c pass`` (the interpreter alone);
* ``whatif_deferred`` — ``bench/whatif_deferred_mcp.py``: not the product, the recommended
  change (answer ``initialize`` first, import the core and build the runtime behind it).

Plus a few ``first_start`` runs on a fresh data dir (database created, migrations run), and
the ``-X importtime`` breakdown of one ``mcp-setup mcp`` start and of the minimal server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

from bench.common import BENCH, REPO, Root, emit, mcp_setup_argv, median, summary

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}


FIRST_CALL = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcp_setup_list_servers", "arguments": {}}},
]


def time_initialize(
    argv: list[str], env: dict[str, str], *, timeout: float = 30.0, first_call: bool = False
) -> tuple[float, str]:
    """Seconds from spawn to the initialize answer (with ``first_call``: to the answer of a
    ``mcp_setup_list_servers`` call sent right after it); returns (seconds, stderr text)."""
    want = 2 if first_call else 1
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=str(REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        start_new_session=True,
    )
    try:
        assert proc.stdin and proc.stdout and proc.stderr
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        if first_call:
            proc.stdin.write("".join(json.dumps(m) + "\n" for m in FIRST_CALL).encode())
        buf = b""
        errbuf = bytearray()
        fd, efd = proc.stdout.fileno(), proc.stderr.fileno()
        deadline = t0 + timeout
        elapsed = None
        while elapsed is None:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"{argv[-1]}: no initialize answer in {timeout}s")
            ready, _, _ = select.select([fd, efd], [], [], remaining)
            if efd in ready:  # keep stderr drained (-X importtime writes a lot)
                errbuf += os.read(efd, 65536)
            if fd not in ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"{argv}: exited before answering: {errbuf.decode(errors='replace')[-800:]}")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == want:
                    assert "result" in msg and not msg["result"].get("isError"), msg
                    elapsed = time.perf_counter() - t0
                    break
        _, err = proc.communicate(timeout=15)  # closes stdin (EOF) and waits
        return elapsed, (bytes(errbuf) + err).decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(5)


def time_python(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - t0


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def parse_importtime(stderr: str) -> dict[str, Any]:
    """Total import time, self time per top-level package, and the largest cumulative modules."""
    rows = []
    for line in stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            self_us, cum_us, indent, name = int(m.group(1)), int(m.group(2)), len(m.group(3)), m.group(4)
            rows.append((name, self_us, cum_us, (indent - 1) // 2))
    total = sum(cum for _, _, cum, level in rows if level == 0)
    by_pkg: dict[str, int] = defaultdict(int)
    for name, self_us, _, _ in rows:
        by_pkg[name.split(".")[0]] += self_us
    top_pkgs = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:14]
    # packages as a whole (top-level names) and our own modules, by cumulative time
    ours = ("app.", "setup_agent.", "registry_clients.")
    cum: dict[str, int] = {}
    for name, _, c, _ in rows:
        if "." not in name or name.startswith(ours):
            cum[name] = max(cum.get(name, 0), c)
    top_mods = sorted(cum.items(), key=lambda kv: -kv[1])[:18]
    return {
        "total_ms": total / 1000,
        "modules": len(rows),
        "self_by_package_ms": [[k, v / 1000] for k, v in top_pkgs],
        "largest_cumulative_ms": [[k, v / 1000] for k, v in top_mods],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--first-rounds", type=int, default=3)
    parser.add_argument("--first-call-rounds", type=int, default=6)
    args = parser.parse_args()
    root = Root("coldstart")
    out: dict[str, Any] = {"section": "coldstart"}
    try:
        data = root.path / "data"
        env = root.face_env(data, MCP_SETUP_REGISTRIES="local")
        mcp_argv = mcp_setup_argv("mcp")
        low = [sys.executable, str(BENCH / "minimal_server.py"), "lowlevel"]
        high = [sys.executable, str(BENCH / "minimal_server.py"), "mcpserver"]
        whatif = [sys.executable, str(BENCH / "whatif_deferred_mcp.py")]
        # untimed: create the data dir / database, warm the OS file cache
        for argv in (mcp_argv, low, high):
            time_initialize(argv, env)
        kinds = ["mcp_setup", "min_lowlevel", "min_mcpserver", "python", "whatif_deferred"]
        try:
            time_initialize(whatif, env)
        except Exception as exc:  # noqa: BLE001 - a what-if, not a measurement of the product
            out["whatif_error"] = f"{type(exc).__name__}: {exc}"[:300]
            kinds.remove("whatif_deferred")
        t: dict[str, list[float]] = defaultdict(list)
        for i in range(args.rounds):
            order = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]
            for kind in order:
                if kind == "mcp_setup":
                    secs, err = time_initialize(mcp_argv, env)
                    if "Traceback" in err:
                        raise RuntimeError(err[-2000:])
                    t[kind].append(secs)
                elif kind == "min_lowlevel":
                    t[kind].append(time_initialize(low, env)[0])
                elif kind == "min_mcpserver":
                    t[kind].append(time_initialize(high, env)[0])
                elif kind == "whatif_deferred":
                    t[kind].append(time_initialize(whatif, env)[0])
                else:
                    t[kind].append(time_python(env))
            if i < args.first_call_rounds:  # time to the first tool result, current vs what-if
                for kind in ["mcp_setup", "whatif_deferred"] if "whatif_deferred" in kinds else ["mcp_setup"]:
                    argv = mcp_argv if kind == "mcp_setup" else whatif
                    t[f"first_call_{kind}"].append(time_initialize(argv, env, first_call=True)[0])
            if i < args.first_rounds:  # a fresh data dir: database created and migrated
                fresh = root.path / f"fresh-{i}"
                t["first_start"].append(
                    time_initialize(mcp_argv, root.face_env(fresh, MCP_SETUP_REGISTRIES="local"))[0]
                )
        out["times"] = {k: summary(v) for k, v in t.items()}
        out["ratio_lowlevel"] = median(t["mcp_setup"]) / median(t["min_lowlevel"])
        out["ratio_mcpserver"] = median(t["mcp_setup"]) / median(t["min_mcpserver"])
        if t.get("whatif_deferred"):
            out["ratio_whatif_deferred"] = median(t["whatif_deferred"]) / median(t["min_lowlevel"])

        # -X importtime: one start of each (interpreter flag; same entry point as the script)
        it_env = dict(env)
        _, err = time_initialize(
            [
                sys.executable,
                "-X",
                "importtime",
                "-c",
                "from app.cli.main import main; import sys; sys.exit(main(['mcp']))",
            ],
            it_env,
        )
        out["importtime_mcp_setup"] = parse_importtime(err)
        _, err = time_initialize([sys.executable, "-X", "importtime", *low[1:]], it_env)
        out["importtime_min_lowlevel"] = parse_importtime(err)
    finally:
        out["leftover_processes"] = len(root.cleanup())
    emit(out)


if __name__ == "__main__":
    main()
