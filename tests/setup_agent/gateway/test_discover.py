"""The tools used most recently (:class:`RecentTools`): a call costs no write, the uses collected
are written in one batch, a new process starts from what the store recorded, and a later use
wins wherever it was made. What fits the context budget (:func:`within_budget`): the recent tools
first, then the room they leave filled by server in install order, never past the budget."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from setup_agent.gateway import Listing, RecentTools, estimated_tokens, within_budget
from setup_agent.secrets.vault import Vault
from setup_agent.store import Catalog
from setup_agent.store.catalog import CatalogServer
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


OWN = 1000  # tokens of the face's own tools, as the face passes them


def server(letter: str, *words: int) -> CatalogServer:
    """Server ``letter`` with a tool ``t<i>`` per entry of ``words``: its description that many words long."""
    tools = tuple(
        {"name": f"t{i}", "description": " ".join(["word"] * n), "inputSchema": {"type": "object"}}
        for i, n in enumerate(words)
    )
    return CatalogServer(f"srv_{letter}", f"io.test/{letter}", letter, f"Server {letter.upper()}", True, tools)


def cost(catalog: Catalog, *names: str) -> int:
    wire = {t["name"]: t for t in catalog.wire_tools()}
    return sum(estimated_tokens([wire[n]]) for n in names)


def spent(listing: Listing) -> int:
    """What the face's listing takes: its own tools, the installed ones listed and the pair's note."""
    return OWN + sum(estimated_tokens([t]) for t in listing.tools) + listing.note_tokens()


def names(listing: Listing) -> list[str]:
    return [t["name"] for t in listing.tools]


THREE = Catalog.build([server("a", *[20] * 6), server("b", *[20] * 6), server("c", *[20] * 6)])
#: Room for the note at its longest and eight of THREE's tools (they are all the same size), not nine.
EIGHT = OWN + Listing([], {"Server A": 6, "Server B": 6, "Server C": 6}).note_tokens() + cost(THREE, *["a__t0"] * 8)


def test_while_every_tool_fits_every_tool_is_listed_in_the_catalogs_order() -> None:
    everything = within_budget(THREE, OWN, 1_000_000, ["c__t5"])
    assert everything.tools == THREE.wire_tools() and everything.unlisted == {}
    assert within_budget(THREE, OWN, 0, []).tools == THREE.wire_tools()  # no budget


def test_past_the_budget_with_nothing_used_the_room_is_filled_by_server_in_install_order() -> None:
    listing = within_budget(THREE, OWN, EIGHT, [])
    assert names(listing) == [*(f"a__t{i}" for i in range(6)), "b__t0", "b__t1"]
    assert listing.unlisted == {"Server B": 4, "Server C": 6}
    assert spent(listing) <= EIGHT
    assert within_budget(THREE, OWN, EIGHT - 1, []).unlisted == {"Server B": 5, "Server C": 6}  # one fewer fits


def test_the_recent_tools_come_first_and_the_room_they_leave_is_filled_in_install_order() -> None:
    listing = within_budget(THREE, OWN, EIGHT, ["c__t4", "gone__t0", "a__t2"])
    assert names(listing) == ["c__t4", "a__t2", "a__t0", "a__t1", "a__t3", "a__t4", "a__t5", "b__t0"]
    assert listing.unlisted == {"Server B": 5, "Server C": 5}
    assert spent(listing) <= EIGHT


def test_a_tool_too_big_for_the_room_left_is_passed_over_for_the_next_that_fits() -> None:
    catalog = Catalog.build([server("a", 20, 400, 20), server("b", 20, 20)])
    room = OWN + Listing([], {"Server A": 3, "Server B": 2}).note_tokens() + cost(catalog, "a__t0", "a__t2", "b__t0")
    listing = within_budget(catalog, OWN, room, [])
    assert names(listing) == ["a__t0", "a__t2", "b__t0"]
    assert listing.unlisted == {"Server A": 1, "Server B": 1}


def test_a_server_installed_later_does_not_change_what_is_listed_only_what_the_note_counts() -> None:
    budget = EIGHT + cost(THREE, "a__t0") // 2  # room too for the longer note a fourth server makes
    before = within_budget(THREE, OWN, budget, ["c__t1"])
    later = Catalog.build([*THREE.servers, server("d", 5, 5)])
    after = within_budget(later, OWN, budget, ["c__t1"])
    assert names(after) == names(before)
    assert after.unlisted == {**before.unlisted, "Server D": 2}


def test_past_the_budget_the_listing_with_its_note_never_exceeds_it_and_the_note_counts_every_tool_left_out() -> None:
    catalog = Catalog.build([server(letter, *range(3, 60, 7)) for letter in "abcdefgh"])
    total = len(catalog.tools())
    budgets = range(OWN + 300, OWN + estimated_tokens(catalog.wire_tools()), 173)  # from room for the note alone
    assert len(budgets) > 10
    for budget in budgets:
        listing = within_budget(catalog, OWN, budget, ["h__t7", "a__t0"])
        assert spent(listing) <= budget
        assert len(listing.tools) + sum(listing.unlisted.values()) == total
        assert listing.note().startswith(f" {total - len(listing.tools)} more installed tool")
