"""A launch spec for the stub server."""

from __future__ import annotations

import sys
from pathlib import Path

from setup_agent.launch.spec import LaunchSpec
from tests.stub_server.bundle import SERVER_PY, sha256_hex


def stub_spec(expected: str, *, mode: str = "", pid_file: Path | None = None, **extra: str) -> LaunchSpec:
    env = {"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(expected), "STUB_MODE": mode}
    if pid_file is not None:
        env["STUB_PID_FILE"] = str(pid_file)
    env.update(extra)
    return LaunchSpec(command=sys.executable, args=[str(SERVER_PY)], env=env, runner="python3")
