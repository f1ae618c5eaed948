"""Issue 26 items 2–5: search finds what people ask for, over the real registry data.

The query table is what a person types (a service name, a task in two or three words, a
category) with the server that should come first, checked over the real entries (the
official fake serving the production sample, plus every fixture file as a local catalog),
and over the local catalog alone. Queries with no right server in the data answer nothing,
or only partial matches that never claim the missing word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry_clients import official as official_module
from registry_clients.hub import RegistryHub
from registry_clients.local import LocalCatalog
from registry_clients.official import OfficialRegistry
from registry_clients.ranking import rank, stem
from registry_clients.smithery import SmitheryRegistry
from tests.conftest_registry import SAMPLE_FILES, load_fixture
from tests.fakes.smithery_registry import DEFAULT_API_KEY, FakeSmitheryRegistry

pytestmark = pytest.mark.anyio

#: (query, the server expected first, or a tuple of equally right ones).
QUERIES = [
    # a service name
    ("slack", "io.github.stevenvo/slack-mcp-server"),
    ("airtable", "io.github.domdomegg/airtable-mcp-server"),
    ("stripe", "io.github.atharvagupta2003/mcp-stripe"),
    ("kubernetes", "io.github.flux159/mcp-server-kubernetes"),
    ("playwright", "io.github.executeautomation/mcp-playwright"),
    ("jira", "io.github.sooperset/mcp-atlassian"),  # only its description names Jira
    ("mongodb", "io.github.mongodb-js/mongodb-mcp-server"),
    ("youtube", "io.github.zubeidhendricks/youtube-mcp-server"),
    ("spotify", "io.github.varunneal/spotify-mcp"),
    ("docker", "io.github.ckreiling/mcp-server-docker"),
    ("figma", "io.github.glips/figma-context-mcp"),
    ("redis", "io.github.gongrzhe/redis-mcp-server"),
    ("mysql", "io.github.designcomputer/mysql_mcp_server"),
    ("weather", "io.github.isdaniel/mcp_weather_server"),
    ("github", "io.github.ko1ynnky/github-actions-mcp-server"),
    ("mcp-server-github", "io.github.ko1ynnky/github-actions-mcp-server"),
    ("postgres mcp", "io.github.cloudquery/mcp"),  # no name holds "postgres": the description does
    # a task in two or three words
    ("browser automation", "io.github.executeautomation/mcp-playwright"),  # "automate Browsers"
    ("fetch web page", "com.pulsemcp.servers/pulse-fetch"),  # fetch in the name, "web pages" described
    ("web search", "io.github.conechoai/openai-websearch-mcp"),
    ("current time", "io.github.domdomegg/time-mcp-nuget"),
    ("send email", "live.alpic.staging.send-email-mcp-04d3fdca/send-email-mcp"),
    ("calendar events", "io.github.nspady/google-calendar-mcp"),
    ("jira issues", "io.github.sooperset/mcp-atlassian"),  # the rare word weighs more than "issues"
    ("github issues", "io.github.ko1ynnky/github-actions-mcp-server"),
    ("database queries", "capital.hove/read-only-local-mysql-mcp-server"),
    (
        "kubernetes cluster management",
        ("io.github.flux159/mcp-server-kubernetes", "io.github.yanmxa/multicluster-mcp-server"),
    ),
    ("read files", "io.github.huoshuiai42/huoshui-file-search"),
    ("translate text", "io.github.SamYuan1990/i18n-agent-action"),
    # a category
    ("filesystem", "io.github.mark3labs/mcp-filesystem-server"),
    ("memory", "io.github.basicmachines-co/basic-memory"),
    ("payments", "io.github.Abraxas1010/agent-payment-mcp"),
    ("maps", "io.github.mfukushim/map-traveler-mcp"),
    ("linear", "app.linear/linear"),
    ("time", "io.github.domdomegg/time-mcp-nuget"),
    ("notion", "io.github.v-3/notion-server"),
]

#: Queries with no server in the data: nothing comes back.
NOTHING = ["xyzzy frobnicate", "sqlite", "quantum teleportation"]


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    for i, name in enumerate(SAMPLE_FILES):
        (folder / f"{i}.json").write_text(json.dumps(load_fixture(name)))
    return folder


@pytest.mark.parametrize(("query", "first"), QUERIES)
async def test_the_right_server_comes_first_over_official_and_local_together(
    official_fake, everything, query, first
) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": LocalCatalog(everything)})
    try:
        page = await hub.search(query, 1, 10)
    finally:
        await hub.aclose()
    assert page.servers and page.servers[0].qualified_name in _right(first)


def _right(first: str | tuple[str, ...]) -> tuple[str, ...]:
    return first if isinstance(first, tuple) else (first,)


@pytest.mark.parametrize(("query", "first"), QUERIES)
async def test_the_right_server_comes_first_in_the_local_catalog(everything, query, first) -> None:
    page = await LocalCatalog(everything).search(query, 1, 10)
    assert page.servers and page.servers[0].qualified_name in _right(first)


@pytest.mark.parametrize("query", NOTHING)
async def test_a_query_that_no_server_answers_finds_nothing(official_fake, everything, query) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": LocalCatalog(everything)})
    try:
        page = await hub.search(query, 1, 10)
    finally:
        await hub.aclose()
    assert (page.servers, page.total_pages) == ([], 0)


async def test_words_match_across_fields_and_servers_with_all_words_come_before_most(everything) -> None:
    page = await LocalCatalog(everything).search("browser automation", 1, 100)
    names = [s.qualified_name for s in page.servers]
    both = names.index("io.github.executeautomation/mcp-playwright")  # name: neither; description: both
    one = names.index("io.github.co-browser/browser-use-mcp-server")  # name: browser only
    assert both == 0 and one > both
    assert {"io.github.browserstack/mcp-server", "io.github.apify/mcp-server-rag-web-browser"} <= set(names)


async def test_a_query_with_a_word_no_server_holds_still_returns_the_partial_matches(everything) -> None:
    page = await LocalCatalog(everything).search("brave search", 1, 10)
    assert page.servers, "some words match: never nothing"
    assert all("brave" not in (s.qualified_name + s.description).lower() for s in page.servers)
    assert all("search" in (s.qualified_name + s.description).lower() for s in page.servers)


def test_words_match_their_stems() -> None:
    assert stem("browsers") == stem("browser") == stem("browse")
    assert stem("automation") == stem("automate") == stem("automated")
    assert stem("pages") == stem("page") and stem("fetching") == stem("fetch")


async def test_pages_of_a_broad_query_never_repeat_or_skip_a_name_and_total_pages_is_stable(
    official_fake, everything
) -> None:
    """Item 4: "mcp" over official+local at 10 a page (it showed 6 names twice, 6 never)."""
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": LocalCatalog(everything)})
    try:
        first = await hub.search("mcp", 1, 10)
        pages = [first] + [await hub.search("mcp", p, 10) for p in range(2, first.total_pages + 2)]
        whole = await hub.search("mcp", 1, 100)
        wholes = [whole] + [await hub.search("mcp", p, 100) for p in range(2, whole.total_pages + 1)]
    finally:
        await hub.aclose()
    names = [s.qualified_name for page in pages for s in page.servers]
    everyone = [s.qualified_name for page in wholes for s in page.servers]
    assert len(names) == len(set(names)) > 100
    assert names == everyone  # the same ranking, cut into pages of 10 or of 100
    assert {p.total_pages for p in pages} == {first.total_pages} and pages[-1].servers == []
    catalog = await LocalCatalog(everything).search("mcp", 1, 100)
    assert first.total_pages >= catalog.total_pages * 10 - 9


async def test_a_broad_query_is_fetched_once_and_pages_come_from_the_cached_ranking(official_fake, everything) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": LocalCatalog(everything)})
    try:
        await hub.search("mcp", 1, 10)
        asked = len(official_fake.requests)
        for p in (2, 3, 7):
            await hub.search("mcp", p, 10)
    finally:
        await hub.aclose()
    assert asked >= 1 and len(official_fake.requests) == asked


async def test_smitherys_semantic_answers_are_kept_and_blended_with_ours(official_fake, everything) -> None:
    """Item 3: Smithery's q is a prompt; its answers may share no word with the query."""
    with FakeSmitheryRegistry(answers={"browser automation": ["exa", "smithery-ai/github", "@acme/weather"]}) as fake:
        hub = RegistryHub(
            {
                "official": OfficialRegistry(official_fake.url),
                "local": LocalCatalog(everything),
                "smithery": SmitheryRegistry(fake.url, api_key=DEFAULT_API_KEY),
            }
        )
        try:
            page = await hub.search("browser automation", 1, 10)
            alone = await hub.search("browser automation", 1, 10, source="smithery")
        finally:
            await hub.aclose()
    names = [s.qualified_name for s in page.servers]
    assert {"exa", "smithery-ai/github", "@acme/weather"} <= set(names)  # 3 answers, 3 shown
    assert names.index("exa") < names.index("@acme/weather")  # Smithery's own order is kept
    assert names[0] in ("io.github.executeautomation/mcp-playwright", "exa")  # the two orders' firsts lead
    assert [s.qualified_name for s in alone.servers] == ["exa", "smithery-ai/github", "@acme/weather"]


def test_a_semantic_order_and_ours_are_blended_by_reciprocal_rank(everything) -> None:
    from registry_clients.serverjson import parse_server_json

    servers = [parse_server_json(d, source="local").summary() for d in load_fixture("seed_2025-09-29.json")]
    lexical = [s.qualified_name for s in rank(servers, "browser automation")]
    stranger = next(s.qualified_name for s in servers if s.qualified_name not in lexical)
    blended = [s.qualified_name for s in rank(servers, "browser automation", semantic={stranger: 0, lexical[0]: 1})]
    assert blended[0] == lexical[0]  # first in ours, second in theirs
    assert blended[1] == stranger  # first in theirs only, ahead of our second
    assert set(blended) == set(lexical) | {stranger}


async def test_the_official_client_sends_each_word_and_pages_only_the_most_selective(
    official_fake, monkeypatch
) -> None:
    """Item 5: "time github" asks search=time and search=github at once, then pages "time"
    (2 names) to its end and never pages "github" (49 names) beyond its first page."""
    monkeypatch.setattr(official_module, "_UNION_PAGE", 5)
    registry = OfficialRegistry(official_fake.url)
    try:
        page = await registry.search("time github", 1, 10)
    finally:
        await registry.aclose()
    asked = [(r.query.get("search"), r.query.get("cursor")) for r in official_fake.requests]
    assert {q for q, _ in asked} == {"time", "github"}
    assert [c for q, c in asked if q == "github"] == [None]  # one page of the unselective word
    names = [s.qualified_name for s in page.servers]
    assert names[:2] == ["io.github.domdomegg/time-mcp-nuget", "io.github.domdomegg/time-mcp-pypi"]
    assert len(names) > 2  # the other word's first page is kept: servers with some of the words
