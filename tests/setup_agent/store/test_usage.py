"""When each tool was last used (``mcp_tool_use``): one batch per write, a later time never goes
back, only the newest rows kept, and the stdlib reader sees what the store wrote. On SQLite and
PostgreSQL (the ``database_url`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from setup_agent.secrets.vault import Vault
from setup_agent.store import SQLITE_FILE_NAME, read_sqlite_recent
from setup_agent.store.database import Store
from setup_agent.store.usage import KEPT

T0 = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Store]:
    s = Store.for_data_dir(tmp_path / "data", Vault.in_memory(), database_url)
    yield s
    s.close()


def test_the_tools_used_come_back_the_most_recent_first_with_when(store: Store) -> None:
    store.tool_use.record({"weather__forecast": T0, "github__create_issue": T0 + timedelta(seconds=5)})
    store.tool_use.record({"time__now": T0 + timedelta(seconds=2)})
    assert store.tool_use.newest_first() == [
        ("github__create_issue", T0 + timedelta(seconds=5)),
        ("time__now", T0 + timedelta(seconds=2)),
        ("weather__forecast", T0),
    ]


def test_an_earlier_use_written_later_does_not_move_a_tool_back(store: Store) -> None:
    """Two processes write their batches in any order: the later use of a tool wins."""
    store.tool_use.record({"weather__forecast": T0 + timedelta(minutes=1), "time__now": T0})
    store.tool_use.record({"weather__forecast": T0, "time__now": T0 + timedelta(minutes=2)})
    assert store.tool_use.newest_first() == [
        ("time__now", T0 + timedelta(minutes=2)),
        ("weather__forecast", T0 + timedelta(minutes=1)),
    ]


def test_only_the_newest_uses_are_kept(store: Store) -> None:
    store.tool_use.record({f"old__tool_{i}": T0 + timedelta(seconds=i) for i in range(KEPT)})
    store.tool_use.record({"new__tool": T0 + timedelta(hours=1)})
    names = [name for name, _ in store.tool_use.newest_first(limit=KEPT + 10)]
    assert len(names) == KEPT
    assert names[0] == "new__tool" and "old__tool_0" not in names and "old__tool_1" in names


def test_nothing_to_record_writes_nothing(store: Store) -> None:
    store.tool_use.record({})
    assert store.tool_use.newest_first() == []


def test_the_standard_library_reader_lists_them_as_the_store_does(tmp_path: Path) -> None:
    with Store.for_data_dir(tmp_path / "data", Vault.in_memory()) as store:
        store.tool_use.record({"a__x": T0, "b__y": T0 + timedelta(seconds=1)})
    assert read_sqlite_recent(tmp_path / "data" / SQLITE_FILE_NAME) == ["b__y", "a__x"]
    assert read_sqlite_recent(tmp_path / "nowhere" / SQLITE_FILE_NAME) == []
