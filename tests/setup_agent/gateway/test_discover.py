"""The tools used most recently (:class:`RecentTools`): a call costs no write, the uses collected
are written in one batch, a new process starts from what the store recorded, and a later use
wins wherever it was made."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from setup_agent.gateway import RecentTools
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)


class Ticking:
    """A clock one second further at each reading."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


class CountedWrites:
    """The store's record of uses, counting the writes made to it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.writes: list[dict[str, datetime]] = []

    def record(self, uses: Mapping[str, datetime]) -> None:
        self.writes.append(dict(uses))
        self.store.tool_use.record(uses)

    def newest_first(self, limit: int = 1000) -> list[tuple[str, datetime]]:
        return self.store.tool_use.newest_first(limit)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    yield s
    s.close()


async def test_calls_write_nothing_until_a_flush_writes_them_in_one_batch(store: Store) -> None:
    record = CountedWrites(store)
    recent = RecentTools(record, clock=Ticking(T0))
    for name in ("a__x", "b__y", "a__x", "c__z"):
        recent.used(name)
    assert record.writes == []
    assert recent.newest_first() == ["c__z", "a__x", "b__y"]
    await recent.flush()
    assert [sorted(w) for w in record.writes] == [["a__x", "b__y", "c__z"]]
    await recent.flush()  # nothing new: nothing written
    recent.used("b__y")
    await recent.flush(every=3600)  # too soon after the last one: kept for later
    assert len(record.writes) == 1
    await recent.flush()
    assert list(record.writes[-1]) == ["b__y"]


async def test_a_new_process_starts_from_the_uses_any_process_recorded(store: Store) -> None:
    first = RecentTools(store.tool_use, clock=Ticking(T0))
    first.used("a__x")
    first.used("b__y")
    await first.flush()
    later = RecentTools(store.tool_use, clock=Ticking(T0 + timedelta(minutes=5)))
    later.used("c__z")  # before it loaded: still the newest
    await later.load()
    assert later.newest_first() == ["c__z", "b__y", "a__x"]


async def test_a_use_recorded_elsewhere_after_this_process_used_a_tool_comes_first(store: Store) -> None:
    here = RecentTools(store.tool_use, clock=Ticking(T0))
    here.used("a__x")
    store.tool_use.record({"b__y": T0 + timedelta(minutes=1)})
    await here.load()
    assert here.newest_first() == ["b__y", "a__x"]


async def test_without_a_store_the_uses_are_this_processes_only() -> None:
    recent = RecentTools()
    recent.used("a__x")
    await recent.load()
    await recent.flush()
    assert recent.newest_first() == ["a__x"]
