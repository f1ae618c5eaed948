"""A database shared by several processes: racing installs, and a database that goes away.

Runs on SQLite (one file) and PostgreSQL (the ``database_url`` fixture); the outage test needs
a server, so it runs on PostgreSQL only (the ``postgres_url`` fixture).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.secrets.vault import Vault
from setup_agent.setup.service import CallContext
from setup_agent.store.database import Store
from tests.conftest import POSTGRES_URL
from tests.helpers.paths import REPO
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

ROOT = REPO

# A process that installs one server, pausing right before its INSERT until told "go".
RACER = r"""
import json, sys
from pathlib import Path
from sqlalchemy import event
from setup_agent.errors import SetupError
from setup_agent.store.database import Store
from setup_agent.secrets.vault import Vault

data_dir, url, tag = sys.argv[1], sys.argv[2] or None, sys.argv[3]
store = Store.for_data_dir(Path(data_dir), Vault.in_memory(), url)
paused = []

def pause(conn, cursor, statement, *args):
    if statement.lstrip().upper().startswith("INSERT INTO MCP_SERVERS") and not paused:
        paused.append(1)
        print("at-insert", flush=True)
        assert sys.stdin.readline().strip() == "go"

event.listen(store.database.engine, "before_cursor_execute", pause)
try:
    server = store.servers.install(
        qualified_name="io.test/raced", source="local", version="1", package_type="npm",
        launch_spec={"command": "x"}, installed_by=tag, tools_hash="h",
        env={"A": (tag + "-a", True), "B": (tag + "-b", False), "C": (tag + "-c", True)},
    )
    print(json.dumps({"ok": True, "server_id": server.server_id}), flush=True)
except SetupError as exc:
    print(json.dumps({"ok": False, "code": exc.code, "message": exc.message}), flush=True)
store.close()
"""


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The next line the process prints, waiting at most ``timeout`` seconds."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(
                f"no line from the racer within {timeout}s; stderr: {proc.stderr and proc.stderr.read()}"
            )
    line = proc.stdout.readline()
    assert line, f"the racer exited: {proc.stderr.read() if proc.stderr else ''}"
    return line.strip()


def test_two_processes_installing_the_same_name_one_wins_and_the_other_is_told_already_installed(
    tmp_path: Path, database_url: str | None
) -> None:
    data_dir = tmp_path / "data"
    Store.for_data_dir(data_dir, Vault.in_memory(), database_url).close()  # migrated once, up front
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(data_dir), database_url or "", tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for tag in ("one", "two")
    ]
    try:
        # Both passed the duplicate check and stand before their INSERT: a real race.
        assert [read_line(p, 30) for p in racers] == ["at-insert", "at-insert"]
        for p in racers:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(read_line(p, 30)) for p in racers]
        for p in racers:
            assert p.wait(timeout=scaled(30)) == 0
    finally:
        for p in racers:
            if p.poll() is None:
                p.kill()
                p.wait()
    winners = [r for r in results if r["ok"]]
    losers = [r for r in results if not r["ok"]]
    assert len(winners) == 1 and len(losers) == 1, results
    assert losers[0]["code"] == "already_installed", results
    with Store.for_data_dir(data_dir, Vault.in_memory(), database_url) as store:
        [server] = store.servers.list()
        assert server.server_id == winners[0]["server_id"]
        with store.database.engine.connect() as conn:
            env_rows = conn.execute(text("SELECT server_id FROM mcp_client_env")).scalars().all()
    assert env_rows == [server.server_id] * 3  # the winner's rows, none of the loser's


# --- the database goes away mid-install (PostgreSQL) -----------------------------------


def _admin(sql: str) -> None:
    import psycopg

    assert POSTGRES_URL is not None
    dsn = make_url(POSTGRES_URL).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)


def take_database_away(name: str) -> None:
    """New connections are refused and every open one is cut: as if the server went away."""
    _admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    _admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")


def bring_database_back(name: str) -> None:
    _admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


@pytest.fixture
async def team_runtime(
    new_runtime, tmp_path: Path, canary: str, memory_keyring: Any, postgres_url: str
) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary, name="stub-ok")
    doc = stub_server_json(bundle.resolve().as_uri(), sha, name="io.test/stub-ok")
    (catalog / "stub.json").write_text(json.dumps(doc))
    settings = Settings(
        home=tmp_path / "data",
        registries="local",
        catalog_dir=catalog,
        probe_timeout_seconds=scaled(10),
        database_url=postgres_url,
    )
    runtime = new_runtime(settings, keyring_backend=memory_keyring)
    yield runtime
    await runtime.aclose()


@pytest.mark.anyio
async def test_a_database_that_goes_away_mid_install_fails_it_cleanly_and_the_service_recovers(
    team_runtime: Runtime, postgres_url: str, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = team_runtime
    db_name = make_url(postgres_url).database
    assert db_name
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    install_args = {"qualified_name": "io.test/stub-ok", "env_refs": {"STUB_API_KEY": ref}}
    stages: list[tuple[str, str]] = []

    async def cut_before_the_write(event: dict[str, Any]) -> None:
        stages.append((event["stage"], event["status"]))
        if (event["stage"], event["status"]) == ("installing", "started"):
            take_database_away(db_name)  # the probe passed; the transaction is next

    try:
        with anyio.fail_after(scaled(30)):
            result = await runtime.service.call(
                "mcp_setup_install_and_connect", install_args, CallContext(on_progress=cut_before_the_write)
            )
        assert ("installing", "started") in stages
        assert result["ok"] is False and result["error"]["code"] == "store_error", result
        assert "unreachable" in result["error"]["message"]
        assert canary not in json.dumps(result) and canary not in caplog.text
        # The ref is still usable, nothing is left on disk, and the service still answers.
        assert runtime.refs.resolve({"STUB_API_KEY": ref})["STUB_API_KEY"].reveal() == canary
        assert not any((runtime.settings.home / "servers").glob("srv_*"))
        listed = await runtime.service.call("mcp_setup_list_servers", {}, CallContext())
        assert listed["ok"] is False and listed["error"]["code"] == "store_error"
    finally:
        bring_database_back(db_name)

    with anyio.fail_after(scaled(30)):
        listed = await runtime.service.call("mcp_setup_list_servers", {}, CallContext())
        assert "error" not in listed and listed["servers"] == []
        again = await runtime.service.call("mcp_setup_install_and_connect", install_args, CallContext())
    assert "error" not in again and again["status"] == "connected", again
    assert [s.qualified_name for s in runtime.store.servers.list()] == ["io.test/stub-ok"]


# --- a value stored under another data key ---------------------------------------------


@pytest.mark.anyio
async def test_a_server_stored_under_another_key_fails_with_its_name_and_a_fix_and_the_others_start(
    tmp_path: Path, database_url: str | None, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    from setup_agent.gateway.connections import ConnectionManager
    from setup_agent.secrets.redact import Redactor
    from tests.helpers.connections import install as install_stub

    data_dir = tmp_path / "data"
    store = Store.for_data_dir(data_dir, Vault.in_memory(), database_url)
    stranger = install_stub(store, "io.test/from-elsewhere", canary)
    # Its value written again by a machine with another key (such a machine cannot chain an audit
    # row, so it writes no install: a renewed value, as a sign-in's).
    with Store.for_data_dir(data_dir, Vault.in_memory(), database_url) as elsewhere:
        elsewhere.values.set_env_value(stranger.server_id, "STUB_API_KEY", canary, True)
    good = install_stub(store, "io.test/ours", canary)
    manager = ConnectionManager(
        store, Redactor(), install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(10)
    )
    try:
        with anyio.fail_after(scaled(20)):
            await manager.start()
        assert manager.status(good.server_id).status == "connected"
        failed = manager.status(stranger.server_id)
        assert failed.status == "failed"
        assert failed.reason is not None
        assert "io.test/from-elsewhere" in failed.reason and "STUB_API_KEY" in failed.reason
        assert "MCP_SETUP_DATA_KEY_FILE" in failed.reason  # the fix
    finally:
        await manager.aclose()
        store.close()
    assert not any(r.exc_info for r in caplog.records)  # reported, never a traceback
    assert "Traceback" not in caplog.text and canary not in caplog.text
