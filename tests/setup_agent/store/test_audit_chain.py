"""The audit is tamper-evident: each row carries the link of the row before it, an HMAC under a
chain key the database holds only encrypted under the data key.

Someone who can write the database (the triggers or rules dropped, as a process with the file or
the table's owner could) but has no data key cannot recompute the chain: a row rewritten and the
chain recomputed with the project's own unkeyed digest, a row deleted, rows rewritten are named
by ``mcp-setup audit --verify`` (id, time, event). Rows written before the chain had a key are
sealed once and stay verifiable; a rotation of the data key keeps the chain valid. On SQLite an
insert over a row is refused, on PostgreSQL ``TRUNCATE``; ``tool_registry_diagnostics`` counts a
broken chain.
"""

from __future__ import annotations

import argparse
import io
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from cryptography.fernet import Fernet
from sqlalchemy.orm import Session

from app.cli.audit import run_audit
from app.cli.team import rotate_data_key
from app.settings import Settings
from setup_agent.errors import StoreError
from setup_agent.secrets import Vault
from setup_agent.store import Store
from setup_agent.store.audit import GENESIS, SEALED, LinkContent, row_digest
from setup_agent.store.audit_key import read_chain_key
from setup_agent.store.engine import MIGRATIONS_DIR
from setup_agent.store.models import AuditKeyRow, AuditRow
from setup_agent.store.records import read_sqlite_audit

#: The revision before the chain had a key.
UNKEYED_REVISION = "0015_token_kind"


def _key_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.key"
    if not path.exists():
        Vault.in_memory().export_key(path)
    return path


def _store(tmp_path: Path, database_url: str | None = None) -> Store:
    return Store.for_data_dir(tmp_path / "data", Vault.from_key_file(_key_file(tmp_path)), database_url)


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
    settings = Settings(home=tmp_path / "data", database_url=database_url, data_key_file=_key_file(tmp_path))
    code = run_audit(settings, args, out=out)
    return code, out.getvalue()


@pytest.fixture
def raw(tmp_path: Path, database_url: str | None) -> Iterator[sa.Engine]:
    """The database as someone who can write it sees it, the product's code at hand, no data key."""
    engine = sa.create_engine(database_url or f"sqlite:///{tmp_path / 'data' / 'mcp-setup.db'}")
    yield engine
    engine.dispose()


def _drop_the_rules(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            for trigger in ("mcp_audit_no_update", "mcp_audit_no_delete", "mcp_audit_no_replace"):
                conn.execute(sa.text(f"DROP TRIGGER IF EXISTS {trigger}"))
        else:
            for rule in ("mcp_audit_no_update", "mcp_audit_no_delete"):
                conn.execute(sa.text(f"DROP RULE IF EXISTS {rule} ON mcp_audit"))


def _rechain_unkeyed(s: Session, from_id: int, to_id: int | None = None) -> None:
    """Every link from row ``from_id`` (to ``to_id``) recomputed with the project's unkeyed digest."""
    prev = GENESIS
    for row in s.scalars(sa.select(AuditRow).order_by(AuditRow.id)):
        if from_id <= row.id <= (to_id or row.id):
            row.prev_hash = prev
            row.row_hash = row_digest(LinkContent.of(row))
        prev = row.row_hash or ""


def _rewrite_and_rechain(s: Session, target: int) -> None:
    s.get_one(AuditRow, target).actor = "someone else"
    s.flush()
    _rechain_unkeyed(s, target)


def _delete(s: Session, target: int) -> None:
    s.delete(s.get_one(AuditRow, target))


def _delete_and_rechain(s: Session, target: int) -> None:
    _delete(s, target)
    s.flush()
    _rechain_unkeyed(s, target + 1)


def _rewrite_rows(s: Session, target: int) -> None:
    for row in s.scalars(sa.select(AuditRow).where(AuditRow.id >= target)):
        row.actor = "someone else"


TAMPERING = {  # what is done to row 2 -> the row named, and what its reason says
    "a row rewritten and the chain recomputed with the unkeyed digest": (_rewrite_and_rechain, 2, "without the key"),
    "a row deleted": (_delete, 3, "removed"),
    "a row deleted and the chain recomputed with the unkeyed digest": (_delete_and_rechain, 3, "without the key"),
    "the triggers dropped, then rows rewritten": (_rewrite_rows, 2, "rewritten"),
}


def test_each_audit_row_carries_the_keyed_link_of_the_one_before_and_the_chain_verifies(
    tmp_path: Path, database_url: str | None, raw: sa.Engine
) -> None:
    with _store(tmp_path, database_url) as store:
        _fill(store)
        report = store.audit.verify()
        assert report.ok and report.rows == 3 and report.last_hash != GENESIS
        assert report.keyed_from == 1  # a new database: every row keyed, nothing to seal
        assert store.audit.chain()["broken_links"] == 0
        assert SEALED not in store.audit.counts()
    with Session(raw) as s:  # the project's own unkeyed digest is not what the links are
        for row in s.scalars(sa.select(AuditRow).order_by(AuditRow.id)):
            assert row.row_hash != row_digest(LinkContent.of(row))
    code, text = _verify(tmp_path, database_url)
    assert code == 0 and "whole: 3 rows, keyed from its first row" in text and report.last_hash in text


@pytest.mark.parametrize("tampering", list(TAMPERING))
def test_a_chain_changed_without_the_data_key_fails_audit_verify_which_names_the_first_bad_row(
    tmp_path: Path, database_url: str | None, raw: sa.Engine, tampering: str
) -> None:
    change, named, reason = TAMPERING[tampering]
    with _store(tmp_path, database_url) as store:
        _fill(store)
        store.servers.set_enabled(store.servers.list()[0].server_id, False)
        entry = next(e for e in store.audit.entries() if e.id == named)
    _drop_the_rules(raw)
    with Session(raw) as s, s.begin():
        change(s, 2)
    code, text = _verify(tmp_path, database_url)
    at = entry.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    assert code == 1, text
    assert f"broken at row {named} ({at}Z, {entry.event}):" in text and reason in text
    with _store(tmp_path, database_url) as store:
        chain = store.audit.chain()
        assert (
            not chain["ok"] and chain["first_broken"]["id"] == named and chain["first_broken"]["event"] == entry.event
        )


def test_a_row_rewritten_through_sqlite_directly_is_refused_by_the_triggers_first(tmp_path: Path) -> None:
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
        with pytest.raises(sqlite3.IntegrityError):  # the chain's key is never removed
            db.execute("DELETE FROM mcp_audit_key")
    db.close()
    assert _verify(tmp_path)[0] == 0


def test_a_chain_key_replaced_by_one_under_another_data_key_is_refused_with_a_sentence(
    tmp_path: Path, database_url: str | None, raw: sa.Engine
) -> None:
    with _store(tmp_path, database_url) as store:
        _fill(store)
        assert store.audit.verify().ok
    payload = b'{"key": "' + b"00" * 32 + b'", "from": 9, "at": "2026-01-01T00:00:00+00:00"}'
    forged = Fernet(Fernet.generate_key()).encrypt(payload)  # a key of the forger's own
    with raw.begin() as conn:
        conn.execute(sa.update(AuditKeyRow).values(key_encrypted=forged))
    code, text = _verify(tmp_path, database_url)
    assert code == 1 and text == ""
    with _store(tmp_path, database_url) as store:
        with pytest.raises(StoreError, match="chain key cannot be read with this data key"):
            store.audit.verify()
        chain = store.audit.chain()  # the diagnostics say it rather than fail
        assert chain["ok"] is False and "chain key cannot be read" in chain["problem"]
        server = store.servers.list()[0].server_id
        with pytest.raises(StoreError, match="chain key cannot be read"):  # no row is chained without the key
            store.servers.set_enabled(server, False)
        assert store.servers.list()[0].enabled  # and the change it would audit is not made


def test_a_chain_key_removed_leaves_the_rows_keyed_under_it_failing_verify(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        _fill(store)
    db = sqlite3.connect(tmp_path / "data" / "mcp-setup.db")
    with db:
        db.execute("DROP TRIGGER mcp_audit_key_no_delete")
        db.execute("DELETE FROM mcp_audit_key")
    db.close()
    code, text = _verify(tmp_path)  # sealed again under a new key: the rows keyed before fail
    assert code == 1 and "broken at row 1 (" in text and "keyed from row 4" in text


def _unkeyed_database(tmp_path: Path, database_url: str | None, rows: int = 3) -> None:
    """A database as the version before the keyed chain left it: migrated to that revision, its
    audit chained with the plain digest."""
    (tmp_path / "data").mkdir(exist_ok=True)
    engine = sa.create_engine(database_url or f"sqlite:///{tmp_path / 'data' / 'mcp-setup.db'}")
    try:
        with engine.begin() as conn:
            cfg = Config()
            cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, UNKEYED_REVISION)
        start = datetime(2026, 11, 1, tzinfo=UTC)
        with Session(engine) as s, s.begin():
            prev = GENESIS
            for n in range(1, rows + 1):
                fields = {
                    "id": n,
                    "at": start + timedelta(minutes=n),
                    "event": ("installed", "disabled", "enabled")[(n - 1) % 3],
                    "server_id": "s0",
                    "qualified_name": "io.test/old",
                    "actor": "mcp:old-client",
                    "old_hash": None,
                    "new_hash": None,
                    "detail": None,
                }
                digest = row_digest(LinkContent(prev, **fields))
                s.add(AuditRow(**fields, prev_hash=prev, row_hash=digest))
                prev = digest
    finally:
        engine.dispose()


def test_rows_written_before_the_chain_had_a_key_are_sealed_once_and_verify_says_from_which_row(
    tmp_path: Path, database_url: str | None
) -> None:
    _unkeyed_database(tmp_path, database_url)
    code, text = _verify(tmp_path, database_url)  # the first start after the upgrade seals
    assert code == 0 and "whole: 4 rows, keyed from row 4 (sealed " in text, text
    with _store(tmp_path, database_url) as store:
        seal = store.audit.entries()[-1]
        assert (seal.id, seal.event, seal.actor) == (4, SEALED, "mcp-setup")
        assert "rows up to 3 were chained without a key" in (seal.detail or "")
        _fill(store)  # later rows keyed after the seal
        report = store.audit.verify()
        assert report.ok and report.rows == 7 and report.keyed_from == 4
        assert store.audit.counts()[SEALED] == 1  # once
        if database_url is None:  # the stdlib reader of `mcp-setup audit` reads the seal as the store does
            assert read_sqlite_audit(tmp_path / "data" / "mcp-setup.db") == (
                store.audit.entries(),
                store.audit.counts(),
            )


def test_an_unkeyed_row_rewritten_and_rechained_after_the_seal_breaks_the_seal_s_link(
    tmp_path: Path, database_url: str | None, raw: sa.Engine
) -> None:
    _unkeyed_database(tmp_path, database_url)
    with _store(tmp_path, database_url) as store:
        _fill(store)  # the first write seals
        assert store.audit.verify().keyed_from == 4
    _drop_the_rules(raw)
    with Session(raw) as s, s.begin():
        s.get_one(AuditRow, 2).actor = "someone else"
        s.flush()
        _rechain_unkeyed(s, 2, to_id=3)  # the unkeyed rows agree with each other again
    code, text = _verify(tmp_path, database_url)
    assert code == 1 and "broken at row 4 (" in text and f", {SEALED}): the rows before it" in text, text


def test_rows_cut_from_the_end_back_past_the_seal_are_named_and_a_row_written_after_is_keyed(
    tmp_path: Path, database_url: str | None, raw: sa.Engine
) -> None:
    _unkeyed_database(tmp_path, database_url)
    assert _verify(tmp_path, database_url)[0] == 0  # sealed: row 4
    _drop_the_rules(raw)
    with Session(raw) as s, s.begin():
        s.execute(sa.delete(AuditRow).where(AuditRow.id >= 4))
    code, text = _verify(tmp_path, database_url)
    assert code == 1 and "broken at row 4 (" in text and f"{SEALED}): it is missing" in text, text
    with _store(tmp_path, database_url) as store:
        store.audit.record_event("consent_denied", actor="user:web")  # row 4 again, under the key
        entries = store.audit.entries()
        assert [e.id for e in entries][-1] == 4 and store.audit.verify().ok  # the tail cut: the last hash shows it


def test_a_rotation_of_the_data_key_re_encrypts_the_chain_key_and_the_chain_stays_valid(
    tmp_path: Path, database_url: str | None
) -> None:
    _unkeyed_database(tmp_path, database_url)
    old = Vault.from_key_file(_key_file(tmp_path))
    with _store(tmp_path, database_url) as store:  # a rotation is the first write after the upgrade: it seals too
        rotate_data_key(old, store)
        _fill(store)  # this store keys its rows after the rotation
    code, text = _verify(tmp_path, database_url)  # a new process, the new key from the file
    assert code == 0 and "whole: 7 rows, keyed from row 4" in text, text
    with _store(tmp_path, database_url) as store:
        with store.database.session() as s:
            with pytest.raises(StoreError, match="chain key cannot be read"):  # the old key opens it no more
                read_chain_key(s, old)
            assert read_chain_key(s, Vault.from_key_file(_key_file(tmp_path))) is not None


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
