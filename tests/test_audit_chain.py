"""The audit is tamper-evident (issue #23): each row carries the hash of the row before it.

A row rewritten through SQLite directly (the triggers dropped, as a process with the file could)
is named by ``mcp-setup audit --verify``; an insert over a row is refused on SQLite, and
``TRUNCATE`` on PostgreSQL; ``tool_registry_diagnostics`` counts a broken chain.
"""

from __future__ import annotations

import argparse
import io
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.cli.audit import run_audit
from app.settings import Settings
from setup_agent.secrets import Vault
from setup_agent.store import Store
from setup_agent.store.audit import GENESIS


def _store(tmp_path: Path, database_url: str | None = None) -> Store:
    vault = Vault.open(tmp_path / "data")
    return Store.for_data_dir(tmp_path / "data", vault, database_url=database_url)


def _fill(store: Store) -> None:
    first = store.servers.install(
        qualified_name="io.test/s0",
        source="local",
        version="1.0.0",
        package_type="npm",
        launch_spec={"command": "npx"},
        installed_by="agent",
        tools_hash="sha256:x",
        env={},
    )
    store.servers.set_enabled(first.server_id, False)
    store.servers.set_enabled(first.server_id, True)


def _verify(tmp_path: Path, database_url: str | None = None) -> tuple[int, str]:
    out = io.StringIO()
    args = argparse.Namespace(json=False, limit=None, verify=True)
    code = run_audit(Settings(home=tmp_path / "data", database_url=database_url), args, out=out)
    return code, out.getvalue()


def test_each_audit_row_carries_the_hash_of_the_one_before_and_the_chain_verifies(tmp_path: Path, database_url) -> None:
    with _store(tmp_path, database_url) as store:
        _fill(store)
        report = store.audit.verify()
        assert report.ok and report.rows == 3 and report.last_hash != GENESIS
        assert store.audit.chain()["broken_links"] == 0
    code, text = _verify(tmp_path, database_url)
    assert code == 0 and "whole: 3 rows" in text and report.last_hash in text


def test_a_row_rewritten_through_sqlite_directly_is_named_by_audit_verify(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        _fill(store)
        second = store.audit.entries()[1].id
    db = sqlite3.connect(tmp_path / "data" / "mcp-setup.db")
    with db:
        with pytest.raises(sqlite3.IntegrityError):  # the triggers refuse it as it is
            db.execute("UPDATE mcp_audit SET actor = 'someone else' WHERE id = ?", (second,))
        with pytest.raises(sqlite3.IntegrityError):  # and an insert over a row (REPLACE skips DELETE triggers)
            db.execute(
                "INSERT OR REPLACE INTO mcp_audit (id, at, event, actor) VALUES (?, '2026-01-01', 'x', 'y')", (second,)
            )
    with db:  # a process that can write the file drops the trigger first
        db.execute("DROP TRIGGER mcp_audit_no_update")
        db.execute("UPDATE mcp_audit SET actor = 'someone else' WHERE id = ?", (second,))
    db.close()
    code, text = _verify(tmp_path)
    assert code == 1 and f"broken at row {second}" in text and "rewritten" in text
    with _store(tmp_path) as store:
        assert store.audit.chain()["broken_links"] == 1 and store.audit.chain()["first_broken"]["id"] == second


def test_a_row_deleted_from_the_middle_breaks_the_link_of_the_next(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        _fill(store)
        ids = [r.id for r in store.audit.entries()]
    db = sqlite3.connect(tmp_path / "data" / "mcp-setup.db")
    with db:
        db.execute("DROP TRIGGER mcp_audit_no_delete")
        db.execute("DELETE FROM mcp_audit WHERE id = ?", (ids[1],))
    db.close()
    code, text = _verify(tmp_path)
    assert code == 1 and f"broken at row {ids[2]}" in text and "removed" in text


def test_truncate_on_postgresql_is_refused(tmp_path: Path, postgres_url: str) -> None:
    with _store(tmp_path, postgres_url) as store:
        _fill(store)
    engine = sa.create_engine(postgres_url)
    try:
        with pytest.raises(sa.exc.DBAPIError, match="append-only"):
            with engine.begin() as conn:
                conn.execute(sa.text("TRUNCATE mcp_audit"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM mcp_audit")).scalar() == 3
    finally:
        engine.dispose()
    with _store(tmp_path, postgres_url) as store:
        assert store.audit.verify().ok
