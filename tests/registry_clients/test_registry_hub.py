"""RegistryHub and build_sources: fan-out, failure isolation, timeouts, caching, get order."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from registry_clients import (
    Detail,
    LocalCatalog,
    OfficialRegistry,
    RegistryError,
    RegistryHub,
    RegistryNotFound,
    SearchPage,
    SmitheryRegistry,
    SourceError,
    Summary,
    build_sources,
)
from tests.fakes import closed_port_url
from tests.fakes.smithery_registry import DEFAULT_API_KEY
from tests.helpers.registry_fixtures import FakeClock
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

PVPC = "io.github.rfdez/pvpc-mcp-server"


@pytest.fixture
def catalog(tmp_path: Path) -> LocalCatalog:
    docs = [
        {"name": PVPC, "description": "LOCAL COPY of pvpc", "version": "9.9.9"},
        {"name": "com.acme/pvpc-private", "description": "private pvpc tariffs"},
    ]
    (tmp_path / "servers.json").write_text(json.dumps(docs))
    return LocalCatalog(tmp_path)


async def test_search_merges_sources_in_order_and_the_first_source_wins_a_duplicate(official_fake, catalog) -> None:
    local_first = RegistryHub({"local": catalog, "official": OfficialRegistry(official_fake.url)})
    official_first = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": catalog})
    try:
        a = await local_first.search("pvpc")
        b = await official_first.search("pvpc")
    finally:
        await local_first.aclose()
        await official_first.aclose()
    assert [(s.qualified_name, s.source) for s in a.servers] == [(PVPC, "local"), ("com.acme/pvpc-private", "local")]
    assert [(s.qualified_name, s.source) for s in b.servers] == [(PVPC, "official"), ("com.acme/pvpc-private", "local")]
    assert a.errors == b.errors == [] and a.total_pages == 1


class _Rendezvous:
    """Two in-memory sources that only answer if both are asked at the same time."""

    def __init__(self) -> None:
        self.started = {"a": anyio.Event(), "b": anyio.Event()}

    def source(self, me: str, other: str):
        rv = self

        class Source:
            name = me

            async def search(self, query, page, page_size):
                rv.started[me].set()
                with anyio.fail_after(scaled(5)):
                    await rv.started[other].wait()
                return SearchPage(
                    servers=[Summary(qualified_name=f"{me}/x", display_name=me, source=me)],
                    total_pages=page + (me == "b"),
                )

            async def get(self, qualified_name):
                raise RegistryNotFound("no", source=me)

            async def aclose(self):
                return None

        return Source()


async def test_search_asks_every_source_concurrently_and_a_source_that_only_repeats_itself_counts_as_ended() -> None:
    rv = _Rendezvous()
    hub = RegistryHub({"a": rv.source("a", "b"), "b": rv.source("b", "a")}, timeout=scaled(5))
    page = await hub.search(None, page=1, page_size=5)
    assert [s.qualified_name for s in page.servers] == ["a/x", "b/x"]
    assert page.total_pages == 1 and page.errors == []  # b claims more pages but gives nothing new


async def test_a_registry_that_is_down_is_named_in_errors_and_the_other_still_answers(official_fake, catalog) -> None:
    official_fake.down = True
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": catalog})
    try:
        page = await hub.search("pvpc")
    finally:
        await hub.aclose()
    assert {s.source for s in page.servers} == {"local"} and len(page.servers) == 2
    (error,) = page.errors
    assert error.source == "official" and "500" in error.message


async def test_a_refused_connection_is_named_in_errors_and_the_other_still_answers(catalog) -> None:
    hub = RegistryHub({"official": OfficialRegistry(closed_port_url()), "local": catalog})
    try:
        page = await hub.search("pvpc")
    finally:
        await hub.aclose()
    assert len(page.servers) == 2 and [e.source for e in page.errors] == ["official"]


async def test_a_slow_registry_is_cut_off_at_the_hub_timeout_and_the_other_still_answers(
    official_fake, catalog
) -> None:
    official_fake.latency = 30.0
    timeout = 0.5
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": catalog}, timeout=timeout)
    started = time.monotonic()
    try:
        page = await hub.search("pvpc")
    finally:
        elapsed = time.monotonic() - started
        await hub.aclose()
    # Cut off, not answered: the search came back before the slow registry would have (no speed
    # is asserted: on a busy machine the cut-off may come late, never after the answer).
    assert elapsed < official_fake.latency
    assert [s.source for s in page.servers] == ["local", "local"]
    (error,) = page.errors
    assert error.source == "official" and "did not answer within 0.5 s" in error.message
    assert len(official_fake.requests) == 1


async def test_a_repeated_search_is_answered_from_the_cache_until_the_ttl_passes(official_fake) -> None:
    clock = FakeClock()
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url)}, cache_ttl=60, timer=clock)
    try:
        first = await hub.search("pvpc", 1, 10)
        again = await hub.search(" pvpc ", 1, 10)
        assert len(official_fake.requests) == 1 and again == first
        clock.advance(61)
        await hub.search("pvpc", 1, 10)
        assert len(official_fake.requests) == 2
        await hub.search("pvpc", 1, 5)  # another page size is cut from the same cached chunk
        assert len(official_fake.requests) == 2
    finally:
        await hub.aclose()


async def test_details_are_cached_per_source(official_fake) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url)})
    try:
        one = await hub.get(PVPC)
        two = await hub.get(PVPC, source="official")
        one.packages.clear()  # callers get copies: mutating one does not poison the cache
        three = await hub.get(PVPC)
    finally:
        await hub.aclose()
    assert len(official_fake.requests) == 1
    assert two.version == "3.2.3" and len(three.packages) == 2


async def test_a_fresh_get_asks_the_registry_again_and_refreshes_the_cache(official_fake) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url)})
    try:
        await hub.get(PVPC)
        await hub.get(PVPC, fresh=True)  # "is there a newer version?" from a long-running face
        assert len(official_fake.requests) == 2
        await hub.get(PVPC)  # the fresh answer is what the cache holds now
        assert len(official_fake.requests) == 2
    finally:
        await hub.aclose()


async def test_get_without_a_source_returns_the_first_source_in_order_that_has_it(official_fake, catalog) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": catalog})
    try:
        private = await hub.get("com.acme/pvpc-private")
        shared = await hub.get(PVPC)
        local = await hub.get(PVPC, source="local")
        with pytest.raises(RegistryNotFound, match=r"tried official, local"):
            await hub.get("com.acme/nowhere")
    finally:
        await hub.aclose()
    assert (private.source, shared.source, local.source) == ("local", "official", "local")
    assert local.version == "9.9.9"


async def test_get_with_one_registry_down_still_finds_it_elsewhere_or_says_who_failed(official_fake, catalog) -> None:
    official_fake.down = True
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": catalog})
    try:
        assert (await hub.get("com.acme/pvpc-private")).source == "local"
        with pytest.raises(RegistryError, match="could not be asked") as info:
            await hub.get("com.acme/nowhere")
    finally:
        await hub.aclose()
    assert not isinstance(info.value, RegistryNotFound)


async def test_notes_are_always_appended_to_errors(catalog) -> None:
    note = SourceError(source="smithery", message="skipped, no API key")
    hub = RegistryHub({"local": catalog}, notes=[note])
    assert (await hub.search("pvpc")).errors == [note]
    assert (await hub.search("pvpc", source="local")).errors == [note]
    with pytest.raises(RegistryError, match="smithery: skipped, no API key"):
        await hub.search("pvpc", source="smithery")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"page": 0}, "page must be an integer ≥ 1"),
        ({"page_size": 0}, "page_size must be an integer from 1 to 100"),
        ({"page_size": 101}, "page_size must be an integer from 1 to 100"),
        ({"source": "github"}, "Unknown source 'github'; the configured sources are: local"),
    ],
)
async def test_invalid_paging_or_an_unknown_source_raise_value_error(catalog, kwargs, message) -> None:
    hub = RegistryHub({"local": catalog})
    with pytest.raises(ValueError, match=message):
        await hub.search("x", **kwargs)
    if "source" in kwargs:
        with pytest.raises(ValueError, match=message):
            await hub.get("a/b", source=kwargs["source"])


async def test_smithery_with_a_key_joins_the_fan_out_through_build_sources(
    official_fake, smithery_fake, tmp_path
) -> None:
    sources, notes = build_sources(
        ["official", "smithery", "local"],
        catalog_dir=tmp_path,
        official_url=official_fake.url,
        smithery_url=smithery_fake.url,
        smithery_api_key=DEFAULT_API_KEY,
    )
    hub = RegistryHub(sources, notes=notes)
    try:
        page = await hub.search("github", 1, 3)
        detail = await hub.get("smithery-ai/github")
    finally:
        await hub.aclose()
    assert notes == [] and page.errors == []
    assert {"official", "smithery"} <= {s.source for s in page.servers}
    assert detail.source == "smithery" and detail.packages[0].type == "remote"


def test_build_sources_follows_the_registries_rule(tmp_path: Path) -> None:
    sources, notes = build_sources(" Local , official,local,SMITHERY ", catalog_dir=tmp_path, smithery_api_key="k")
    assert list(sources) == ["local", "official", "smithery"] and notes == []
    assert isinstance(sources["local"], LocalCatalog) and isinstance(sources["official"], OfficialRegistry)
    assert isinstance(sources["smithery"], SmitheryRegistry)

    sources, notes = build_sources(["official", "smithery"], smithery_api_key=None)
    assert list(sources) == ["official"]
    (note,) = notes
    assert note.source == "smithery" and "no API key" in note.message and "MCP_SETUP_SMITHERY_API_KEY" in note.message

    with pytest.raises(ValueError, match="Unknown registry name.*glama.*official, smithery, local"):
        build_sources(["official", "glama"])
    with pytest.raises(ValueError, match="names no registry"):
        build_sources(" , ")
    with pytest.raises(ValueError, match="catalog directory"):
        build_sources(["local"])


async def test_a_failing_source_of_any_kind_does_not_sink_the_search(catalog) -> None:
    class Broken:
        name = "broken"

        async def search(self, query, page, page_size):
            raise KeyError("bug")

        async def get(self, qualified_name) -> Detail:
            raise KeyError("bug")

        async def aclose(self):
            raise RuntimeError("close failed")

    hub = RegistryHub({"broken": Broken(), "local": catalog})
    page = await hub.search("pvpc")
    assert len(page.servers) == 2 and page.errors == [SourceError(source="broken", message="broken failed (KeyError).")]
    assert (await hub.get("com.acme/pvpc-private")).source == "local"
    await hub.aclose()  # logged, not raised
