"""OfficialRegistry against the fake official registry over real HTTP."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from registry_clients import OfficialRegistry, RegistryError, RegistryNotFound
from tests.fakes import FakeHTTPServer, closed_port_url
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


def _list_cursors(fake: FakeOfficialRegistry) -> list[str | None]:
    return [r.query.get("cursor") for r in fake.requests if r.path == "/v0.1/servers"]


async def test_search_by_name_returns_latest_versions_as_normalized_summaries(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        page = await registry.search("pvpc", 1, 10)
    finally:
        await registry.aclose()
    (summary,) = page.servers
    assert (summary.qualified_name, summary.version, summary.source) == (
        "io.github.rfdez/pvpc-mcp-server",
        "3.2.3",
        "official",
    )
    assert summary.package_types == ["npm"] and summary.remote is False
    assert page.total_pages == 1 and page.errors == []
    assert official_fake.requests[0].query == {"search": "pvpc", "limit": "10", "version": "latest"}


async def test_paging_forward_and_back_never_refetches_earlier_pages(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        p1 = await registry.search("io.github", 1, 5)
        p2 = await registry.search("io.github", 2, 5)
        p3 = await registry.search("io.github", 3, 5)
        back = await registry.search("io.github", 2, 5)
    finally:
        await registry.aclose()
    cursors = _list_cursors(official_fake)
    assert len(cursors) == 4 and cursors[0] is None
    assert cursors[3] == cursors[1]  # going back reused the remembered cursor of page 2
    assert len(set(cursors[:3])) == 3  # each forward step fetched one new page only
    names = [s.qualified_name for p in (p1, p2, p3) for s in p.servers]
    assert len(names) == len(set(names)) == 15
    assert [s.qualified_name for s in back.servers] == [s.qualified_name for s in p2.servers]
    assert (p1.total_pages, p2.total_pages, p3.total_pages) == (2, 3, 4)  # known pages + 1 while more exist


async def test_jumping_ahead_walks_each_missing_page_once_then_pages_cost_one_request(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        await registry.search(None, 4, 10)
        assert len(_list_cursors(official_fake)) == 4
        await registry.search(None, 5, 10)
        await registry.search(None, 1, 10)
    finally:
        await registry.aclose()
    assert len(_list_cursors(official_fake)) == 6


async def test_the_last_page_makes_total_pages_exact_and_later_pages_empty(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        last = await registry.search("smithery", 2, 8)
        beyond = await registry.search("smithery", 3, 8)
        none = await registry.search("zzz-no-such-server", 1, 8)
    finally:
        await registry.aclose()
    latest = [
        e
        for e in official_fake.entries
        if "smithery" in e["server"]["name"] and e["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"]
    ]
    assert 8 < len(latest) <= 16
    assert (len(last.servers), last.total_pages) == (len(latest) - 8, 2)
    assert (beyond.servers, beyond.total_pages) == ([], 2)
    assert (none.servers, none.total_pages) == ([], 0)
    assert len(_list_cursors(official_fake)) == 3  # page 3 was known not to exist


async def test_get_latest_sends_a_slashed_name_as_one_encoded_segment(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        detail = await registry.get("io.github.rfdez/pvpc-mcp-server")
    finally:
        await registry.aclose()
    assert official_fake.requests[-1].raw_path == "/v0.1/servers/io.github.rfdez%2Fpvpc-mcp-server/versions/latest"
    assert (detail.qualified_name, detail.version) == ("io.github.rfdez/pvpc-mcp-server", "3.2.3")
    assert [p.id for p in detail.packages] == ["npm", "npm:2"]
    assert detail.raw["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] is True


async def test_get_with_a_version_asks_for_exactly_that_version_and_an_absent_one_is_not_found(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        detail = await registry.get("io.github.rfdez/pvpc-mcp-server", version="3.2.2")
        assert official_fake.requests[-1].raw_path == "/v0.1/servers/io.github.rfdez%2Fpvpc-mcp-server/versions/3.2.2"
        assert detail.version == "3.2.2"
        with pytest.raises(RegistryNotFound, match="Server not found"):
            await registry.get("io.github.rfdez/pvpc-mcp-server", version="9.9.9")
    finally:
        await registry.aclose()


async def test_an_unknown_server_raises_registry_not_found_with_the_problem_detail(official_fake) -> None:
    registry = OfficialRegistry(official_fake.url)
    try:
        with pytest.raises(RegistryNotFound, match="Server not found") as info:
            await registry.get("io.example/nope")
    finally:
        await registry.aclose()
    assert info.value.source == "official"


async def test_a_registry_answering_500_problem_json_raises_registry_error_with_its_message(official_fake) -> None:
    official_fake.down = True
    registry = OfficialRegistry(official_fake.url)
    try:
        with pytest.raises(RegistryError, match="500.*down") as info:
            await registry.search("x", 1, 10)
    finally:
        await registry.aclose()
    assert not isinstance(info.value, RegistryNotFound)


async def test_an_unreachable_registry_raises_registry_error() -> None:
    registry = OfficialRegistry(closed_port_url(), timeout=scaled(2.0))
    try:
        with pytest.raises(RegistryError, match="Could not reach"):
            await registry.search("x", 1, 10)
    finally:
        await registry.aclose()


async def test_a_slow_registry_raises_registry_error_after_the_client_timeout(official_fake) -> None:
    official_fake.latency = 5.0
    registry = OfficialRegistry(official_fake.url, timeout=0.2)
    try:
        with pytest.raises(RegistryError, match="did not answer within 0.2"):
            await registry.get("io.github.rfdez/pvpc-mcp-server")
    finally:
        await registry.aclose()


class _OddRegistry(FakeHTTPServer):
    """Answers the shapes the real world sometimes gives: {"error"} bodies, non-JSON, junk items."""

    def build_app(self) -> Starlette:
        async def servers(request):
            return JSONResponse(
                {
                    "servers": [{"server": {"description": "no name"}}, {"name": "plain/detail"}],
                    "metadata": {"nextCursor": ""},
                }
            )

        async def detail(request):
            name = request.path_params["name"]
            if name == "err/json":
                return JSONResponse({"error": "Rate limit exceeded"}, status_code=429)
            return PlainTextResponse("<html>oops</html>", status_code=200)

        return Starlette(
            routes=[Route("/v0.1/servers", servers), Route("/v0.1/servers/{name:path}/versions/latest", detail)]
        )


async def test_odd_responses_are_read_leniently_or_reported_with_their_message() -> None:
    with _OddRegistry() as odd:
        http = httpx.AsyncClient()
        registry = OfficialRegistry(odd.url + "/", http=http)
        page = await registry.search(None, 1, 10)
        assert [s.qualified_name for s in page.servers] == ["plain/detail"] and page.total_pages == 1
        with pytest.raises(RegistryError, match="429: Rate limit exceeded"):
            await registry.get("err/json")
        with pytest.raises(RegistryError, match="not JSON"):
            await registry.get("html/page")
        await registry.aclose()  # an injected client stays open
        assert not http.is_closed
        await http.aclose()
