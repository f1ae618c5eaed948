"""The engine under the store on SQLite: a write-ahead log synced at checkpoints, a busy timeout
for the other processes on the data dir, and what that means for the file's other readers.

Real SQLite files in a temp data dir; "another process" is a real Python subprocess holding a
write transaction open on the same file.
"""

from __future__ import annotations

import select
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from setup_agent.secrets.vault import Vault
from setup_agent.store import read_sqlite_catalog, read_sqlite_counter, read_sqlite_servers
from setup_agent.store.database import DB_FILE_NAME, HEAD_REVISION, MIGRATIONS_DIR, Store
from setup_agent.store.engine import SQLITE_BUSY_TIMEOUT_MS
from setup_agent.store.schema import CHANGES, SERVERS
from tests.conftest import MemoryKeyring
from tests.helpers.timeouts import scaled

#: Another process's write transaction, held open until a line arrives on its stdin.
HOLDER = f"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("UPDATE {CHANGES.name} SET counter = counter + 100 WHERE id = 1")
conn.execute("UPDATE {SERVERS.name} SET enabled = 0")
print("holding", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
print("committed", flush=True)
"""


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    with Store.for_data_dir(data_dir, Vault.open(data_dir, keyring_backend=MemoryKeyring())) as s:
        yield s


def install(store: Store, name: str = "io.github.example/weather") -> str:
    return store.servers.install(
        qualified_name=name,
        source="official",
        version="1.2.3",
        package_type="npm",
        launch_spec={"command": "npx", "args": ["-y", "weather@1.2.3"]},
        installed_by="agent",
        tools_hash="sha256:abc",
        env={"REGION": ("eu-west-1", False)},
        tools=[{"name": "forecast", "description": "The weather."}],
    ).server_id


def line_of(proc: subprocess.Popen[str]) -> str:
    """The subprocess's next line on stdout, or a failure with its stderr when it gives none."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], scaled(30))
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        _, err = proc.communicate(timeout=scaled(30))
        pytest.fail(f"the other process said nothing: {err}")
    return line.strip()


def test_every_connection_writes_ahead_to_a_log_synced_at_checkpoints_and_waits_for_other_writers(
    store: Store, data_dir: Path
) -> None:
    with store.database.engine.connect() as one, store.database.engine.connect() as two:  # two pooled connections
        for conn in (one, two):
            assert conn.execute(text("PRAGMA journal_mode")).scalar_one() == "wal"
            assert conn.execute(text("PRAGMA synchronous")).scalar_one() == 1  # NORMAL
            assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == SQLITE_BUSY_TIMEOUT_MS
            assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1
    other = sqlite3.connect(data_dir / DB_FILE_NAME)  # the mode is in the file: every other reader sees it
    try:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        other.close()


def test_the_readers_see_the_last_commit_while_another_process_holds_a_write_transaction(
    store: Store, data_dir: Path
) -> None:
    server_id = install(store)
    db = data_dir / DB_FILE_NAME
    before = store.database.change_counter()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert line_of(holder) == "holding"
        # A rollback journal would make each of these wait for the holder (and fail): they read the last commit.
        assert read_sqlite_counter(db) == before
        assert [(s.server_id, s.enabled) for s in read_sqlite_servers(db) or []] == [(server_id, True)]
        catalog = read_sqlite_catalog(db)
        assert catalog is not None and [t.name for t in catalog.tools()] == ["weather__forecast"]
        assert store.database.change_counter() == before
        assert store.servers.get(server_id).enabled  # type: ignore[union-attr]
        assert holder.stdin is not None
        holder.stdin.write("commit\n")
        holder.stdin.flush()
        assert line_of(holder) == "committed"
    finally:
        holder.kill()
        holder.communicate(timeout=scaled(30))
    assert read_sqlite_counter(db) == store.database.change_counter() == before + 100
    assert [s.enabled for s in read_sqlite_servers(db) or []] == [False]


def test_a_database_left_in_a_rollback_journal_at_an_older_revision_is_switched_to_wal_and_migrated_with_its_data(
    data_dir: Path,
) -> None:
    from alembic import command
    from alembic.config import Config

    vault = Vault.open(data_dir, keyring_backend=MemoryKeyring())
    with Store.for_data_dir(data_dir, vault) as store:
        server_id = install(store)
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        with store.database.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "-2")  # the schema of a version two migrations ago
    db = data_dir / DB_FILE_NAME
    old = sqlite3.connect(db)  # as a version before the write-ahead log left it
    try:
        assert old.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    finally:
        old.close()
    assert sorted(p.name for p in data_dir.glob(DB_FILE_NAME + "*")) == [DB_FILE_NAME]

    with Store.for_data_dir(data_dir, vault) as again:
        assert again.database.current_revision() == HEAD_REVISION
        assert [s.server_id for s in again.servers.list()] == [server_id]
        with again.database.engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar_one() == "wal"
