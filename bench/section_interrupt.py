"""Row 16 (#38): SIGINT to exit of ``mcp-setup mcp`` with a call in flight.

``mcp-setup mcp`` on a data dir with the growing stub installed (tests/stub_server/growing.py,
an SDK server run by this venv's interpreter, sandboxed as any installed server): a raw stdio
client sends ``initialize`` and a ``tools/call`` of ``growing__nap`` (a nap of minutes), waits
for the stub's progress (the call is in flight at the server), sends SIGINT and times until the
process has exited (``wait``). The baseline, in the same rounds, interleaved with the order
rotated: the minimal SDK stdio server (``bench/minimal_server.py lowlevel``) after its
``initialize`` answer, SIGINT and its stdin closed at once (SIGINT alone never ends it while
the client keeps stdin open: the SDK reads stdin in a thread), to exit. Claude Code gives a server 100 ms after SIGINT before it
kills it; the target is that. Each round checks the exit code and that no process of the root is
left (the installed server included).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, Root, emit, mcp_setup_argv, median, summary

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
NAP = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "growing__nap", "arguments": {}, "_meta": {"progressToken": "nap"}},
}


def _until(proc: subprocess.Popen[bytes], wanted: Any, timeout: float = 120.0) -> None:
    """Read the process's stdout until a JSON message ``wanted`` accepts (bounded)."""
    assert proc.stdout is not None
    fd, buffer = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if wanted(json.loads(line)):
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                raise TimeoutError("no such message in time")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("stdout closed")
            buffer += chunk


def _send(proc: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _interrupt(proc: subprocess.Popen[bytes]) -> tuple[float, int]:
    t = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    code = proc.wait(60)
    return time.perf_counter() - t, code


def mcp_round(env: dict[str, str], errlog: Any) -> tuple[float, int]:
    proc = subprocess.Popen(
        mcp_setup_argv("mcp"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=REPO
    )
    try:
        _send(proc, INITIALIZE)
        _until(proc, lambda m: m.get("id") == 1)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"}, NAP)
        _until(proc, lambda m: m.get("method") == "notifications/progress")
        return _interrupt(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def sdk_round(errlog: Any) -> tuple[float, int]:
    argv = [sys.executable, str(REPO / "bench" / "minimal_server.py"), "lowlevel"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, cwd=REPO)
    try:
        _send(proc, INITIALIZE)
        _until(proc, lambda m: m.get("id") == 1)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        # SIGINT alone does not end it while its stdin stays open (the SDK reads stdin in a
        # thread nothing interrupts): its stdin is closed at once after the signal.
        assert proc.stdin is not None
        t = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        proc.stdin.close()
        code = proc.wait(60)
        return time.perf_counter() - t, code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def install(root: Root) -> Path:
    import keyring.backends.fail

    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    data = root.path / "data"
    vault = Vault.open(data, keyring_backend=keyring.backends.fail.Keyring())
    growing = REPO / "tests" / "stub_server" / "growing.py"
    # This venv's interpreter: the stub is an SDK server (the root's python3 has the stdlib only).
    spec = LaunchSpec(command=sys.executable, args=[str(growing)], env={"STUB_GROWN_FILE": "grown"})
    nap = {
        "name": "nap",
        "description": "Answer after a long nap.",
        "inputSchema": {"type": "object", "properties": {}},
    }
    grow = {"name": "grow", "description": "Add the tool grown.", "inputSchema": {"type": "object", "properties": {}}}
    touch = {"name": "touch", "description": "Change the notes.", "inputSchema": {"type": "object", "properties": {}}}
    more = {"name": "more", "description": "Add a resource.", "inputSchema": {"type": "object", "properties": {}}}
    with Store.for_data_dir(data, vault) as store:
        store.servers.install(
            qualified_name="io.bench/growing",
            source="local",
            version="1.0.0",
            package_type="stdio",
            launch_spec=spec.model_dump(mode="json"),
            installed_by="bench",
            tools_hash="0" * 64,
            env={},
            title="Growing",
            tools=[grow, nap, touch, more],
        )
    return data


def main_run(rounds: int) -> dict[str, Any]:
    root = Root("interrupt")
    try:
        data = install(root)
        env = root.face_env(data)
        times: dict[str, list[float]] = {"mcp": [], "sdk": []}
        codes: dict[str, set[int]] = {"mcp": set(), "sdk": set()}
        left: list[int] = []
        with open(root.path / "mcp.log", "ab") as mcp_log, open(root.path / "sdk.log", "ab") as sdk_log:
            for r in range(rounds):
                for name in ["mcp", "sdk"] if r % 2 == 0 else ["sdk", "mcp"]:
                    elapsed, code = mcp_round(env, mcp_log) if name == "mcp" else sdk_round(sdk_log)
                    times[name].append(elapsed)
                    codes[name].add(code)
                left += root.leftovers()  # the installed server must be gone with its gateway
        log = (root.path / "mcp.log").read_text(errors="replace")
        return {
            "section": "interrupt",
            "rounds": rounds,
            "times": {k: summary(v) for k, v in times.items()},
            "ratio": median(times["mcp"]) / median(times["sdk"]),
            "codes": {k: sorted(v) for k, v in codes.items()},
            "left": len(left),
            "tracebacks": log.count("Traceback"),
        }
    finally:
        root.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    emit(main_run(args.rounds))


if __name__ == "__main__":
    main()
