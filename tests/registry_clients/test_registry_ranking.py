"""Search ranking over every real entry (local catalog and the hub), table-driven (issue 11 item 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry_clients.hub import RegistryHub
from registry_clients.local import LocalCatalog
from registry_clients.official import OfficialRegistry
from registry_clients.ranking import version_key
from registry_clients.spelling import Vocabulary, allowed, distance
from registry_clients.synonyms import alternatives, alternatives_of
from tests.helpers.registry_fixtures import SAMPLE_FILES, load_fixture

pytestmark = pytest.mark.anyio

RANKING = [
    # query, the names that must come first (equal ranks in source order)
    ("time", ["io.github.domdomegg/time-mcp-pypi", "io.github.domdomegg/time-mcp-nuget"]),
    ("slack", ["io.github.stevenvo/slack-mcp-server"]),
    ("postgres mcp", ["io.github.cloudquery/mcp"]),  # no name holds "postgres": the description does
    ("mcp-server-github", ["io.github.ko1ynnky/github-actions-mcp-server"]),  # tokens, any order
    ("github", ["io.github.ddukbg/github-enterprise-mcp", "io.github.ko1ynnky/github-actions-mcp-server"]),
    ("airtable", ["io.github.felores/airtable-mcp", "io.github.domdomegg/airtable-mcp-server"]),
]


@pytest.fixture
def everything(tmp_path: Path) -> Path:
    for i, name in enumerate(SAMPLE_FILES):
        (tmp_path / f"{i}.json").write_text(json.dumps(load_fixture(name)))
    return tmp_path


@pytest.mark.parametrize(("query", "first"), RANKING)
async def test_the_local_catalog_ranks_exact_prefix_token_title_then_description(everything, query, first) -> None:
    page = await LocalCatalog(everything).search(query, 1, 10)
    assert set([s.qualified_name for s in page.servers][: len(first)]) == set(first)  # ties keep source order


@pytest.mark.parametrize(("query", "first"), RANKING)
async def test_the_hub_ranks_official_and_local_together(official_fake, everything, query, first) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": LocalCatalog(everything)})
    try:
        page = await hub.search(query, 1, 10)
    finally:
        await hub.aclose()
    assert set([s.qualified_name for s in page.servers][: len(first)]) == set(first)  # ties keep source order


async def test_pages_of_official_and_local_together_are_disjoint_and_stable(official_fake, everything) -> None:
    hub = RegistryHub({"official": OfficialRegistry(official_fake.url), "local": LocalCatalog(everything)})
    try:
        pages = [await hub.search("mcp", p, 10) for p in (1, 2, 3)]
        again = await hub.search("mcp", 2, 10)
    finally:
        await hub.aclose()
    names = [s.qualified_name for page in pages for s in page.servers]
    assert len(names) == len(set(names)) and len(names) > 20
    assert again.servers == pages[1].servers


def test_versions_order_by_semver_with_releases_above_their_prereleases() -> None:
    assert version_key("1.0.3") > version_key("1.0.0") > version_key("1.0.0-alpha.3") > version_key("0.9")
    assert version_key("0.10.0") > version_key("0.9.9") > version_key("not a version")


async def test_the_local_catalog_keeps_the_highest_version_and_reads_server_json_one_level_down(tmp_path) -> None:
    docs = [d for d in load_fixture("servers_sample_2025-12-18.json") if d["server"]["name"] == "biz.icecat/mcp"]
    versions = sorted(d["server"]["version"] for d in docs)
    assert len(docs) > 1
    for d in docs:  # oldest sorts first by file name, as in the report
        (tmp_path / f"a-{d['server']['version']}.json").write_text(json.dumps(d))
    repo = tmp_path / "cloned-repo"
    repo.mkdir()
    (repo / "server.json").write_text(json.dumps(load_fixture("seed.json")[0]))
    catalog = LocalCatalog(tmp_path)
    assert (await catalog.get("biz.icecat/mcp")).version == max(versions, key=version_key)
    assert (await catalog.get(load_fixture("seed.json")[0]["name"])).source == "local"


def test_a_typo_is_counted_in_edits_and_a_swap_of_neighbours_is_one() -> None:
    assert distance("notoin", "notion", 2) == distance("githbu", "github", 2) == 1
    assert distance("postgress", "postgres", 2) == distance("mongdb", "mongodb", 2) == 1
    assert distance("playwrite", "playwright", 2) == 3  # past the limit: limit + 1
    assert distance("slack", "slack", 1) == 0


def test_a_longer_word_may_be_corrected_further_and_a_short_one_not_at_all() -> None:
    assert [allowed(w) for w in ("gh", "jra", "jria", "notoin", "postgress")] == [0, 0, 1, 1, 2]
    vocabulary = Vocabulary({"notion": 3.0, "motion": 1.0, "nation": 1.0})
    assert vocabulary.nearest("notoin", 1) == "notion"
    assert vocabulary.nearest("mution", 1) == "motion"
    assert vocabulary.nearest("naxoin", 1) is None  # two edits from "nation"
    assert vocabulary.nearest("nxtion", 1) == "notion"  # one edit from all three: the most preferred


def test_nicknames_stand_for_each_other_and_a_task_finds_the_services_one_way() -> None:
    assert "kubernetes" in alternatives("k8s") and "k8s" in alternatives("kubernetes")
    assert {"postgres", "postgresql"} <= set(alternatives("pg"))
    assert {"gmail", "outlook"} <= set(alternatives("emails"))  # by stem
    assert "outlook" not in alternatives("gmail")
    hacker, news = alternatives_of(["hacker", "news"])
    assert "hn" in hacker and "hn" in news  # "hacker news" written together is "hackernews"


async def test_a_server_that_says_the_word_comes_before_one_that_says_a_synonym(everything) -> None:
    page = await LocalCatalog(everything).search("kubernetes", 1, 20)
    names = [s.qualified_name for s in page.servers]
    assert names.index("io.github.flux159/mcp-server-kubernetes") < names.index("io.github.strowk/mcp-k8s-go")
    k8s = [s.qualified_name for s in (await LocalCatalog(everything).search("k8s", 1, 20)).servers]
    assert k8s[0] == "io.github.strowk/mcp-k8s-go" and "io.github.flux159/mcp-server-kubernetes" in k8s
