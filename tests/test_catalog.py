"""The gateway's names, catalog and store records: slugs, <slug>__<tool>, recorded tools, changes."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from setup_agent.secrets.vault import Vault
from setup_agent.store.catalog import (
    MAX_SLUG,
    MAX_TOOL_NAME,
    Catalog,
    CatalogServer,
    gateway_name,
    make_slug,
    names_too_long,
    read_sqlite_catalog,
)
from setup_agent.store.database import DB_FILE_NAME, Store
from tests.conftest import MemoryKeyring

TOOL_NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")


@pytest.mark.parametrize(
    ("qualified_name", "taken", "slug"),
    [
        ("io.github.acme/brave-search", (), "brave-search"),
        ("io.github.acme/Brave_Search", (), "brave-search"),
        ("com.example/notion", ("notion",), "notion-2"),
        ("com.example/notion", ("notion", "notion-2"), "notion-3"),
        ("weird/!!!", (), "server"),
        ("x/" + "a" * 40, (), "a" * MAX_SLUG),
        ("x/" + "a" * 40, ("a" * MAX_SLUG,), "a" * (MAX_SLUG - 2) + "-2"),
    ],
)
def test_a_slug_is_the_last_path_segment_made_unique(qualified_name: str, taken: tuple[str, ...], slug: str) -> None:
    assert make_slug(qualified_name, taken) == slug
    assert "_" not in slug and len(slug) <= MAX_SLUG


def test_a_tool_name_that_fits_is_kept_as_it_is() -> None:
    assert gateway_name("github", "create_issue") == "github__create_issue"


@pytest.mark.parametrize("tool", ["a tool with spaces", "emoji_🙂", "x" * 80, "a/b:c", "ünïcode"])
def test_every_gateway_name_fits_the_mcp_rules_and_is_deterministic(tool: str) -> None:
    name = gateway_name("a" * MAX_SLUG, tool)
    assert TOOL_NAME_RULE.match(name), name
    assert len(name) <= MAX_TOOL_NAME
    assert name == gateway_name("a" * MAX_SLUG, tool)
    assert name.startswith("a" * MAX_SLUG + "__")


def test_a_dot_is_mapped_and_every_name_fits_claude_codes_64_under_the_default_entry() -> None:
    name = gateway_name("a" * MAX_SLUG, "files.read")
    assert "." not in name and name == gateway_name("a" * MAX_SLUG, "files.read")
    tools = tuple({"name": n, "inputSchema": {"type": "object"}} for n in ("files.read", "x" * 80, "ok"))
    catalog = Catalog.build([CatalogServer("s", "io.x/" + "a" * 40, "a" * MAX_SLUG, None, True, tools)])
    assert all(len("mcp__mcp-setup__" + t["name"]) <= 64 for t in catalog.wire_tools())
    assert names_too_long(catalog, "claude-code", "mcp-setup") == []
    assert names_too_long(catalog, "claude-code", None) == ["x" * 80]  # one entry per server: its own names
    assert names_too_long(catalog, "cursor", None) == []  # no known rule: no warning


def test_tools_that_differ_only_in_replaced_characters_get_different_names() -> None:
    assert gateway_name("s", "a b") != gateway_name("s", "a_b")
    assert gateway_name("s", "a b") != gateway_name("s", "a:b")


def test_the_catalog_lists_only_enabled_servers_and_routes_by_gateway_name() -> None:
    tools = (
        {
            "name": "echo",
            "description": "Echo.",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        },
    )
    on = CatalogServer("srv_1", "io.x/one", "one", "One", True, tools)
    off = CatalogServer("srv_2", "io.x/two", "two", None, False, tools)
    catalog = Catalog.build([on, off])
    assert [t["name"] for t in catalog.wire_tools()] == ["one__echo"]
    wire = catalog.wire_tools()[0]
    assert wire["description"] == "[One] Echo."
    assert wire["annotations"] == {"readOnlyHint": True}
    entry = catalog.route("one__echo")
    assert entry is not None and entry.tool_name == "echo" and entry.server.server_id == "srv_1"
    assert catalog.route("two__echo") is None
    assert catalog.server("two") is off and catalog.server("io.x/one") is on and catalog.server("srv_2") is off


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.for_data_dir(tmp_path / "data", Vault.open(tmp_path / "data", keyring_backend=MemoryKeyring()))
    yield s
    s.close()


def _install(store: Store, name: str, tools: list[dict] | None = None):
    return store.servers.install(
        qualified_name=name,
        source="local",
        version="1",
        package_type="npm",
        launch_spec={"command": "npx"},
        installed_by="test",
        tools_hash="h",
        env={"API_KEY": ("value-123456789", True)},
        title="T",
        tools=tools,
    )


def test_install_gives_each_server_a_unique_slug_and_records_its_tools(store: Store) -> None:
    a = _install(store, "io.a/notion", [{"name": "search", "inputSchema": {"type": "object"}}])
    b = _install(store, "io.b/notion")
    assert (a.slug, b.slug) == ("notion", "notion-2")
    assert a.tools_recorded and [t["name"] for t in a.tools] == ["search"]
    assert not b.tools_recorded
    assert [t.name for t in store.servers.catalog().tools()] == ["notion__search"]


def test_every_change_bumps_the_counter_and_an_unchanged_tool_list_does_not(store: Store) -> None:
    heard: list[int] = []
    store.database.add_change_listener(lambda: heard.append(1))
    start = store.database.change_counter()
    server = _install(store, "io.a/x", [{"name": "t"}])
    assert store.database.change_counter() == start + 1
    assert store.pins.set_tools(server.server_id, [{"name": "t"}]) is False
    assert store.database.change_counter() == start + 1
    assert store.pins.set_tools(server.server_id, [{"name": "t"}, {"name": "u"}]) is True
    store.servers.set_enabled(server.server_id, False)
    store.servers.remove(server.server_id)
    assert store.database.change_counter() == start + 4
    assert len(heard) == 4


def test_the_stdlib_reader_sees_the_same_catalog_as_the_store(store: Store, tmp_path: Path) -> None:
    _install(store, "io.a/one", [{"name": "echo", "description": "d", "inputSchema": {"type": "object"}}])
    quick = read_sqlite_catalog(tmp_path / "data" / DB_FILE_NAME)
    assert quick is not None
    assert quick.wire_tools() == store.servers.catalog().wire_tools()
    assert read_sqlite_catalog(tmp_path / "missing.db") is None


def test_stored_secrets_of_every_server_are_known_for_redaction(store: Store) -> None:
    _install(store, "io.a/one")
    assert [(k, v.reveal()) for _sid, k, v in store.values.secret_values()] == [("API_KEY", "value-123456789")]


def test_upgrading_a_first_round_database_keeps_env_rows_and_gives_slugs(tmp_path: Path) -> None:
    """0001 → 0002 on SQLite with foreign keys on: no table rebuild may cascade-delete env rows."""
    from alembic import command
    from alembic.config import Config

    from setup_agent.store.database import MIGRATIONS_DIR

    data = tmp_path / "old"
    vault = Vault.open(data, keyring_backend=MemoryKeyring())
    first = Store.for_data_dir(data, vault)
    _install(first, "io.a/weather")
    _install(first, "io.b/weather")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with first.database.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0001_initial")
    first.close()
    with sqlite3.connect(data / DB_FILE_NAME) as raw:
        assert raw.execute("SELECT count(*) FROM mcp_client_env").fetchone() == (2,)
    again = Store.for_data_dir(data, vault)  # migrates to head
    try:
        servers = again.servers.list()
        assert sorted(s.slug for s in servers) == ["weather", "weather-2"]
        assert all(again.values.env_values(s.server_id)["API_KEY"].reveal() == "value-123456789" for s in servers)
        assert not any(s.tools_recorded for s in servers)
    finally:
        again.close()
