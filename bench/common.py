"""Shared helpers for the benchmarks: stats, isolated environments, the stub, process checks.

Every section runs in its own Python process (``python -m bench.<section>``) started by
``bench/run.py``, under its own temp root. The stub server is copied into that root so that
every stub process this benchmark starts has the root in its command line: leftovers are
found (and killed) by that, never by a broad name, and other people's processes are never
touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
VENV_BIN = Path(sys.executable).parent
SECRET = "bench-secret-0123456789abcdef"
FAIL_KEYRING = "keyring.backends.fail.Keyring"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# -- statistics --------------------------------------------------------------------------
def median(xs: Iterable[float]) -> float:
    return statistics.median(list(xs))


def pct(xs: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    data = sorted(xs)
    if not data:
        return float("nan")
    k = max(0, min(len(data) - 1, int(round(p / 100 * len(data) + 0.5)) - 1))
    return data[k]


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "median": median(xs),
        "p10": pct(xs, 10),
        "p90": pct(xs, 90),
        "min": min(xs),
        "max": max(xs),
    }


# -- isolation -----------------------------------------------------------------------------
class Root:
    """A temp root for one section: XDG dirs, a private HOME, the stub copied in."""

    def __init__(self, name: str) -> None:
        run = os.environ.get("MCP_SETUP_BENCH_RUN", str(os.getpid()))
        self.path = Path(tempfile.mkdtemp(prefix=f"mcp-setup-bench-{run}-{name}-"))
        (self.path / "user-home").mkdir()
        for d in ("xdg-data", "xdg-config", "xdg-cache", "xdg-state"):
            (self.path / d).mkdir()
        stub_dir = self.path / "stub"
        stub_dir.mkdir()
        shutil.copy2(REPO / "tests" / "stub_server" / "server.py", stub_dir / "server.py")
        self.stub = stub_dir / "server.py"
        # The interpreter every stub runs on: `<root>/bin/python3`, first on PATH (the stub's MCPB
        # manifest runs `python3`). A symlink to this interpreter beside a copy of the venv's
        # pyvenv.cfg: the stdlib only, no site-packages to scan, the same for every row. Not
        # the pyenv shim `python3` resolves to on this machine (a bash script, ~90 ms a spawn)
        # nor the base interpreter's large site-packages (~20 ms a spawn).
        bin_dir = self.path / "bin"
        bin_dir.mkdir()
        self.python = bin_dir / "python3"
        self.python.symlink_to(sys.executable)
        cfg = Path(sys.prefix) / "pyvenv.cfg"
        if sys.prefix != sys.base_prefix and cfg.exists():
            shutil.copy2(cfg, self.path / "pyvenv.cfg")
        os.environ["PATH"] = f"{bin_dir}:{os.environ.get('PATH', '')}"
        # This process uses the isolated dirs too (keyring files, caches).
        os.environ.update(self.env_overrides())

    def env_overrides(self) -> dict[str, str]:
        return {
            "HOME": str(self.path / "user-home"),
            "XDG_DATA_HOME": str(self.path / "xdg-data"),
            "XDG_CONFIG_HOME": str(self.path / "xdg-config"),
            "XDG_CACHE_HOME": str(self.path / "xdg-cache"),
            "XDG_STATE_HOME": str(self.path / "xdg-state"),
            "PYTHON_KEYRING_BACKEND": FAIL_KEYRING,
        }

    def face_env(self, data_dir: Path, **extra: str) -> dict[str, str]:
        """Environment for an ``mcp-setup`` subprocess (like tests/helpers/mcp_face.py: face_env)."""
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "MCP_SETUP_HOME": str(data_dir),
            "PYTHONPATH": str(REPO),
            "MCP_SETUP_CONSENT": "never-ask",  # scripted use: no one approves launches here
            **self.env_overrides(),
        }
        env.update(extra)
        return env

    def leftovers(self) -> list[int]:
        return processes_mentioning(str(self.path))

    def cleanup(self) -> list[int]:
        """Kill (SIGKILL, by pid) every process whose command line names this root; rm -rf it."""
        left = self.leftovers()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self.leftovers():
            time.sleep(0.05)
        shutil.rmtree(self.path, ignore_errors=True)
        return left


def processes_mentioning(text: str, *, exclude_self: bool = True) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if exclude_self and pid == me:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmd and state not in ("Z", "X"):
            found.append(pid)
    return found


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (via /proc/*/stat ppid)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """utime+stime of ``pid`` (with ``children``: of its waited-for children instead), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    if children:
        return (int(fields[13]) + int(fields[14])) / ticks
    return (int(fields[11]) + int(fields[12])) / ticks


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def stub_env(mode: str = "", *, value: str = SECRET) -> dict[str, str]:
    """The stub's variables: it wants ``SECRET`` (by hash) in STUB_API_KEY."""
    from tests.stub_server.bundle import sha256_hex

    env = {"STUB_API_KEY": value, "STUB_EXPECTED_SHA256": sha256_hex(SECRET), "STUB_REQUIRED_ENV": "STUB_API_KEY"}
    if mode:
        env["STUB_MODE"] = mode
    return env


def emit(result: dict[str, Any]) -> None:
    """A section's result: one JSON line on stdout, prefixed so run.py can find it."""
    print("BENCH-RESULT " + json.dumps(result), flush=True)


def mcp_setup_argv(*args: str) -> list[str]:
    script = VENV_BIN / "mcp-setup"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "app.cli", *args]
