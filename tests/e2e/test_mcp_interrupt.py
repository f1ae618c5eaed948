"""SIGINT ends ``mcp-setup mcp`` (a client's Ctrl-C, or Claude Code closing it) while a call is in
flight: the process exits as interrupted, with no traceback, and leaves no installed server
running. How fast is measured in bench/ (section_signals.py), never asserted here.

A raw stdio client (JSON lines over pipes) drives the real process, so the test holds its pid.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from setup_agent.secrets.vault import Vault
from tests.helpers.growing import install_growing
from tests.helpers.mcp_face import REPO, face_env, real_mcp_setup_argv
from tests.helpers.processes import processes_mentioning, wait_gone
from tests.helpers.timeouts import scaled


class Lines:
    """The process's stdout as JSON messages, each read bounded."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)
        self.buffer = b""

    def until(self, wanted: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if wanted(message):
                    return message
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self.selector.select(remaining), "no such message in time"
            chunk = os.read(self.fd, 65536)
            assert chunk, "stdout closed"
            self.buffer += chunk


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def test_sigint_during_a_slow_call_exits_as_interrupted_without_a_traceback_or_a_child_left(tmp_path: Path) -> None:
    key = tmp_path / "data.key"
    Vault.in_memory().export_key(key)
    env = face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key))
    home = Path(env["MCP_SETUP_HOME"])
    _server_id, store = install_growing(home, key, listed=True)
    store.close()
    stderr_path = tmp_path / "stderr.log"
    with open(stderr_path, "wb") as errlog:
        proc = subprocess.Popen(
            real_mcp_setup_argv("mcp"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=env,
            cwd=str(REPO),
        )
    try:
        lines = Lines(proc)
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "interrupt-test", "version": "1"},
                },
            },
        )
        lines.until(lambda m: m.get("id") == 1, scaled(30))
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "growing__nap", "arguments": {}, "_meta": {"progressToken": "nap"}},
            },
        )
        progress = lines.until(lambda m: m.get("method") == "notifications/progress", scaled(60))
        assert progress["params"]["progressToken"] == "nap"  # the server is napping on our call
        children = processes_mentioning(str(home))
        assert children, "the installed server runs"

        proc.send_signal(signal.SIGINT)
        code = proc.wait(scaled(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(scaled(10))
    log = stderr_path.read_text(errors="replace")
    assert code == 130, log  # interrupted, as a shell reports a Ctrl-C
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
    assert wait_gone(children) == [] and processes_mentioning(str(home)) == []
