"""The person's gateway-wide settings (``mcp_preferences``): saved once for every process, a
change bumps the change counter and is audited under who made it, the same value again writes
nothing; the stdlib reader sees it. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from setup_agent.secrets.vault import Vault
from setup_agent.store import SQLITE_FILE_NAME, TOOLS_BUDGET, read_sqlite_preference
from setup_agent.store.database import Store


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    s = Store.for_data_dir(tmp_path / "data", Vault.in_memory(), database_url)
    yield s
    s.close()


def test_a_saved_setting_is_read_back_announced_to_other_processes_and_audited(store: Store) -> None:
    assert store.preferences.get(TOOLS_BUDGET) is None
    before = store.database.change_counter()
    assert store.preferences.set(TOOLS_BUDGET, "5000", actor="user:web") is True
    assert store.preferences.get(TOOLS_BUDGET) == "5000"
    assert store.database.change_counter() == before + 1
    entry = store.audit.entries()[-1]
    assert (entry.event, entry.actor, entry.detail) == ("preference", "user:web", "tools_budget = 5000")
    assert store.audit.verify().broken == []


def test_saving_the_same_value_again_writes_nothing(store: Store) -> None:
    store.preferences.set(TOOLS_BUDGET, "5000", actor="user:web")
    counter, rows = store.database.change_counter(), len(store.audit.entries())
    assert store.preferences.set(TOOLS_BUDGET, "5000", actor="user:web") is False
    assert (store.database.change_counter(), len(store.audit.entries())) == (counter, rows)
    assert store.preferences.set(TOOLS_BUDGET, "6000", actor="user:terminal") is True
    assert store.preferences.get(TOOLS_BUDGET) == "6000"


def test_the_standard_library_reader_sees_the_saved_value(tmp_path: Path) -> None:
    db = tmp_path / "data" / SQLITE_FILE_NAME
    with Store.for_data_dir(tmp_path / "data", Vault.in_memory()) as store:
        assert read_sqlite_preference(db, TOOLS_BUDGET) is None
        store.preferences.set(TOOLS_BUDGET, "3000", actor="user:web")
    assert read_sqlite_preference(db, TOOLS_BUDGET) == "3000"
