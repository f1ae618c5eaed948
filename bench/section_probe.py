"""Items 1 and 2: test-connect overhead against the SDK's own client and the MCP Inspector CLI.

Item 1, interleaved rounds (order rotated each round), same stub (``tests/stub_server``):

* ``probe``     — ``Prober.probe(spec, values)``: what ``mcp_setup_test_connection`` runs;
  returns as soon as the tools are listed (teardown in the background, drained untimed).
* ``sdk``       — the floor: ``stdio_client`` + ``ClientSession.initialize()`` +
  ``list_tools()``; timed to the tools listed (``sdk``) and to the end of its ``async with``
  (``sdk_exit``: what a caller of the SDK waits for).
* ``sdk_auto``  — ``mcp.Client(stdio_client(...), mode="auto")`` + ``list_tools()``: the same
  negotiation the probe does (``server/discover`` first, then ``initialize``).
* ``tool``      — ``SetupService.call("mcp_setup_test_connection")`` end to end (registry
  detail from a local catalog, MCPB bundle checked and unpacked into a scratch dir, probe).
* ``inspector`` — ``npx @modelcontextprotocol/inspector --cli <stub> --method tools/list``
  under Node 22 (bench/.tools); timed to its JSON on stdout and to its exit. Fewer rounds
  (it costs ~2 s a round): ``--inspector-rounds``.

Item 2, interleaved: ``probe`` on the normal stub vs ``probe`` on a stub that ignores
SIGTERM (and waits 30 s after stdin EOF) vs the SDK on that stub (tools listed, and exit:
the SDK's own 2 s + 2 s teardown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from bench.common import BENCH, SECRET, Root, emit, median, stub_env, summary

TOOLS = BENCH / ".tools"


def node_paths() -> tuple[Path, Path] | None:
    node = TOOLS / "node_modules" / ".bin" / "node"
    cli = TOOLS / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if node.exists() and cli.exists():
        return node, cli
    return None


async def run_probe(prober: Any, spec: Any) -> float:
    t0 = time.perf_counter()
    result = await prober.probe(spec, {"STUB_API_KEY": SECRET})
    elapsed = time.perf_counter() - t0
    assert {t["name"] for t in result.tools} >= {"echo", "whoami"}
    return elapsed


async def run_probe_legacy(prober: Any, spec: Any) -> float:
    """The probe with the classic handshake only (no ``server/discover`` round trip): what the
    probe's own code costs, apart from the protocol-era negotiation."""
    t0 = time.perf_counter()
    result = await prober._attempt(spec, {"STUB_API_KEY": SECRET}, None, 30.0, "legacy")
    elapsed = time.perf_counter() - t0
    assert {t["name"] for t in result.tools} >= {"echo", "whoami"}
    return elapsed


async def run_sdk(
    root: Root, mode: str, *, background_exit: list[asyncio.Task[Any]] | None = None
) -> tuple[float, float | None]:
    """(seconds to tools listed, seconds to the end of the SDK's context or None if backgrounded)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(root.python), args=[str(root.stub)], env=stub_env(mode))
    listed = asyncio.get_running_loop().create_future()
    t0 = time.perf_counter()

    async def session() -> float:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    tools = await s.list_tools()
                    assert {t.name for t in tools.tools} >= {"echo", "whoami"}
                    listed.set_result(time.perf_counter() - t0)
        return time.perf_counter() - t0

    if background_exit is None:
        total = await session()
        return listed.result(), total
    task = asyncio.create_task(session())
    background_exit.append(task)
    await asyncio.wait({task, listed}, return_when=asyncio.FIRST_COMPLETED)
    if task.done() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return listed.result(), None


async def run_sdk_auto(root: Root) -> float:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(root.python), args=[str(root.stub)], env=stub_env())
    t0 = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="auto") as client:
            tools = await client.list_tools()
            elapsed = time.perf_counter() - t0
    assert {t.name for t in tools.tools} >= {"echo", "whoami"}
    return elapsed


async def run_inspector(root: Root, node: Path) -> tuple[float, float]:
    """(seconds until the tools JSON is complete on stdout, seconds until the CLI exited)."""
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TERM", "TMPDIR")}
    env["PATH"] = f"{node.parent}:{os.environ.get('PATH', '')}"
    env["npm_config_update_notifier"] = "false"
    args = ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", str(root.python), str(root.stub)]
    for k, v in stub_env().items():
        args += ["-e", f"{k}={v}"]
    args += ["--method", "tools/list"]
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=str(TOOLS),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    buf = b""
    t_out: float | None = None
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            while True:
                chunk = await proc.stdout.read(65536)
                if not chunk:
                    break
                buf += chunk
                if t_out is None:
                    try:
                        data = json.loads(buf)
                    except ValueError:
                        continue
                    t_out = time.perf_counter() - t0
                    assert {t["name"] for t in data["tools"]} >= {"echo", "whoami"}
            err = await proc.stderr.read() if proc.stderr else b""
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, 9)
            await proc.wait()
    total = time.perf_counter() - t0
    if code != 0 or t_out is None:
        raise RuntimeError(f"inspector exited {code}: {err.decode(errors='replace')[-500:]}")
    return t_out, total


def make_catalog(root: Root) -> Path:
    from tests.stub_server.bundle import build_stub_bundle, stub_server_json

    bundle, sha = build_stub_bundle(root.path / "dist", expected_value=SECRET)
    catalog = root.path / "catalog"
    catalog.mkdir()
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha)))
    return catalog


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import keyring.backends.fail

    from app.runtime import build_runtime
    from app.settings import Settings
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.redact import Redactor
    from setup_agent.setup.probe import Prober
    from setup_agent.setup.service import CallContext

    root = Root("probe")
    out: dict[str, Any] = {"section": "probe"}
    try:

        def spec(mode: str = "") -> LaunchSpec:
            env = {k: ("${STUB_API_KEY}" if k == "STUB_API_KEY" else v) for k, v in stub_env(mode).items()}
            return LaunchSpec(command=str(root.python), args=[str(root.stub)], env=env, runner="python3")

        scratch = root.path / "scratch"
        scratch.mkdir()
        prober = Prober(Redactor(), scratch_root=scratch, timeout=30)

        # The whole tool, through the service (local catalog with the stub's MCPB bundle).
        catalog = make_catalog(root)
        settings = Settings(home=root.path / "data", registries="local", catalog_dir=catalog, consent="never-ask")
        runtime = build_runtime(settings, keyring_backend=keyring.backends.fail.Keyring())
        pending = runtime.broker.open("STUB_API_KEY", "bench key", "io.github.mcp-setup/stub")
        runtime.broker.answer(pending.prompt_id, SECRET)
        tool_args = {"qualified_name": "io.github.mcp-setup/stub", "env_refs": {"STUB_API_KEY": pending.ref}}

        async def run_tool() -> float:
            t0 = time.perf_counter()
            res = await runtime.service.call("mcp_setup_test_connection", tool_args, CallContext())
            elapsed = time.perf_counter() - t0
            assert res.get("ok") is True, res
            return elapsed

        nodes = node_paths()
        inspector_note = None
        if nodes is None:
            inspector_note = "Node 22 / inspector not installed in bench/.tools (npm install failed or was skipped)"
        elif shutil.which("npx") is None:
            inspector_note = "npx not on PATH"

        # warm-up (imports, first-use caches), untimed
        for _ in range(2):
            await run_probe(prober, spec())
            await run_sdk(root, "")
            await run_sdk_auto(root)
            await run_tool()
            await prober.drain()
            await runtime.prober.drain()
        if nodes is not None and inspector_note is None:
            try:
                await run_inspector(root, nodes[0])
            except Exception as exc:  # noqa: BLE001 - the peer is reported, not required
                inspector_note = f"inspector failed: {exc}"[:300]

        # -- item 1 --------------------------------------------------------------------
        t: dict[str, list[float]] = {
            k: []
            for k in ("probe", "probe_legacy", "sdk", "sdk_exit", "sdk_auto", "tool", "inspector", "inspector_exit")
        }
        kinds = ["probe", "sdk", "sdk_auto", "tool", "probe_legacy"]
        for i in range(args.rounds):
            order = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]
            if inspector_note is None and i < args.inspector_rounds:
                order.insert(i % (len(order) + 1), "inspector")
            for kind in order:
                if kind == "probe":
                    t["probe"].append(await run_probe(prober, spec()))
                    await prober.drain()
                elif kind == "probe_legacy":
                    t["probe_legacy"].append(await run_probe_legacy(prober, spec()))
                    await prober.drain()
                elif kind == "sdk":
                    a, b = await run_sdk(root, "")
                    t["sdk"].append(a)
                    t["sdk_exit"].append(b)  # type: ignore[arg-type]
                elif kind == "sdk_auto":
                    t["sdk_auto"].append(await run_sdk_auto(root))
                elif kind == "tool":
                    t["tool"].append(await run_tool())
                    await runtime.prober.drain()
                elif kind == "inspector":
                    assert nodes is not None
                    a, b = await run_inspector(root, nodes[0])
                    t["inspector"].append(a)
                    t["inspector_exit"].append(b)
        out["item1"] = {k: summary(v) for k, v in t.items() if v}
        out["item1"]["ratio_probe_sdk"] = median(t["probe"]) / median(t["sdk"])
        out["item1"]["ratio_probe_sdk_auto"] = median(t["probe"]) / median(t["sdk_auto"])
        out["item1"]["ratio_tool_sdk"] = median(t["tool"]) / median(t["sdk"])
        out["item1"]["per_round_ratio_probe_sdk"] = median(p / s for p, s in zip(t["probe"], t["sdk"]))
        out["item1"]["ratio_probe_legacy_sdk"] = median(t["probe_legacy"]) / median(t["sdk"])
        out["item1"]["min_ratio_probe_sdk"] = min(t["probe"]) / min(t["sdk"])
        out["loadavg_end"] = list(os.getloadavg())
        if t["inspector"]:
            out["item1"]["ratio_probe_inspector"] = median(t["probe"]) / median(t["inspector"])
            out["item1"]["inspector_version"] = json.loads(nodes[1].read_text())["version"]  # type: ignore[index]
            node_v = await asyncio.create_subprocess_exec(str(nodes[0]), "--version", stdout=asyncio.subprocess.PIPE)  # type: ignore[index]
            out["item1"]["node_version"] = (await node_v.communicate())[0].decode().strip()
        out["item1"]["inspector_note"] = inspector_note

        # -- item 2 --------------------------------------------------------------------
        s: dict[str, list[float]] = {k: [] for k in ("probe", "probe_ignore", "sdk_ignore")}
        sdk_exits: list[asyncio.Task[Any]] = []
        kinds2 = ["probe", "probe_ignore", "sdk_ignore"]
        for i in range(args.rounds):
            order = kinds2[i % 3 :] + kinds2[: i % 3]
            for kind in order:
                if kind == "probe":
                    s["probe"].append(await run_probe(prober, spec()))
                    await prober.drain()  # untimed
                elif kind == "probe_ignore":
                    s["probe_ignore"].append(await run_probe(prober, spec("ignore_sigterm")))
                    # untimed: its teardown (stdin EOF, 0.5 s grace, SIGTERM, 0.5 s, SIGKILL)
                    td0 = time.perf_counter()
                    await prober.drain()
                    s.setdefault("probe_drain", []).append(time.perf_counter() - td0)
                else:
                    a, _ = await run_sdk(root, "ignore_sigterm", background_exit=sdk_exits)
                    s["sdk_ignore"].append(a)
        exits = await asyncio.gather(*sdk_exits)
        s["sdk_ignore_exit"] = list(exits)
        out["item2"] = {k: summary(v) for k, v in s.items()}
        out["item2"]["ratio_ignore_normal"] = median(s["probe_ignore"]) / median(s["probe"])
        out["item2"]["per_round_ratio_ignore_normal"] = median(i / n for i, n in zip(s["probe_ignore"], s["probe"]))
        out["item2"]["ratio_probe_ignore_sdk_ignore"] = median(s["probe_ignore"]) / median(s["sdk_ignore"])
        out["item2"]["leftover_after_drain"] = len(root.leftovers())
        out["item2"]["pending_teardowns_after_drain"] = prober.pending_teardowns

        await runtime.aclose()
        out["scratch_left"] = sorted(p.name for p in scratch.iterdir()) + sorted(
            p.name for p in (root.path / "data" / "scratch").iterdir()
        )
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--inspector-rounds", type=int, default=20)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
