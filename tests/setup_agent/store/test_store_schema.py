"""One schema definition (``setup_agent/store/schema.py``) behind the ORM store and the stdlib
readers of the read-only commands: every migration, then every reader against what the store wrote."""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import setup_agent.store as store_package
from setup_agent.gateway.offers import without_hidden
from setup_agent.secrets.vault import Vault
from setup_agent.store import catalog, records, schema
from setup_agent.store.catalog import (
    Catalog,
    read_sqlite_catalog,
    read_sqlite_counter,
    read_sqlite_hidden,
    read_sqlite_preference,
    read_sqlite_recent,
)
from setup_agent.store.database import Store
from setup_agent.store.models import Base
from setup_agent.store.records import newest_migration, read_sqlite_audit, read_sqlite_servers

READER_MODULES = (catalog, records)
TOOLS = [{"name": "echo", "description": "Echo text"}, {"name": "ask", "description": "Ask"}]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    data = tmp_path / "data"
    with Store.for_data_dir(data, Vault.in_memory()) as store:  # a fresh file: every migration runs
        yield store, data / "mcp-setup.db"


def _install(store: Store, name: str, **extra: object) -> str:
    return store.servers.install(
        qualified_name=name,
        source="official",
        version="1.0.0",
        package_type="npm",
        launch_spec={"transport": "stdio", "command": "npx", "args": [name]},
        installed_by="mcp:test",
        tools_hash="sha256:x",
        env={"API_KEY": ("secret-value-12345", True), "REGION": ("eu", False)},
        tools=TOOLS,
        **extra,  # type: ignore[arg-type]
    ).server_id


def _fill(store: Store) -> None:
    """Rows of every kind the readers read: servers in each state, settings, hidden tools,
    prompts, member keys and values, a removal, audit rows of many events."""
    first = _install(store, "io.test/first", title="First")
    second = _install(store, "io.test/second", member_keys=["API_KEY"], hidden_tools=["ask"])
    gone = _install(store, "io.test/gone")
    store.pins.set_tools(first, [*TOOLS, {"name": "new", "description": "A new tool"}])  # changed: held back
    store.servers.set_enabled(second, False, actor="user:test")
    store.servers.set_needs_sign_in(second, True)
    store.values.set_member_value(second, "alice", "API_KEY", "alice-value-123456")
    store.pins.set_offers(first, prompts=[{"name": "p"}], resources=[{"uri": "file:///a"}], templates=[])
    store.servers.remove(gone, actor="user:test")
    now = datetime.now(UTC)
    store.tool_use.record({"first__echo": now - timedelta(minutes=5), "second__ask": now})
    store.preferences.set("tools_budget", "6000", actor="user:test")


def test_the_migrations_make_exactly_the_tables_and_columns_the_schema_names(db: tuple[Store, Path]) -> None:
    store, path = db
    assert store.database.current_revision() == newest_migration()
    with sqlite3.connect(path) as conn:
        tables = {
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name.startswith("mcp_") and name != schema.VERSION_TABLE
        }
        assert tables == set(schema.TABLES)
        for name, table in schema.TABLES.items():
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({name})")]
            assert sorted(columns) == sorted(table.columns), name


def test_the_models_declare_exactly_the_schema_s_tables_and_columns() -> None:
    declared = {t.name: {c.name for c in t.columns} for t in Base.metadata.sorted_tables}
    assert declared == {name: set(table.columns) for name, table in schema.TABLES.items()}


def test_every_stdlib_reader_reads_what_the_orm_store_wrote_after_every_migration(db: tuple[Store, Path]) -> None:
    store, path = db
    _fill(store)
    readers = {name for name in store_package.__all__ if name.startswith("read_sqlite_")}
    assert readers == {
        "read_sqlite_servers",
        "read_sqlite_catalog",
        "read_sqlite_hidden",
        "read_sqlite_counter",
        "read_sqlite_audit",
        "read_sqlite_recent",
        "read_sqlite_preference",
    }, "a new stdlib reader is compared with the store here"

    servers = store.servers.list()
    assert read_sqlite_servers(path) == servers
    assert {s.tools_state for s in servers} == {"changed", "pinned"} and any(s.needs_sign_in for s in servers)

    offers = store.pins.offers()
    hidden = {sid: o.hidden_tools for sid, o in offers.items() if o.hidden_tools}
    assert read_sqlite_hidden(path) == hidden and hidden

    early = read_sqlite_catalog(path)
    assert early is not None
    expected = Catalog.build(without_hidden(s.catalog_entry(), offers) for s in servers)
    assert early.servers == expected.servers and early.signature() == expected.signature()

    assert read_sqlite_counter(path) == store.database.change_counter() > 0

    recent = read_sqlite_recent(path)
    assert recent == [name for name, _ in store.tool_use.newest_first()] == ["second__ask", "first__echo"]
    assert read_sqlite_preference(path, "tools_budget") == store.preferences.get("tools_budget") == "6000"
    assert read_sqlite_preference(path, "unset") is None

    audit = read_sqlite_audit(path)
    assert audit == (store.audit.entries(), store.audit.counts())
    assert read_sqlite_audit(path, limit=3) == (store.audit.entries(limit=3), store.audit.counts())
    assert {"installed", "removed", "tools_changed", "tools_hidden", "member_value_set"} <= set(audit[1])


def _named_columns(module: object) -> Iterator[tuple[str, str, int]]:
    """``(table, column, line)`` for every column a reader names through ``<TABLE>.select(...)``."""
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "select"):
            continue
        owner = node.func.value
        assert isinstance(owner, ast.Name) and hasattr(schema, owner.id), ast.unparse(node)
        table = getattr(schema, owner.id)
        names = list(node.args) + [kw.value for kw in node.keywords if kw.arg in ("where", "group_by", "order_by")]
        for arg in names:
            for const in ast.walk(arg):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    yield table.name, const.value.removesuffix(" DESC"), node.lineno
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):  # *_AUDIT_COLUMNS
                for assigned in ast.walk(tree):
                    if isinstance(assigned, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == arg.value.id for t in assigned.targets
                    ):
                        for const in ast.walk(assigned.value):
                            if isinstance(const, ast.Constant) and isinstance(const.value, str):
                                yield table.name, const.value, node.lineno


@pytest.mark.parametrize("module", READER_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_stdlib_reader_names_only_columns_the_schema_defines_and_writes_no_sql_of_its_own(module: object) -> None:
    named = list(_named_columns(module))
    assert named, "the readers build their SQL through schema.Table.select"
    unknown = [(t, c, line) for t, c, line in named if c not in schema.TABLES.get(t, schema.VERSIONS).columns]
    assert unknown == []
    source = Path(module.__file__).read_text()  # type: ignore[attr-defined]
    literals = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    assert not [s for s in literals if "SELECT " in s.upper() or any(t in s.split() for t in schema.TABLES)]


def test_a_select_that_names_a_column_the_table_lacks_is_refused() -> None:
    with pytest.raises(KeyError, match="mcp_servers has no column slugg"):
        schema.SERVERS.select("server_id", "slugg")
    with pytest.raises(KeyError, match="no column installed"):
        schema.SERVERS.select("server_id", order_by=("installed DESC",))
    assert schema.CHANGES.select("counter", where={"id": 1}) == (
        "SELECT counter FROM mcp_setup_changes WHERE id = ?",
        (1,),
    )
