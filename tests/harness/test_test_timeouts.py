"""Issue #27: a stuck test ends at its timeout with a stack, even when its event loop is stuck.

The hang of the fuzz test (#27, run 1) was a lost wakeup made by the per-test timeout itself.
pytest-timeout's default *signal* method raises its failure from a SIGALRM handler in the main
thread, wherever that thread is. The fuzz test (35 s idle, well over 120 s on a loaded 2-core
machine) was most likely inside an asyncio callback of its loop when the alarm fired: asyncio's
``Handle._run`` catches the BaseException, only logs it ("Exception in callback …"), and the rest
of that callback (the ``set_result`` that wakes the waiting task) never runs. The test's task then
waits on a future nobody will complete, its loop sleeps in epoll, and the timeout that was meant
to end the test has already been spent, so the run hangs in silence.

The test below forces that interleaving every time: a loop callback is asleep when the timeout
fires. With the signal method, the inner pytest never ends (this test fails at its own bound);
with the thread method configured in pyproject.toml it ends at once, printing every stack.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.mcp_face import REPO
from tests.helpers.timeouts import scaled

STUCK = """
import asyncio
import time


def test_a_callback_is_running_when_the_timeout_fires() -> None:
    loop = asyncio.new_event_loop()
    woken = loop.create_future()

    def slow_callback() -> None:
        time.sleep(60)  # the loop is in this callback when the per-test timeout fires
        woken.set_result(None)  # the wakeup the test waits for

    loop.call_soon(slow_callback)
    loop.run_until_complete(woken)
"""


def test_a_test_stuck_in_an_event_loop_callback_ends_at_its_timeout_with_every_stack(tmp_path: Path) -> None:
    (tmp_path / "test_stuck.py").write_text(STUCK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MCP_SETUP_TEST_"))}
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(REPO / "pyproject.toml"),
        "--rootdir",
        str(tmp_path),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--timeout=2",
        str(tmp_path / "test_stuck.py"),
    ]
    try:
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(45))
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the stuck test did not end at its 2 s timeout: {exc.stdout!r}") from None
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Timeout" in out and "Stack of MainThread" in out, out
    assert "slow_callback" in out, out  # the stack says where it was stuck
