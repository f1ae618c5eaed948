"""LocalCatalog: a folder of server.json files searched and read like a registry."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from registry_clients import LocalCatalog, RegistryNotFound, RegistrySource
from tests.helpers.registry_fixtures import load_fixture

pytestmark = pytest.mark.anyio


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    seed = load_fixture("seed.json")  # four plain ServerDetail docs (airtable twice)
    _write(tmp_path / "airtable.json", seed[1])
    _write(tmp_path / "time.json", [seed[2], seed[3]])
    _write(tmp_path / "wrapped.json", load_fixture("servers_sample_2025-12-18.json")[0])
    _write(
        tmp_path / "private.json",
        {
            "name": "com.acme/internal-wiki",
            "title": "Acme Wiki",
            "description": "Search the internal wiki.",
            "version": "2.0.0",
            "packages": [
                {
                    "registryType": "npm",
                    "identifier": "@acme/wiki-mcp",
                    "version": "2.0.0",
                    "transport": {"type": "stdio"},
                    "environmentVariables": [{"name": "WIKI_TOKEN", "isRequired": True}],
                }
            ],
        },
    )
    (tmp_path / "notes.txt").write_text("not a catalog file")
    return tmp_path


async def test_local_catalog_is_a_registry_source_named_local(catalog_dir: Path) -> None:
    catalog = LocalCatalog(catalog_dir)
    assert isinstance(catalog, RegistrySource) and catalog.name == "local"


async def test_search_matches_name_title_and_description_case_insensitively(catalog_dir: Path) -> None:
    catalog = LocalCatalog(catalog_dir)
    by_name = await catalog.search("TIME-MCP", 1, 10)
    assert sorted(s.qualified_name for s in by_name.servers) == [
        "io.github.domdomegg/time-mcp-nuget",
        "io.github.domdomegg/time-mcp-pypi",
    ]
    assert (await catalog.search("acme wiki", 1, 10)).servers[0].qualified_name == "com.acme/internal-wiki"
    by_description = await catalog.search("internal WIKI", 1, 10)
    assert [s.display_name for s in by_description.servers] == ["Acme Wiki"]
    assert all(s.source == "local" for s in by_name.servers)


async def test_search_pages_and_reports_total_pages(catalog_dir: Path) -> None:
    catalog = LocalCatalog(catalog_dir)
    everything = await catalog.search(None, 1, 100)
    assert len(everything.servers) == 5 and everything.total_pages == 1
    first, third = await catalog.search("", 1, 2), await catalog.search("", 3, 2)
    assert (len(first.servers), first.total_pages) == (2, 3)
    assert (len(third.servers), third.total_pages) == (1, 3)
    assert (await catalog.search("", 4, 2)).servers == []
    assert (await catalog.search("no-such-thing", 1, 10)).total_pages == 0


async def test_get_returns_the_detail_with_its_required_keys(catalog_dir: Path) -> None:
    detail = await LocalCatalog(catalog_dir).get("com.acme/internal-wiki")
    assert detail.source == "local" and detail.version == "2.0.0"
    (key,) = detail.required_keys()
    assert (key.name, key.secret, key.required) == ("WIKI_TOKEN", True, True)


async def test_get_of_an_unknown_name_raises_registry_not_found(catalog_dir: Path) -> None:
    with pytest.raises(RegistryNotFound) as info:
        await LocalCatalog(catalog_dir).get("com.acme/missing")
    assert info.value.source == "local" and "com.acme/missing" in str(info.value)


async def test_a_broken_file_is_skipped_with_a_warning_naming_it(
    catalog_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (catalog_dir / "broken.json").write_text("{ not json")
    _write(catalog_dir / "nameless.json", {"description": "no name"})
    with caplog.at_level(logging.WARNING, logger="registry_clients.local"):
        page = await LocalCatalog(catalog_dir).search(None, 1, 100)
    assert len(page.servers) == 5
    assert "broken.json" in caplog.text and "nameless.json" in caplog.text


async def test_changes_on_disk_show_up_on_the_next_call(catalog_dir: Path) -> None:
    catalog = LocalCatalog(catalog_dir)
    assert (await catalog.search("fresh", 1, 10)).servers == []
    _write(catalog_dir / "fresh.json", {"name": "com.acme/fresh", "description": "v1"})
    assert [s.description for s in (await catalog.search("fresh", 1, 10)).servers] == ["v1"]
    path = _write(catalog_dir / "fresh.json", {"name": "com.acme/fresh", "description": "version 2"})
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert [s.description for s in (await catalog.search("fresh", 1, 10)).servers] == ["version 2"]
    path.unlink()
    assert (await catalog.search("fresh", 1, 10)).servers == []


async def test_a_missing_directory_is_an_empty_catalog(tmp_path: Path) -> None:
    catalog = LocalCatalog(tmp_path / "nope")
    assert (await catalog.search(None, 1, 10)).servers == []
    with pytest.raises(RegistryNotFound):
        await catalog.get("a/b")


async def test_a_list_file_with_several_versions_keeps_the_one_marked_latest(tmp_path: Path) -> None:
    versions = [
        e
        for e in load_fixture("servers_sample_2025-12-18.json")
        if e["server"]["name"] == "io.github.rfdez/pvpc-mcp-server"
    ]
    assert len(versions) > 1
    _write(tmp_path / "all.json", versions)
    detail = await LocalCatalog(tmp_path).get("io.github.rfdez/pvpc-mcp-server")
    assert detail.version == "3.2.3"
    assert len((await LocalCatalog(tmp_path).search("pvpc", 1, 10)).servers) == 1


async def test_get_with_a_version_returns_that_older_document_and_an_absent_one_is_not_found(tmp_path: Path) -> None:
    versions = [
        e
        for e in load_fixture("servers_sample_2025-12-18.json")
        if e["server"]["name"] == "io.github.rfdez/pvpc-mcp-server"
    ]
    _write(tmp_path / "all.json", versions)
    catalog = LocalCatalog(tmp_path)
    assert (await catalog.get("io.github.rfdez/pvpc-mcp-server", version="3.2.2")).version == "3.2.2"
    with pytest.raises(RegistryNotFound, match="pvpc-mcp-server 9.9.9 is not in the local catalog"):
        await catalog.get("io.github.rfdez/pvpc-mcp-server", version="9.9.9")
