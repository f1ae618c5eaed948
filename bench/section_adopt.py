"""Item 8 (#17 item 1): an install right after a passing test adopts the tested process.

Two runtimes over the same local catalog (the stub as an MCPB bundle whose server appends its
pid to a file at every start), interleaved rounds (order alternated):

* ``adopt``  — the product's default: ``mcp_setup_test_connection`` (timed: ``test``), then
  ``mcp_setup_install_and_connect`` with the same ref (timed: ``install``), then
  ``mcp_setup_remove`` (untimed);
* ``fresh``  — the same with ``MCP_SETUP_ADOPT_TESTED_SERVERS=false`` (the install probes
  again and starts the server a second time for the live connection).

Reported: the install ÷ the test of the same round (target ≤ 0.2×), and the server starts per
setup counted from the pid file (target: 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import zipfile
from pathlib import Path
from typing import Any

from bench.common import SECRET, Root, emit, median, summary

NAME = "io.github.mcp-setup/stub"
SLOW_NAME = "io.github.mcp-setup/stub-slow"


def make_catalog(root: Root, pid_file: Path) -> Path:
    """The stub as an MCPB bundle (``NAME``), and the same stub taking 200 ms to answer its
    first request (``SLOW_NAME``: like a launcher resolving its package)."""
    from tests.stub_server.bundle import SERVER_PY, sha256_hex, stub_manifest, stub_server_json

    catalog = root.path / "catalog"
    catalog.mkdir()
    dist = root.path / "dist"
    dist.mkdir()
    for name, extra in ((NAME, {}), (SLOW_NAME, {"STUB_MODE": "slow", "STUB_SLOW_SECONDS": "0.2"})):
        manifest = stub_manifest(expected_value=SECRET)
        manifest["server"]["mcp_config"]["env"].update({"STUB_PID_FILE": str(pid_file), **extra})
        bundle = dist / f"{name.rsplit('/', 1)[-1]}.mcpb"
        with zipfile.ZipFile(bundle, "w") as zf:
            zf.writestr("manifest.json", json.dumps(manifest))
            zf.write(SERVER_PY, "server/server.py")
        doc = stub_server_json(bundle.resolve().as_uri(), sha256_hex(bundle.read_bytes()), name=name)
        (catalog / f"{name.rsplit('/', 1)[-1]}.json").write_text(json.dumps(doc))
    return catalog


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import keyring.backends.fail

    from app.runtime import build_runtime
    from app.settings import Settings
    from setup_agent.setup.service import CallContext

    root = Root("adopt")
    out: dict[str, Any] = {"section": "adopt"}
    try:
        runtimes = {}
        pid_file = root.path / "pids"
        catalog = make_catalog(root, pid_file)

        def started() -> int:
            return len(pid_file.read_text().split()) if pid_file.exists() else 0

        starts: dict[str, list[int]] = {"adopt": [], "fresh": []}
        for kind, adopt in (("adopt", True), ("fresh", False)):
            # The sandbox off: the stub writes its pid file outside its own folder, which a sandboxed
            # server cannot (#23); the starts are counted from it.
            settings = Settings(
                home=root.path / f"data-{kind}",
                registries="local",
                catalog_dir=catalog,
                consent="never-ask",
                adopt_tested_servers=adopt,
                sandbox="off",
            )
            runtimes[kind] = build_runtime(settings, keyring_backend=keyring.backends.fail.Keyring())

        async def setup(kind: str, name: str = NAME) -> tuple[float, float]:
            rt = runtimes[kind]
            before = started()
            pending = rt.broker.open("STUB_API_KEY", "bench key", name)
            rt.broker.answer(pending.prompt_id, SECRET)
            tool_args = {"qualified_name": name, "env_refs": {"STUB_API_KEY": pending.ref}}
            t0 = time.perf_counter()
            tested = await rt.service.call("mcp_setup_test_connection", tool_args, CallContext())
            t1 = time.perf_counter()
            installed = await rt.service.call("mcp_setup_install_and_connect", tool_args, CallContext())
            t2 = time.perf_counter()
            assert tested.get("ok") is True, tested
            assert installed.get("status") == "connected", installed
            await rt.service.call("mcp_setup_remove", {"server_id": installed["server_id"]}, CallContext())
            await rt.prober.drain()
            if name == NAME:
                starts[kind].append(started() - before)
            return t1 - t0, t2 - t1

        for kind in runtimes:  # warm-up, untimed
            await setup(kind)
        t: dict[str, list[float]] = {f"{k}_{s}": [] for k in runtimes for s in ("test", "install")}
        kinds = list(runtimes)
        for i in range(args.rounds):
            for kind in kinds[i % 2 :] + kinds[: i % 2]:
                test_s, install_s = await setup(kind)
                t[f"{kind}_test"].append(test_s)
                t[f"{kind}_install"].append(install_s)
        slow: dict[str, list[float]] = {"test": [], "install": []}
        for _ in range(args.slow_rounds):
            test_s, install_s = await setup("adopt", SLOW_NAME)
            slow["test"].append(test_s)
            slow["install"].append(install_s)
        out["slow"] = {k: summary(v) for k, v in slow.items()}
        out["slow"]["ratio_install_test"] = median(i / s for i, s in zip(slow["install"], slow["test"]))
        out["times"] = {k: summary(v) for k, v in t.items()}
        out["ratio_install_test"] = median(i / s for i, s in zip(t["adopt_install"], t["adopt_test"]))
        out["ratio_fresh_install_test"] = median(i / s for i, s in zip(t["fresh_install"], t["fresh_test"]))
        out["starts_per_setup"] = {k: sum(v[1:]) / len(v[1:]) for k, v in starts.items()}  # warm-up excluded
        out["rounds"] = args.rounds
        for rt in runtimes.values():
            await rt.aclose()
    finally:
        out["leftover_processes"] = len(root.cleanup())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--slow-rounds", type=int, default=5)
    emit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
