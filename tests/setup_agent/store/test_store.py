"""The store: installed servers and their encrypted env, one transaction per change.

Tests that take ``store`` or ``database_url`` run on embedded SQLite and on PostgreSQL (the
``database_url`` fixture of tests/conftest.py); ``sqlite_store`` tests are about SQLite itself."""

from __future__ import annotations

import base64
import stat
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from keyring.backends import fail
from sqlalchemy import Column, MetaData, String, Table, event, text

from setup_agent.errors import AlreadyInstalled, InvalidInput, NotFound, StoreError
from setup_agent.secrets.refs import SecretValue
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import DB_FILE_NAME, HEAD_REVISION, MIGRATIONS_DIR, VERSION_TABLE, Store
from setup_agent.store.models import Base, EnvKey, InstalledServer
from tests.conftest import MemoryKeyring


class Clock:
    """A clock that moves one second per reading."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def backend() -> MemoryKeyring:
    return MemoryKeyring()


@pytest.fixture
def vault(data_dir: Path, backend: MemoryKeyring) -> Vault:
    return Vault.open(data_dir, keyring_backend=backend)


@pytest.fixture
def store(data_dir: Path, vault: Vault, database_url: str | None) -> Iterator[Store]:
    s = Store.for_data_dir(data_dir, vault, database_url, clock=Clock())
    yield s
    s.close()


@pytest.fixture
def sqlite_store(data_dir: Path, vault: Vault) -> Iterator[Store]:
    s = Store.for_data_dir(data_dir, vault, clock=Clock())
    yield s
    s.close()


def install(store: Store, name: str = "io.github.example/weather", **overrides: Any) -> InstalledServer:
    args: dict[str, Any] = {
        "qualified_name": name,
        "source": "official",
        "version": "1.2.3",
        "package_type": "npm",
        "launch_spec": {"command": "npx", "args": ["-y", "weather@1.2.3"], "env": {"API_KEY": "${API_KEY}"}},
        "installed_by": "agent",
        "tools_hash": "sha256:abc",
        "env": {"API_KEY": ("key-123456", True), "REGION": ("eu-west-1", False)},
    }
    args.update(overrides)
    return store.servers.install(**args)


def row_counts(store: Store) -> tuple[int, int]:
    with store.database.engine.connect() as conn:
        servers = conn.execute(text("SELECT COUNT(*) FROM mcp_servers")).scalar_one()
        env = conn.execute(text("SELECT COUNT(*) FROM mcp_client_env")).scalar_one()
    return servers, env


def test_for_data_dir_creates_a_private_data_dir_and_a_0600_database(data_dir: Path, vault: Vault) -> None:
    with Store.for_data_dir(data_dir / "nested", vault) as store:
        assert store.servers.list() == []
    assert stat.S_IMODE((data_dir / "nested").stat().st_mode) == 0o700
    assert stat.S_IMODE((data_dir / "nested" / DB_FILE_NAME).stat().st_mode) == 0o600


def test_migrations_create_exactly_the_schema_of_the_models(store: Store) -> None:
    with store.database.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert compare_metadata(context, Base.metadata) == []
        assert context.get_current_revision() == HEAD_REVISION


def alembic(store: Store, command_name: str, target: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with store.database.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, command_name)(cfg, target)


def table_names(store: Store) -> set[str]:
    from sqlalchemy import inspect

    with store.database.engine.connect() as conn:
        return set(inspect(conn).get_table_names())


def test_alembic_upgrades_an_empty_database_to_head_and_back_down_to_empty(
    data_dir: Path, vault: Vault, database_url: str | None
) -> None:
    with Store.for_data_dir(data_dir, vault, database_url) as store:  # upgrade from empty
        assert store.database.current_revision() == HEAD_REVISION
        assert {"mcp_servers", "mcp_client_env", VERSION_TABLE} <= table_names(store)
        alembic(store, "downgrade", "base")
        assert table_names(store) == {VERSION_TABLE}
        assert store.database.current_revision() is None
        store.database.migrate()  # from empty again, through every migration
        assert store.database.current_revision() == HEAD_REVISION
        install(store)
        alembic(store, "upgrade", "head")  # from head: nothing to do, nothing lost
        assert row_counts(store) == (1, 2)


def test_schema_comparison_notices_a_model_the_migrations_lack(store: Store) -> None:
    drifted = MetaData()
    for table in Base.metadata.tables.values():
        table.to_metadata(drifted)
    Table("mcp_servers", drifted, Column("extra", String(10)), extend_existing=True)
    with store.database.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert [d[0] for d in compare_metadata(context, drifted)] == ["add_column"]


def test_opening_the_store_again_keeps_the_data_and_migrates_nothing(
    store: Store, data_dir: Path, vault: Vault, database_url: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    server = install(store)
    store.close()
    caplog.set_level("INFO", logger="alembic")
    with Store.for_data_dir(data_dir, vault, database_url) as again:
        assert again.servers.get(server.server_id) == server
    assert "Running upgrade" not in caplog.text


def test_foreign_keys_are_enforced_on_sqlite(sqlite_store: Store) -> None:
    with sqlite_store.database.engine.begin() as conn:
        assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1


def test_deleting_a_server_row_deletes_its_env_rows(store: Store) -> None:
    server = install(store)
    with store.database.engine.begin() as conn:
        conn.execute(text("DELETE FROM mcp_servers WHERE server_id = :i"), {"i": server.server_id})
    assert row_counts(store) == (0, 0)  # ON DELETE CASCADE


def test_install_returns_the_server_with_env_key_names_but_no_values(store: Store) -> None:
    server = install(store)
    assert server.server_id.startswith("srv_") and len(server.server_id) == 16
    assert server.env_keys == (EnvKey("API_KEY", True), EnvKey("REGION", False))
    assert server.enabled is True
    assert server.installed_at.tzinfo is not None
    assert server.launch_spec["args"] == ["-y", "weather@1.2.3"]
    assert "key-123456" not in repr(server) and "eu-west-1" not in repr(server)
    assert store.servers.get(server.server_id) == server
    assert store.servers.get_by_name("io.github.example/weather") == server


def test_env_values_are_decrypted_as_secret_values_for_secret_and_plain_keys(store: Store) -> None:
    server = install(store, env={"API_KEY": (SecretValue("key-123456"), True), "REGION": ("eu-west-1", False)})
    values = store.values.env_values(server.server_id)
    assert all(isinstance(v, SecretValue) for v in values.values())
    assert {k: v.reveal() for k, v in values.items()} == {"API_KEY": "key-123456", "REGION": "eu-west-1"}


def test_every_env_value_is_stored_encrypted(store: Store, vault: Vault) -> None:
    server = install(store)
    with store.database.engine.connect() as conn:
        query = text("SELECT key, value_encrypted, secret FROM mcp_client_env WHERE server_id = :i")
        rows = conn.execute(query, {"i": server.server_id}).all()
    assert {key: vault.decrypt(blob).reveal() for key, blob, _ in rows} == {
        "API_KEY": "key-123456",
        "REGION": "eu-west-1",
    }
    assert all(b"key-123456" not in blob and b"eu-west-1" not in blob for _, blob, _ in rows)


def test_a_secret_value_never_appears_in_the_database_files_or_in_reprs(
    data_dir: Path, vault: Vault, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    canary = "canary-" + uuid.uuid4().hex
    store = Store.for_data_dir(data_dir, vault)
    server = install(store, env={"API_KEY": (canary, True)})
    seen = [
        server,
        store.servers.get(server.server_id),
        store.servers.get_by_name(server.qualified_name),
        store.servers.list(),
        store,
    ]
    seen += [store.values.env_values(server.server_id), vault, store.servers.set_enabled(server.server_id, False)]
    raw = canary.encode()
    forms = {raw, base64.b64encode(raw), base64.urlsafe_b64encode(raw), base64.b64encode(raw).rstrip(b"=")}

    def files_hold_no_form(expected: set[str]) -> None:
        files = [p for p in data_dir.iterdir() if p.name.startswith(DB_FILE_NAME)]
        assert {p.name for p in files} >= expected
        for path in files:  # the db and its -journal / -wal / -shm
            blob = path.read_bytes()
            assert not any(form in blob for form in forms), path.name

    files_hold_no_form({DB_FILE_NAME, DB_FILE_NAME + "-wal"})  # open: the last commits are in the -wal
    store.close()
    files_hold_no_form({DB_FILE_NAME})
    for thing in seen:
        assert canary not in repr(thing) and canary not in str(thing)
    assert canary not in caplog.text


def test_install_writes_nothing_when_the_name_is_already_installed(store: Store) -> None:
    first = install(store)
    with pytest.raises(AlreadyInstalled) as info:
        install(store, env={"OTHER": ("x", False)}, server_id="srv_000000000000")
    assert "io.github.example/weather" in info.value.message and "Remove it first" in info.value.message
    assert info.value.code == "already_installed"
    assert row_counts(store) == (1, 2)
    assert store.servers.get("srv_000000000000") is None
    assert store.servers.get(first.server_id) == first


def test_install_refuses_a_server_id_that_is_taken(store: Store) -> None:
    first = install(store)
    with pytest.raises(AlreadyInstalled):
        install(store, name="other/server", server_id=first.server_id)
    assert row_counts(store) == (1, 2)


def test_install_leaves_no_rows_when_a_value_cannot_be_encrypted(store: Store) -> None:
    with pytest.raises(StoreError):
        install(store, env={"A": ("fine", False), "B": ("bad-\ud800", True)})
    assert row_counts(store) == (0, 0)


def test_install_leaves_no_rows_when_the_database_fails_midway(store: Store) -> None:
    failure = store.database.engine.dialect.dbapi.OperationalError  # sqlite3's or psycopg's

    def fail_env_insert(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO MCP_CLIENT_ENV"):
            raise failure("disk I/O error")

    inserted: list[str] = []
    event.listen(store.database.engine, "before_cursor_execute", lambda c, cu, st, *a: inserted.append(st))
    event.listen(store.database.engine, "before_cursor_execute", fail_env_insert)
    with pytest.raises(StoreError) as info:
        install(store)
    assert any("INSERT INTO mcp_servers" in s for s in inserted)  # failed after the server row
    assert "key-123456" not in str(info.value) and "key-123456" not in str(info.value.__cause__)
    event.remove(store.database.engine, "before_cursor_execute", fail_env_insert)
    assert row_counts(store) == (0, 0)


def test_install_rejects_malformed_env_before_writing(store: Store) -> None:
    with pytest.raises(InvalidInput):
        install(store, env={"A": ("v", "yes")})
    with pytest.raises(InvalidInput):
        install(store, env={"": ("v", False)})
    assert row_counts(store) == (0, 0)


def test_install_refuses_a_secret_value_written_into_the_launch_spec(store: Store) -> None:
    spec = {"command": "npx", "env": {"API_KEY": "key-123456"}}
    with pytest.raises(InvalidInput) as info:
        install(store, launch_spec=spec)
    assert "key-123456" not in str(info.value) and "${API_KEY}" in str(info.value)
    assert row_counts(store) == (0, 0)


def test_remove_deletes_the_server_and_its_env_rows(store: Store) -> None:
    kept = install(store, name="keep/me")
    gone = install(store)
    assert store.servers.remove(gone.server_id) is True
    assert store.servers.get(gone.server_id) is None
    assert row_counts(store) == (1, 2)
    assert store.servers.remove(gone.server_id) is False
    assert store.servers.get(kept.server_id) == kept


def test_list_is_ordered_by_install_time_and_can_skip_disabled_servers(store: Store) -> None:
    a = install(store, name="a/first")
    b = install(store, name="b/second")
    c = install(store, name="c/third")
    assert [s.qualified_name for s in store.servers.list()] == ["a/first", "b/second", "c/third"]
    assert a.installed_at < b.installed_at < c.installed_at
    disabled = store.servers.set_enabled(b.server_id, False)
    assert disabled.enabled is False
    assert [s.server_id for s in store.servers.list(enabled_only=True)] == [a.server_id, c.server_id]


def test_unknown_servers_are_none_or_not_found(store: Store) -> None:
    assert store.servers.get("srv_missing") is None
    assert store.servers.get_by_name("no/such") is None
    with pytest.raises(NotFound):
        store.servers.set_enabled("srv_missing", True)
    with pytest.raises(NotFound):
        store.values.env_values("srv_missing")


@pytest.mark.parametrize("keyring_works", [True, False], ids=["keyring", "key-file"])
def test_a_restarted_store_decrypts_values_written_before(
    data_dir: Path, backend: MemoryKeyring, keyring_works: bool, database_url: str | None
) -> None:
    def open_vault() -> Vault:
        return Vault.open(data_dir, keyring_backend=backend if keyring_works else fail.Keyring())

    first = Store.for_data_dir(data_dir, open_vault(), database_url)
    server = install(first)
    first.close()
    with Store.for_data_dir(data_dir, open_vault(), database_url) as second:
        assert second.values.env_values(server.server_id)["API_KEY"].reveal() == "key-123456"


def test_a_store_with_another_key_raises_store_error_without_the_plaintext(
    data_dir: Path, store: Store, database_url: str | None
) -> None:
    canary = "canary-" + uuid.uuid4().hex
    server = install(store, env={"API_KEY": (canary, True)})
    store.close()
    stranger = Vault.open(data_dir / "other", keyring_backend=MemoryKeyring())
    with Store.for_data_dir(data_dir, stranger, database_url) as wrong, pytest.raises(StoreError) as info:
        wrong.values.env_values(server.server_id)
    assert info.value.key == "API_KEY" and server.server_id in info.value.message
    assert canary not in repr(info.value) and canary not in str(info.value)


def test_database_errors_become_store_errors_without_values(store: Store) -> None:
    with store.database.engine.begin() as conn:
        conn.execute(text("DROP TABLE mcp_client_env"))
    probe = "PROBE_" + uuid.uuid4().hex  # an env key name: it is a statement parameter
    with pytest.raises(StoreError) as info:
        install(store, env={probe: ("value", True)})
    assert info.value.message.startswith("Could not install io.github.example/weather")
    assert probe not in str(info.value)
    cause = info.value.__cause__
    assert cause is not None and probe not in str(cause)  # the engine hides statement parameters
    assert row_counts_servers(store) == 0


def row_counts_servers(store: Store) -> int:
    with store.database.engine.connect() as conn:
        return conn.execute(text("SELECT COUNT(*) FROM mcp_servers")).scalar_one()


def test_a_closed_store_refuses_to_work(store: Store) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.servers.list()


def test_an_in_memory_database_works_for_throwaway_stores() -> None:
    with Store("sqlite://", Vault.in_memory()) as store:
        server = install(store)
        assert store.values.env_values(server.server_id)["REGION"].reveal() == "eu-west-1"


def test_a_bad_database_url_is_a_store_error(vault: Vault) -> None:
    with pytest.raises(StoreError):
        Store("not a url", vault)
    with pytest.raises(StoreError):
        Store("nosuchdialect://x", vault)


def test_the_head_constant_is_alembics_head_so_a_current_database_skips_alembic(
    data_dir: Path, vault: Vault, database_url: str | None
) -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD_REVISION
    with Store.for_data_dir(data_dir, vault, database_url) as store:
        assert store.database.current_revision() == HEAD_REVISION


# --- key rotation (mcp-setup key rotate) ----------------------------------------------


@pytest.fixture
def team_key(tmp_path: Path) -> Path:
    path = tmp_path / "team.key"
    Vault.in_memory().export_key(path)
    return path


def env_blobs(store: Store) -> dict[int, bytes]:
    with store.database.engine.connect() as conn:
        return dict(conn.execute(text("SELECT id, value_encrypted FROM mcp_client_env")).all())


def test_rotating_the_key_re_encrypts_every_value_and_every_new_process_decrypts_them(
    data_dir: Path, team_key: Path, database_url: str | None
) -> None:
    from app.cli.team import rotate_data_key

    old = Vault.from_key_file(team_key)
    with Store.for_data_dir(data_dir, old, database_url) as store:
        servers = [install(store, "a/one"), install(store, "b/two", env={"X": ("x-value", True)})]
        before = env_blobs(store)
        count, new = rotate_data_key(old, store)
        assert count == 3
        after = env_blobs(store)
        assert after.keys() == before.keys() and all(after[i] != before[i] for i in before)
        assert store.values.env_values(servers[1].server_id)["X"].reveal() == "x-value"  # the store uses the new key
    with pytest.raises(StoreError):
        old.decrypt(next(iter(after.values())))
    with Store.for_data_dir(data_dir, Vault.from_key_file(team_key), database_url) as again:  # a new process
        assert again.values.env_values(servers[0].server_id)["API_KEY"].reveal() == "key-123456"
        assert again.values.env_values(servers[1].server_id)["X"].reveal() == "x-value"


@pytest.mark.parametrize("failure", ["database", "undecryptable-value"])
def test_a_rotation_that_fails_midway_leaves_every_value_and_the_key_as_they_were(
    data_dir: Path, team_key: Path, database_url: str | None, failure: str
) -> None:
    from app.cli.team import rotate_data_key

    vault = Vault.from_key_file(team_key)
    key_before = team_key.read_bytes()
    with Store.for_data_dir(data_dir, vault, database_url) as store:
        servers = [install(store, "a/one"), install(store, "b/two"), install(store, "c/three")]
        if failure == "undecryptable-value":  # stored by a machine with another key (which cannot audit: a value)
            strange = install(store, "z/stranger")
            with Store.for_data_dir(data_dir, Vault.in_memory(), database_url) as stranger:
                stranger.values.set_env_value(strange.server_id, "API_KEY", "key-123456", True)
        before = env_blobs(store)
        updates: list[str] = []
        dbapi_error = store.database.engine.dialect.dbapi.OperationalError

        def fail_third_update(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.lstrip().upper().startswith("UPDATE MCP_CLIENT_ENV"):
                updates.append(statement)
                if failure == "database" and len(updates) == 3:
                    raise dbapi_error("connection lost")

        event.listen(store.database.engine, "before_cursor_execute", fail_third_update)
        with pytest.raises(StoreError) as info:
            rotate_data_key(vault, store)
        event.remove(store.database.engine, "before_cursor_execute", fail_third_update)
        assert len(updates) >= 2  # it failed midway, after some values were rewritten
        if failure == "undecryptable-value":
            assert "z/stranger" in info.value.message and "MCP_SETUP_DATA_KEY_FILE" in info.value.message
        assert "key-123456" not in str(info.value) and "key-123456" not in repr(info.value.__cause__)
        assert env_blobs(store) == before
        assert team_key.read_bytes() == key_before
        for server in servers:
            assert store.values.env_values(server.server_id)["API_KEY"].reveal() == "key-123456"


def test_the_tools_left_out_at_install_are_stored_with_it_and_an_update_keeps_them(store: Store) -> None:
    """#29 item 10: in the install's own transaction (audited), and carried to the version replacing it."""
    tools = [{"name": "forecast", "description": "d"}, {"name": "alerts", "description": "d"}]
    old = install(store, tools=tools, hidden_tools=["alerts"], installed_by="user:web")
    assert store.pins.offers()[old.server_id].hidden_tools == {"alerts"}
    assert [(e.event, e.actor) for e in store.audit.entries(server_id=old.server_id)] == [
        ("installed", "user:web"),
        ("tools_hidden", "user:web"),
    ]
    new = install(store, tools=tools, version="2.0.0", replaces=old.server_id)
    assert store.pins.offers()[new.server_id].hidden_tools == {"alerts"} and store.servers.get(old.server_id) is None
