"""Whether an installed server may ask the person's AI to write text: stored per server, the
default "without tools", kept by an update, changed with an audit row that names who changed
it, and read alike by the store and the stdlib reader behind the read-only commands. Runs on
SQLite and PostgreSQL (the ``database_url`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from setup_agent.errors import InvalidInput, NotFound
from setup_agent.secrets.vault import Vault
from setup_agent.store import read_sqlite_servers
from setup_agent.store.database import DB_FILE_NAME, Store
from setup_agent.store.records import InstalledServer


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    with Store.for_data_dir(tmp_path / "data", Vault.in_memory(), database_url) as s:
        yield s


def _install(store: Store, **more: Any) -> InstalledServer:
    return store.servers.install(
        qualified_name="io.test/writer",
        source="local",
        version=more.pop("version", "1"),
        package_type="stdio",
        launch_spec={"command": "writer"},
        installed_by="agent",
        tools_hash="x",
        env={},
        **more,
    )


def test_a_server_installed_without_a_choice_may_ask_for_text_without_tools(store: Store) -> None:
    server = _install(store)
    assert server.sampling == "text"
    assert store.servers.get(server.server_id).sampling == "text"  # type: ignore[union-attr]


def test_the_consents_choice_is_stored_and_an_update_keeps_it(store: Store) -> None:
    first = _install(store, sampling="no")
    update = _install(store, version="2", replaces=first.server_id)
    assert store.servers.get(update.server_id).sampling == "no"  # type: ignore[union-attr]


def test_a_change_is_audited_with_who_changed_it_and_the_counter_moves(store: Store) -> None:
    server = _install(store)
    before = store.database.change_counter()
    changed = store.servers.set_sampling(server.server_id, "tools", actor="user:web")
    assert changed.sampling == "tools" and store.servers.get(server.server_id).sampling == "tools"  # type: ignore[union-attr]
    assert store.database.change_counter() > before
    row = store.audit.entries(server_id=server.server_id)[-1]
    assert (row.event, row.actor, row.detail) == ("sampling", "user:web", "text -> tools")


def test_the_same_choice_again_changes_nothing_and_audits_nothing(store: Store) -> None:
    server = _install(store, sampling="tools")
    rows, counter = len(store.audit.entries()), store.database.change_counter()
    store.servers.set_sampling(server.server_id, "tools", actor="user:terminal")
    assert len(store.audit.entries()) == rows
    assert store.database.change_counter() == counter  # no process is told of a change
    assert store.servers.get(server.server_id).sampling == "tools"  # type: ignore[union-attr]


def test_an_unknown_choice_or_server_is_refused(store: Store) -> None:
    server = _install(store)
    with pytest.raises(InvalidInput):
        store.servers.set_sampling(server.server_id, "always", actor="user:web")  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        store.servers.set_sampling("srv_gone", "no", actor="user:web")


def test_the_stdlib_reader_reads_the_setting_as_the_store_does(tmp_path: Path) -> None:
    with Store.for_data_dir(tmp_path / "data", Vault.in_memory()) as store:
        server = _install(store)
        store.servers.set_sampling(server.server_id, "no", actor="user:terminal")
    (read,) = read_sqlite_servers(tmp_path / "data" / DB_FILE_NAME) or []
    assert read.sampling == "no"
