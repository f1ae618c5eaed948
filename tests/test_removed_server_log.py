"""A removed server's stderr log is gone and stays gone, also when another face (a running
`mcp-setup serve` / `mcp-setup mcp`) has the server connected: the lines the stub prints
while it stops (``stub: stdin closed``) must not recreate the file."""

from __future__ import annotations

import os
import subprocess

import anyio
import pytest

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.server_logs import log_path
from setup_agent.secrets.redact import Redactor
from tests.mcp_face import REPO, mcp_setup_argv
from tests.test_cli_servers import STUB, DataDir, data  # noqa: F401 - the data fixture
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_server_removed_by_the_cli_leaves_no_log_while_a_session_has_it_connected(
    data: DataDir, canary: str
) -> None:
    sid = data.install(STUB, canary)
    runtime = build_runtime(Settings())  # the "serve" side: the data fixture's environment
    try:
        await runtime.start(eager=True)
        with anyio.fail_after(scaled(30)):
            status = await runtime.connections.wait_for_status(sid, "connected", scaled(30))
        pid = runtime.connections.pid(sid)
        assert status.status == "connected" and pid is not None
        log = log_path(data.home / "logs", sid)
        assert log.exists()  # the stub's start-up lines
        argv = mcp_setup_argv("remove", "stub-search")
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                argv, env=data.env(), cwd=str(REPO), capture_output=True, text=True, timeout=scaled(60)
            )
        )
        assert done.returncode == 0, done.stderr
        with anyio.fail_after(scaled(30)):  # the serve side sees the removal (its watcher, or this refresh)
            await runtime.gateway.refresh()
        assert runtime.connections.status(sid).status == "stopped"
        assert gone(pid)  # the stop waited until the process group was gone
        assert not log.exists() and not log.with_name(log.name + ".1").exists()
    finally:
        await runtime.aclose()
    assert not log.exists()


async def test_a_server_removed_through_the_core_leaves_no_log(data: DataDir, canary: str) -> None:
    sid = data.install(STUB, canary)
    with data.store() as store:
        manager = ConnectionManager(
            store,
            Redactor(),
            install_root=data.home / "servers",
            logs_dir=data.home / "logs",
            backoff=(),
            connect_timeout=scaled(20),
        )
        try:
            with anyio.fail_after(scaled(30)):
                status = await manager.connect(store.servers.get(sid))
            assert status.status == "connected"
            pid = manager.pid(sid)
            assert log_path(data.home / "logs", sid).exists()
            await manager.remove(sid)
            assert pid is not None and gone(pid)
            assert not log_path(data.home / "logs", sid).exists()
        finally:
            await manager.aclose()
