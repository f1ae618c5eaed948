"""Row 13 (#25 item 9): how fast the read-only commands answer.

``mcp-setup list`` on a data dir with 3 installed stub servers (SQLite), spawn to exit, against
``python -c pass`` on the same interpreter, interleaved with the order rotated each round.
Context rows: ``mcp-setup show SLUG`` (it loads the launch spec's model for its sandbox lines)
and ``mcp-setup --help``. The target is ≤ 0.3 s wall for ``list``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

from bench.common import FAIL_KEYRING, REPO, Root, emit, mcp_setup_argv, median


def install(root: Root, count: int) -> Any:
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    data = root.path / "data"
    import keyring.backends.fail

    vault = Vault.open(data, keyring_backend=keyring.backends.fail.Keyring())
    spec = LaunchSpec(command="python3", args=[str(root.stub)], env={"STUB_API_KEY": "${STUB_API_KEY}"})
    with Store.for_data_dir(data, vault) as store:
        for i in range(count):
            store.servers.install(
                qualified_name=f"io.bench/stub-{i}",
                source="local",
                version="1.0.0",
                package_type="stdio",
                launch_spec=spec.model_dump(mode="json"),
                installed_by="bench",
                tools_hash="0" * 64,
                env={"STUB_API_KEY": (f"bench-value-{i}", True)},
                tools=[{"name": "echo", "description": "Echo the given text back."}],
            )
    return data


def main_run(rounds: int, servers: int) -> dict[str, Any]:
    root = Root("cli")
    try:
        data = install(root, servers)
        env = root.face_env(data, PYTHON_KEYRING_BACKEND=FAIL_KEYRING)
        cases = {
            "list": mcp_setup_argv("list"),
            "show": mcp_setup_argv("show", "stub-0"),
            "help": mcp_setup_argv("--help"),
            "tools": mcp_setup_argv("tools"),
            "audit": mcp_setup_argv("audit"),
            "pass": [sys.executable, "-c", "pass"],
        }
        for argv in cases.values():  # warm the page cache once
            subprocess.run(argv, env=env, cwd=REPO, capture_output=True, check=True, timeout=120)
        times: dict[str, list[float]] = {k: [] for k in cases}
        names = list(cases)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                t = time.perf_counter()
                subprocess.run(cases[name], env=env, cwd=REPO, capture_output=True, check=True, timeout=120)
                times[name].append(time.perf_counter() - t)
        out = subprocess.run(cases["list"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120).stdout
        assert out.count("io.bench/stub-") == servers, out
        med = {k: median(v) for k, v in times.items()}
        return {
            "section": "cli",
            "rounds": rounds,
            "servers": servers,
            "times": {k: {"median": med[k], "min": min(v), "max": max(v), "n": len(v)} for k, v in times.items()},
            "ratio": med["list"] / med["pass"],
        }
    finally:
        root.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--servers", type=int, default=3)
    args = parser.parse_args()
    emit(main_run(args.rounds, args.servers))


if __name__ == "__main__":
    main()
