"""Search finds what people ask for, over the real registry data.

The query table is what a person types (a service name, a task in two or three words, a
category, a vendor's nickname, a typo) with the server that should come first, checked over
the real entries (the official fake serving the production sample, plus every fixture file as
a local catalog), over the local catalog alone, and through the official API's fake serving
the same data (it matches names only, like the real one). :data:`QUERIES` and :data:`TYPOS`
must each find their server; with :data:`TYPICAL` they make the rates measured below (the
misses are printed). Queries with no right server in the data answer nothing, or only
partial matches that never claim the missing word.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_clients import official as official_module
from registry_clients.hub import RegistryHub
from registry_clients.local import LocalCatalog
from registry_clients.models import SearchPage
from registry_clients.official import OfficialRegistry
from registry_clients.ranking import rank, stem
from registry_clients.smithery import SmitheryRegistry
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.fakes.smithery_registry import DEFAULT_API_KEY, FakeSmitheryRegistry
from tests.helpers.registry_fixtures import SAMPLE_FILES, load_fixture

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

#: More of what people type, counted in the rates (a miss fails no test alone).
TYPICAL = [
    # a service name, or a vendor's nickname
    ("k8s", ("io.github.strowk/mcp-k8s-go", "io.github.flux159/mcp-server-kubernetes")),
    (
        "gh",
        (
            "io.github.ko1ynnky/github-actions-mcp-server",
            "io.github.ddukbg/github-enterprise-mcp",
            "ai.smithery/smithery-ai-github",
        ),
    ),
    ("postgresql", ("io.github.cloudquery/mcp", "io.prisma/mcp")),  # descriptions only: no name holds it
    ("pg", ("io.github.cloudquery/mcp", "io.prisma/mcp")),
    (
        "mongo",
        (
            "io.github.kiliczsh/mcp-mongo-server",
            "io.github.mongodb-js/mongodb-mcp-server",
            "io.github.furey/mongodb-lens",
        ),
    ),
    ("gmail", ("io.github.gongrzhe/gmail-mcp-server", "io.github.baryhuang/mcp-headless-gmail")),
    ("outlook", "com.mintmcp/outlook-email"),
    ("microsoft teams", "ai.waystation/teams"),
    ("discord", "io.github.v-3/discordmcp"),
    ("twitter", "io.github.enescinr/twitter-mcp"),
    ("obsidian", ("io.github.calclavia/mcp-obsidian", "io.github.stevenstavrakis/obsidian-mcp")),
    ("grafana", "io.github.grafana/mcp-grafana"),
    ("hubspot", "io.github.buryhuang/mcp-hubspot"),
    ("salesforce", ("io.github.smn2gnt/mcp-salesforce", "io.github.lciesielski/mcp-salesforce-example")),
    ("shopify", "io.github.geli2001/shopify-mcp"),
    ("todoist", "io.github.abhiz123/todoist-mcp-server"),
    ("home assistant", ("io.github.tevonsb/homeassistant-mcp", "io.github.voska/hass-mcp")),
    ("bigquery", ("io.github.ergut/mcp-bigquery-server", "io.github.lucashild/mcp-server-bigquery")),
    ("hacker news", "io.github.wei/hn-mcp-server"),  # "HackerNews" in its description, "hn" in its name
    ("hn", "io.github.wei/hn-mcp-server"),
    ("yt", "io.github.zubeidhendricks/youtube-mcp-server"),
    ("hugging face", "co.huggingface/hf-mcp-server"),
    ("huggingface", "co.huggingface/hf-mcp-server"),
    ("google sheets", ("io.github.xing5/mcp-google-sheets", "io.github.rohans2/mcp-google-sheets")),
    ("excel", "io.github.haris-musa/excel-mcp-server"),
    ("powerpoint", "io.github.gongrzhe/office-powerpoint-mcp-server"),
    ("elasticsearch", "io.github.elastic/mcp-server-elasticsearch"),
    ("mssql", "io.github.jexinsam/mssql_mcp_server"),
    ("duckdb", "io.github.motherduckdb/mcp-server-motherduck"),
    ("neo4j", "io.github.da-okazaki/mcp-neo4j-server"),
    ("prometheus", "io.github.pab1it0/prometheus-mcp-server"),
    ("datadog", "io.github.geli2001/datadog-mcp-server"),
    ("paypal", "com.paypal.mcp/mcp"),
    ("confluence", "io.github.sooperset/mcp-atlassian"),
    ("cloudflare", "com.cloudflare/mcp-server-cloudflare"),
    ("xcode", ("com.xcodebuildmcp/XcodeBuildMCP", "io.github.shenghaiwang/xcodebuild")),
    ("s3", "io.github.aws-samples/sample-mcp-server-s3"),
    ("btc", "io.github.iworkist/btcmcp"),
    ("whatsapp", "com.infobip/mcp"),
    ("keycloak", "io.github.christophenglisch/keycloak-model-context-protocol"),
    # a task in two or three words
    ("web scraping", ("io.github.mendableai/firecrawl-mcp-server", "io.github.vrknetha/mcp-server-firecrawl")),
    ("read my emails", "com.mintmcp/outlook-email"),
    ("google calendar", ("io.github.nspady/google-calendar-mcp", "io.github.v-3/google-calendar")),
    ("bitcoin price", "io.github.iworkist/btcmcp"),
    ("crypto news", "io.github.kukapay/cryptopanic-mcp-server"),
    ("stock market data", ("io.github.calvernaz/alphavantage", "io.github.financial-datasets/mcp-server")),
    ("generate images", ("io.github.gongrzhe/image-generation-mcp-server", "io.github.felores/placid-mcp-server")),
    ("flight tracking", "io.github.sunsetcoder/flightradar24-mcp-server"),
    ("hotel booking", ("so.jinko/jinko-mcp", "travel.kismet/mcp-server")),
    (
        "task management",
        (
            "io.github.abhiz123/todoist-mcp-server",
            "io.github.alexarevalo9/ticktick-mcp-server",
            "io.github.taazkareem/clickup-mcp-server",
        ),
    ),
    ("python vulnerability scanning", "io.github.andrasfe/vulnicheck"),
    ("execute code", "io.github.bazinga012/mcp_code_executor"),
    ("academic articles", "io.github.adityak74/mcp-scholarly"),
    ("ios simulator", "io.github.inditextech/mcp-server-simulator-ios-idb"),
    ("game engine", ("io.github.coding-solo/godot-mcp", "io.github.codergamester/mcp-unity")),
    ("football data", "io.github.yeonupark/mcp-soccer-data"),
    ("phone calls", "app.getdialer/dialer"),
    ("send notifications", ("io.github.ashiknesin/pushover-mcp", "io.github.gitmotion/ntfy-me-mcp")),
    # a category
    ("bookmarks", "io.github.hiromitsusasaki/raindrop-io-mcp-server"),
    ("diagrams", "io.github.cmd8/excalidraw-mcp"),
    ("charts", "io.github.gongrzhe/quickchart-mcp-server"),
    (
        "observability",
        (
            "io.github.dynatrace-oss/dynatrace-mcp",
            "io.github.arize-ai/phoenix",
            "io.github.grafana/mcp-grafana",
            "io.github.geli2001/datadog-mcp-server",
        ),
    ),
    ("spreadsheets", ("io.github.xing5/mcp-google-sheets", "io.github.haris-musa/excel-mcp-server")),
    ("markdown", "io.github.zcaceres/mcp-markdownify-server"),
]

#: Typos: (what was typed, the query as read, the server expected first). Each must find it.
TYPOS = [
    ("notoin", "notion", "io.github.v-3/notion-server"),
    ("githbu", "github", ("io.github.ko1ynnky/github-actions-mcp-server", "io.github.ddukbg/github-enterprise-mcp")),
    ("postgress", "postgres", ("io.github.cloudquery/mcp", "io.prisma/mcp")),
    ("slakc", "slack", "io.github.stevenvo/slack-mcp-server"),
    ("spotfiy", "spotify", "io.github.varunneal/spotify-mcp"),
    ("wheather", "weather", "io.github.isdaniel/mcp_weather_server"),
    ("playwrigth", "playwright", "io.github.executeautomation/mcp-playwright"),
    ("airtabel", "airtable", "io.github.domdomegg/airtable-mcp-server"),
    ("dokcer", "docker", "io.github.ckreiling/mcp-server-docker"),
    ("mongdb", "mongodb", "io.github.mongodb-js/mongodb-mcp-server"),
    ("calender events", "calendar events", "io.github.nspady/google-calendar-mcp"),
    ("jria issues", "jira issues", "io.github.sooperset/mcp-atlassian"),
]

#: Every query with the server expected first, for the rates.
EVERY = [*QUERIES, *TYPICAL, *((typed, first) for typed, _read, first in TYPOS)]

#: Queries with no server in the data: nothing comes back.
NOTHING = ["xyzzy frobnicate", "sqlite", "quantum teleportation"]


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    for i, name in enumerate(SAMPLE_FILES):
        (folder / f"{i}.json").write_text(json.dumps(load_fixture(name)))
    return folder


@pytest.fixture(scope="module")
def local(everything: Path) -> LocalCatalog:
    """The local catalog over :func:`everything`, read once for the module (it rereads only
    files that changed, and none do)."""
    return LocalCatalog(everything)


@pytest.fixture(scope="module")
def the_same_data_server() -> Iterator[FakeOfficialRegistry]:
    """The official API's fake serving every fixture file, the local catalog's data."""
    with FakeOfficialRegistry([entry for name in SAMPLE_FILES for entry in load_fixture(name)]) as fake:
        yield fake


@pytest.fixture
def the_same_data(the_same_data_server: FakeOfficialRegistry) -> Iterator[FakeOfficialRegistry]:
    the_same_data_server.reset()
    yield the_same_data_server
    the_same_data_server.reset()


@pytest.mark.parametrize(("query", "first"), [*QUERIES, *((typed, first) for typed, _read, first in TYPOS)])
async def test_the_right_server_comes_first_over_official_and_local_together(
    official_fake, local, query, first
) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": local})
    try:
        page = await hub.search(query, 1, 10)
    finally:
        await hub.aclose()
    assert page.servers and page.servers[0].qualified_name in _right(first)


def _right(first: str | tuple[str, ...]) -> tuple[str, ...]:
    return first if isinstance(first, tuple) else (first,)


@pytest.mark.parametrize(("query", "first"), [*QUERIES, *((typed, first) for typed, _read, first in TYPOS)])
async def test_the_right_server_comes_first_in_the_local_catalog(local, query, first) -> None:
    page = await local.search(query, 1, 10)
    assert page.servers and page.servers[0].qualified_name in _right(first)


def _misses(pages: list[SearchPage]) -> list[str]:
    return [
        f"{query!r}: {[s.qualified_name for s in page.servers[:3]]}, not {first}"
        for (query, first), page in zip(EVERY, pages)
        if not (page.servers and page.servers[0].qualified_name in _right(first))
    ]


def _rate(where: str, misses: list[str]) -> float:
    rate = 1 - len(misses) / len(EVERY)
    print(f"\n{where}: the right server first for {len(EVERY) - len(misses)} of {len(EVERY)} queries ({rate:.0%})")
    print("".join(f"  missed {miss}\n" for miss in misses), end="")
    return rate


async def test_nine_queries_in_ten_find_the_right_server_first_in_the_local_catalog(local) -> None:
    pages = [await local.search(query, 1, 10) for query, _first in EVERY]
    misses = _misses(pages)
    assert _rate("local catalog", misses) >= 0.9, misses
    # a query whose words are all in the data is searched as typed: no typo read into it
    without_typos = len(QUERIES) + len(TYPICAL)
    assert {q: p.did_you_mean for (q, _f), p in zip(EVERY[:without_typos], pages) if p.did_you_mean} == {}


async def test_eight_queries_in_ten_find_the_right_server_first_through_the_official_api(the_same_data) -> None:
    """The API matches names only: "jira", "web scraping" or a typo are found through the
    client's widened search (stems, synonyms, halves of a typo) and its ranking."""
    hub = RegistryHub({"official": OfficialRegistry(the_same_data.url)})
    try:
        pages = [await hub.search(query, 1, 10) for query, _first in EVERY]
    finally:
        await hub.aclose()
    misses = _misses(pages)
    assert _rate("official API", misses) >= 0.8, misses


@pytest.mark.parametrize(("typed", "read", "first"), TYPOS)
async def test_a_typo_is_read_as_the_nearest_word_and_said_back(local, typed, read, first) -> None:
    page = await local.search(typed, 1, 10)
    assert page.did_you_mean == [read]
    assert page.servers[0].qualified_name in _right(first)


async def test_a_search_that_finds_nothing_offers_the_name_it_may_have_meant(official_fake, local) -> None:
    """ "playwrite" is three edits from "playwright": too far to search in its place, near
    enough to offer, over both registries."""
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": local})
    try:
        page = await hub.search("playwrite", 1, 10)
        typo = await hub.search("notoin", 1, 10)
    finally:
        await hub.aclose()
    assert (page.servers, page.total_pages, page.did_you_mean) == ([], 0, ["playwright"])
    assert typo.did_you_mean == ["notion"] and typo.servers[0].qualified_name == "io.github.v-3/notion-server"


def _entry(name: str, description: str) -> dict[str, str]:
    return {"name": name, "description": description, "version": "1.0.0"}


async def test_a_word_some_server_holds_is_never_read_as_another(tmp_path) -> None:
    """Typo tolerance never pushes a right match down: "motion" is a word of the data, so it is
    searched as typed, though it is one edit from "notion" (a name, which weighs more)."""
    entries = [
        _entry("io.example/notion-server", "Notion pages and databases."),
        _entry("io.example/robot-planner", "Plans robot motion."),
        _entry("io.example/motion", "Motion graphics."),
    ]
    (tmp_path / "catalog.json").write_text(json.dumps(entries))
    catalog = LocalCatalog(tmp_path)
    motion = await catalog.search("motion", 1, 10)
    assert [s.qualified_name for s in motion.servers] == ["io.example/motion", "io.example/robot-planner"]
    assert motion.did_you_mean == []
    notoin = await catalog.search("notoin", 1, 10)
    assert [s.qualified_name for s in notoin.servers] == ["io.example/notion-server"]
    assert notoin.did_you_mean == ["notion"]


@pytest.mark.parametrize("query", NOTHING)
async def test_a_query_that_no_server_answers_finds_nothing(official_fake, local, query) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": local})
    try:
        page = await hub.search(query, 1, 10)
    finally:
        await hub.aclose()
    assert (page.servers, page.total_pages) == ([], 0)


async def test_words_match_across_fields_and_servers_with_all_words_come_before_most(local) -> None:
    page = await local.search("browser automation", 1, 100)
    names = [s.qualified_name for s in page.servers]
    both = names.index("io.github.executeautomation/mcp-playwright")  # name: neither; description: both
    one = names.index("io.github.co-browser/browser-use-mcp-server")  # name: browser only
    assert both == 0 and one > both
    assert {"io.github.browserstack/mcp-server", "io.github.apify/mcp-server-rag-web-browser"} <= set(names)


async def test_a_query_with_a_word_no_server_holds_still_returns_the_partial_matches(local) -> None:
    page = await local.search("brave search", 1, 10)
    assert page.servers, "some words match: never nothing"
    assert all("brave" not in (s.qualified_name + s.description).lower() for s in page.servers)
    assert all("search" in (s.qualified_name + s.description).lower() for s in page.servers)


def test_words_match_their_stems() -> None:
    assert stem("browsers") == stem("browser") == stem("browse")
    assert stem("automation") == stem("automate") == stem("automated")
    assert stem("pages") == stem("page") and stem("fetching") == stem("fetch")


async def test_pages_of_a_broad_query_never_repeat_or_skip_a_name_and_total_pages_is_stable(
    official_fake, local
) -> None:
    """Item 4: "mcp" over official+local at 10 a page (it showed 6 names twice, 6 never)."""
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": local})
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
    catalog = await local.search("mcp", 1, 100)
    assert first.total_pages >= catalog.total_pages * 10 - 9


async def test_a_broad_query_is_fetched_once_and_pages_come_from_the_cached_ranking(official_fake, local) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": local})
    try:
        await hub.search("mcp", 1, 10)
        asked = len(official_fake.requests)
        for p in (2, 3, 7):
            await hub.search("mcp", p, 10)
    finally:
        await hub.aclose()
    assert asked >= 1 and len(official_fake.requests) == asked


async def test_smitherys_semantic_answers_are_kept_and_blended_with_ours(official_fake, local) -> None:
    """Item 3: Smithery's q is a prompt; its answers may share no word with the query."""
    with FakeSmitheryRegistry(answers={"browser automation": ["exa", "smithery-ai/github", "@acme/weather"]}) as fake:
        hub = RegistryHub(
            {
                "official": OfficialRegistry(official_fake.url),
                "local": local,
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


async def test_the_official_client_asks_for_a_words_synonyms_at_once_and_ranks_with_descriptions(
    the_same_data,
) -> None:
    """The API matches names only: "jira" is in no name, but Atlassian's server says it."""
    registry = OfficialRegistry(the_same_data.url)
    try:
        page = await registry.search("jira", 1, 10)
    finally:
        await registry.aclose()
    assert {r.query.get("search") for r in the_same_data.requests} == {"jira", "atlassian"}
    assert page.servers[0].qualified_name == "io.github.sooperset/mcp-atlassian"


async def test_a_typo_over_the_official_client_asks_for_its_halves_in_one_more_round(the_same_data) -> None:
    registry = OfficialRegistry(the_same_data.url)
    try:
        page = await registry.search("notoin", 1, 10)
        again = await registry.search("notoin", 2, 10)
    finally:
        await registry.aclose()
    asked = [r.query.get("search") for r in the_same_data.requests]
    assert asked[0] == "notoin" and sorted(asked[1:]) == ["not", "oin"]  # "again" came from the cache
    assert page.did_you_mean == ["notion"]
    assert [s.qualified_name for s in page.servers] == [
        "io.github.v-3/notion-server",
        "io.github.suekou/mcp-notion-server",
    ]
    assert again.servers == [] and again.total_pages == page.total_pages == 1


async def test_the_widened_search_asks_for_ten_names_at_most(the_same_data) -> None:
    registry = OfficialRegistry(the_same_data.url)
    try:
        page = await registry.search("email chat database browser payments calendar", 1, 10)
    finally:
        await registry.aclose()
    asked = {r.query.get("search") for r in the_same_data.requests}
    assert len(asked) == official_module._TERMS
    assert {"mail", "chat", "databas", "brows", "payment", "calendar"} <= asked  # each word's own name first
    assert page.servers


async def test_the_search_tool_says_did_you_mean_only_when_a_typo_was_read(
    new_runtime, everything, tmp_path, memory_keyring
) -> None:
    from app.settings import Settings
    from setup_agent.setup.service import CallContext

    runtime = new_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=everything), keyring_backend=memory_keyring
    )
    try:
        typo = await runtime.service.call("mcp_setup_search", {"query": "notoin"}, CallContext())
        right = await runtime.service.call("mcp_setup_search", {"query": "notion"}, CallContext())
    finally:
        await runtime.aclose()
    assert typo["ok"] is True and typo["did_you_mean"] == ["notion"]
    assert (
        typo["servers"][0]["qualified_name"] == right["servers"][0]["qualified_name"] == "io.github.v-3/notion-server"
    )
    assert "did_you_mean" not in right
