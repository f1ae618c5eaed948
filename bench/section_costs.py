"""What each installed server costs a person, measured against its baseline in the same run.

* ``idle``  — ``mcp-setup mcp`` with 20 installed stub servers, each called once, then left alone
  past ``MCP_SETUP_IDLE_STOP_SECONDS`` (short here): resident memory of the face and its children
  while they run, after the idle stop, and of the same face with nothing installed after one
  tool call (the baseline: target ≤ 1.10×).
* ``first`` — a server's first call after its idle stop against its first call ever in the same
  face (its cold start: spawn in the sandbox with its own network namespace and proxy,
  ``initialize``, its tools listed and recorded against the pins, its prompts and resources
  recorded, the call), interleaved: one ``mcp-setup mcp`` with ``--rounds`` + 1 installed stubs
  (one launch but their names) and a short idle time; stub 0 is called first (untimed: the
  face's own first start), then each round waits until every server was stopped for
  idleness and makes two calls, in an order that alternates: stub *i*'s first call and stub
  *i − 1*'s first call after its idle stop. So each stub has one of each, under the same load,
  and the medians are of the same number of calls (target ≤ 1.10×; the median of each stub's
  own ratio beside it).
* ``wrapper`` — ``mcp-setup mcp`` with ``--npm-servers`` installed npm servers (the tests' own
  tiny package, tests/fakes/npm_registry.py, from a registry on loopback; sandboxed as the
  machine allows), each called once and kept running: the proportional set size (PSS, else RSS)
  of every process below the face, per server, started from what npx installed (node on the
  package's bin, ``setup_agent/launch/direct.py``) against started through npx (``npm exec``
  and ``sh`` beside it; the notes of what the download installed made unwritable, the path a
  pruned cache takes), in the same run (target ≤ 0.60×).
* ``budget`` — the tokens of ``tools/list`` for 20 servers × 20 tools under the default
  ``MCP_SETUP_TOOLS_BUDGET`` against listing everything (target: ≤ the budget).
* ``find``  — how often ``mcp_setup_find_tools`` puts the right tool in its top 3 over the task
  phrases of tests/setup_agent/gateway/test_find_tools_ranking.py (target ≥ 90%).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, SECRET, Root, children_of, emit, mcp_setup_argv, median, rss_kib, stub_env, summary
from bench.section_coldstart import INIT
from bench.section_gateway import install_stubs

IDLE_SECONDS = 2.0
#: The idle time of the ``first`` part: longer than a round's two calls on a loaded machine, so
#: that no server is stopped while the other call of its round is timed.
FIRST_IDLE_SECONDS = 2.0


class Face:
    """``mcp-setup mcp`` driven line by line (newline-delimited JSON-RPC)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            mcp_setup_argv("mcp"),
            env=env,
            cwd=str(REPO),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._id = 1
        self.send(INIT)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        if "id" not in message:
            return None
        while True:  # notifications (list_changed, logs) may come first
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == message["id"]:
                return answer

    def call(self, name: str, arguments: dict[str, Any]) -> float:
        """Seconds until the call's answer."""
        self._id += 1
        started = time.perf_counter()
        answer = self.send(
            {"jsonrpc": "2.0", "id": self._id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        )
        took = time.perf_counter() - started
        assert answer is not None and "result" in answer and not answer["result"].get("isError"), answer
        return took

    def tree_kib(self) -> int:
        """Resident memory of the face and its children, after a second of quiet (median of 5 reads)."""
        time.sleep(1.0)
        reads = []
        for _ in range(5):
            pids = [self.proc.pid, *children_of(self.proc.pid)]
            reads.append(sum(rss_kib(p) for p in pids if os.path.exists(f"/proc/{p}")))
            time.sleep(0.2)
        return int(median(reads))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def idle(root: Root, servers: int) -> dict[str, Any]:
    empty = root.path / "empty"
    install_stubs(root, empty, 0)
    base = Face(root.face_env(empty, MCP_SETUP_REGISTRIES="local"))
    try:
        base.call("mcp_setup_list_servers", {})
        nothing_kib = base.tree_kib()
    finally:
        base.close()
    data = root.path / "twenty"
    install_stubs(root, data, servers)
    names = [f"stub-{i:02d}__echo" for i in range(servers)]
    kept = Face(root.face_env(data, MCP_SETUP_REGISTRIES="local", MCP_SETUP_IDLE_STOP_SECONDS="0"))
    try:  # every server called and kept running: what the idle stop saves
        for name in names:
            kept.call(name, {"text": "x"})
        running_kib = kept.tree_kib()
        running_children = len(children_of(kept.proc.pid))
    finally:
        kept.close()
    face = Face(root.face_env(data, MCP_SETUP_REGISTRIES="local", MCP_SETUP_IDLE_STOP_SECONDS=str(IDLE_SECONDS)))
    try:
        face.call("mcp_setup_list_servers", {})
        for name in names:
            face.call(name, {"text": "x"})
        all_stopped(face)
        stopped_children = len(children_of(face.proc.pid))
        after_idle_kib = face.tree_kib()
    finally:
        face.close()
    return {
        "servers": servers,
        "nothing_kib": nothing_kib,
        "running_kib": running_kib,
        "running_children": running_children,
        "after_idle_kib": after_idle_kib,
        "after_idle_children": stopped_children,
        "ratio_after_idle": after_idle_kib / nothing_kib,
    }


def all_stopped(face: Face, limit: float = 60.0) -> None:
    """Wait (bounded) until the face has no child left: every server stopped for idleness."""
    deadline = time.monotonic() + limit
    while children_of(face.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the bench may wait on wall time: the idle stop is what it measures


def first_calls(root: Root, rounds: int) -> dict[str, Any]:
    """Each stub's first call ever and its first call after its idle stop, interleaved (module doc)."""
    data = root.path / "first"
    install_stubs(root, data, rounds + 1)
    names = [f"stub-{i:02d}__echo" for i in range(rounds + 1)]
    face = Face(root.face_env(data, MCP_SETUP_REGISTRIES="local", MCP_SETUP_IDLE_STOP_SECONDS=str(FIRST_IDLE_SECONDS)))
    cold: dict[str, float] = {}
    again: dict[str, float] = {}
    try:
        face.call("mcp_setup_list_servers", {})
        face.call(names[0], {"text": "x"})  # the face's first start of any server: not timed
        for i in range(1, rounds + 1):
            all_stopped(face)
            pair = [(cold, names[i]), (again, names[i - 1])]
            for into, name in pair if i % 2 else pair[::-1]:
                into[name] = face.call(name, {"text": "x"})
    finally:
        face.close()
    both = [name for name in names if name in cold and name in again]
    return {
        "rounds": rounds,
        "idle_seconds": FIRST_IDLE_SECONDS,
        "cold": summary(list(cold.values())),
        "after_idle": summary(list(again.values())),
        "ratio": median(again.values()) / median(cold.values()),
        "per_server": median(again[n] / cold[n] for n in both),
        "servers_paired": len(both),
    }


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (its children, theirs…)."""
    out, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _pss_kib(pid: int) -> int:
    """Its proportional set size (shared pages split among their users), else its RSS."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return rss_kib(pid)


def _below_kib(face: Face) -> tuple[int, int, list[str]]:
    """(PSS of every process below the face, after a second of quiet, median of 5 reads; how
    many; their program names)."""
    time.sleep(1.0)
    reads, pids = [], []
    for _ in range(5):
        pids = _descendants(face.proc.pid)
        reads.append(sum(_pss_kib(p) for p in pids if os.path.exists(f"/proc/{p}")))
        time.sleep(0.2)
    names = []
    for p in pids:
        try:
            names.append(Path(f"/proc/{p}/comm").read_text().strip())
        except OSError:
            continue
    return int(median(reads)), len(pids), names


def _install_npm(root: Root, data: Path, count: int, registry: str, package: str) -> None:
    """``count`` installed servers of one npm package (npx, as the registry's entries are)."""
    import keyring.backends.fail

    from bench.section_gateway import STUB_TOOLS
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    vault = Vault.open(data, keyring_backend=keyring.backends.fail.Keyring())
    env = {k: ("${STUB_API_KEY}" if k == "STUB_API_KEY" else v) for k, v in stub_env().items()}
    spec = LaunchSpec(
        command="npx",
        args=["-y", f"--registry={registry}", f"{package}@1.0.0"],
        env=env,
        package_type="npm",
        identifier=package,
        version="1.0.0",
        runner="npx",
    )
    with Store.for_data_dir(data, vault) as store:
        for i in range(count):
            store.servers.install(
                qualified_name=f"io.bench/npm-{i:02d}",
                source="local",
                version="1.0.0",
                package_type="npm",
                launch_spec=spec.model_dump(mode="json"),
                installed_by="bench",
                tools_hash="0" * 64,
                env={"STUB_API_KEY": (SECRET, True)},
                tools=STUB_TOOLS,
            )


def wrapper(root: Root, servers: int) -> dict[str, Any]:
    """20 called npm servers: memory below the face per server, without npx vs through it."""
    import shutil

    from tests.fakes.npm_registry import serve_npm_package

    if shutil.which("npm") is None:
        return {"unavailable": "npm is not installed"}
    package = "mcp-setup-bench-npm"
    out: dict[str, Any] = {"servers": servers}
    with serve_npm_package(package, "1.0.0") as registry:
        for kind in ("npx", "direct"):  # the first downloads into the shared npm cache for both
            data = root.path / f"npm-{kind}"
            _install_npm(root, data, servers, registry.url, package)
            if kind == "npx":  # nothing noted, nothing found: every start falls back to the runner
                (data / "cache").mkdir(exist_ok=True)
                (data / "cache" / "starts").write_text("")
            face = Face(root.face_env(data, MCP_SETUP_REGISTRIES="local", MCP_SETUP_IDLE_STOP_SECONDS="0"))
            try:
                face.call("mcp_setup_list_servers", {})
                calls = [face.call(f"npm-{i:02d}__echo", {"text": "x"}) for i in range(servers)]
                kib, count, names = _below_kib(face)
            finally:
                face.close()
            out[kind] = {
                "kib": kib,
                "per_server_kib": kib / servers,
                "processes": count,
                "programs": {n: names.count(n) for n in sorted(set(names))},
                "first_call_s": median(calls),
            }
    out["ratio"] = out["direct"]["kib"] / out["npx"]["kib"]
    return out


def budget() -> dict[str, Any]:
    from app.mcp.gateway_tools import listed_tools
    from app.settings import Settings
    from setup_agent.gateway import estimated_tokens
    from tests.app.mcp.test_gateway_tools import catalog_of

    default = Settings.model_fields["tools_budget"].default
    catalog = catalog_of(20, 20)
    everything = estimated_tokens(listed_tools("all", catalog, budget=0))
    listed = estimated_tokens(listed_tools("all", catalog, budget=default))
    return {"budget": default, "all_tokens": everything, "listed_tokens": listed, "ratio": listed / everything}


def find() -> dict[str, Any]:
    from setup_agent.gateway import find_tools
    from tests.setup_agent.gateway.test_find_tools_ranking import TASKS, real_catalog

    catalog = real_catalog()
    hits = sum(1 for task, right in TASKS.items() if right & {t["name"] for t in find_tools(catalog, task, 3)})
    return {"tasks": len(TASKS), "top3": hits, "rate": hits / len(TASKS)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--npm-servers", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=24, help="first calls: cold and after the idle stop, interleaved")
    args = parser.parse_args()
    root = Root("costs")
    out: dict[str, Any] = {"section": "costs"}
    try:
        out["wrapper"] = wrapper(root, args.npm_servers)
        out["idle"] = idle(root, args.servers)
        out["first"] = first_calls(root, args.rounds)
        out["budget"] = budget()
        out["find"] = find()
    finally:
        out["leftover_processes"] = len(root.cleanup())
    emit(out)


if __name__ == "__main__":
    main()
