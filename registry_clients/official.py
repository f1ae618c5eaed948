"""Client for the official MCP registry (``/v0.1/servers``, cursor pages, ``…/versions/latest``).

Pages: the API pages by opaque cursor; callers ask for ``page``/``page_size``. The client
remembers, per ``(query, page_size)``, the cursor that starts each page it has seen, so
page N costs one request once page N-1 was fetched, and going back reuses the remembered
cursor. Reaching an unseen page walks forward from the furthest known one (each
intermediate page fetched once).

``total_pages``: the API reports no total, so it is the number of pages known so far,
plus one while the last known page has a ``metadata.nextCursor`` (it grows as you page
on), and exact once the end has been seen.

Errors: network failures and timeouts → RegistryError; 404 → RegistryNotFound; any other
error status → RegistryError carrying the body's message (problem-JSON ``title``/``detail``
or ``{"error": …}``). Responses are read leniently; unparseable entries are skipped.
"""

from __future__ import annotations

import logging
import math
from typing import Any
from urllib.parse import quote

import anyio
import httpx
from cachetools import TTLCache

from .errors import RegistryError, RegistryNotFound
from .models import Detail, SearchPage, Summary
from .ranking import query_words, rank, tokens
from .serverjson import parse_server_json

__all__ = ["DEFAULT_OFFICIAL_URL", "OfficialRegistry", "error_message"]

log = logging.getLogger(__name__)

DEFAULT_OFFICIAL_URL = "https://registry.modelcontextprotocol.io"

#: A multi-word query reads each word's matches in pages of this size, at most this many pages.
_UNION_PAGE = 100
_UNION_PAGES = 10


def error_message(response: httpx.Response) -> str:
    """The human message of an error response: problem-JSON, ``{"error"}`` or the status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        title, detail = body.get("title"), body.get("detail")
        if isinstance(detail, str) and detail:
            return f"{title}: {detail}" if isinstance(title, str) and title and title != detail else detail
        err, msg = body.get("error"), body.get("message")
        if isinstance(err, str) and err:
            return f"{err}: {msg}" if isinstance(msg, str) and msg and msg != err else err
        if isinstance(msg, str) and msg:
            return msg
        if isinstance(title, str) and title:
            return title
    return f"HTTP {response.status_code} {response.reason_phrase}".strip()


class _Chain:
    """Cursors that start pages 1..n of one (query, page_size); ``end`` once the last is seen."""

    def __init__(self) -> None:
        self.cursors: list[str | None] = [None]
        self.end: int | None = None
        self.lock = anyio.Lock()

    def total(self) -> int:
        return self.end if self.end is not None else len(self.cursors)


class OfficialRegistry:
    """RegistrySource for the official MCP registry (``name == "official"``)."""

    name = "official"

    def __init__(
        self,
        base_url: str = DEFAULT_OFFICIAL_URL,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http or httpx.AsyncClient(follow_redirects=True)
        self._owns_http = http is None
        self._timeout = timeout
        self._chains: TTLCache[tuple[str, int], _Chain] = TTLCache(maxsize=256, ttl=900)
        self._unions: TTLCache[str, list[Summary]] = TTLCache(maxsize=64, ttl=300)

    def __repr__(self) -> str:
        return f"OfficialRegistry({self.base_url!r})"

    async def _get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        url = self.base_url + path
        try:
            resp = await self._http.get(
                url, params=params, timeout=self._timeout, headers={"Accept": "application/json"}
            )
        except httpx.TimeoutException:
            raise RegistryError(
                f"The official registry at {self.base_url} did not answer within {self._timeout:g} s.",
                source=self.name,
            ) from None
        except httpx.HTTPError as exc:
            raise RegistryError(
                f"Could not reach the official registry at {self.base_url} ({type(exc).__name__}).",
                source=self.name,
            ) from None
        if resp.status_code == 404:
            raise RegistryNotFound(f"Official registry: {error_message(resp)}.", source=self.name)
        if resp.status_code >= 400:
            raise RegistryError(
                f"The official registry answered HTTP {resp.status_code}: {error_message(resp)}.",
                source=self.name,
            )
        try:
            return resp.json()
        except ValueError:
            raise RegistryError(
                "The official registry answered something that is not JSON.", source=self.name
            ) from None

    async def _fetch(self, query: str, limit: int, cursor: str | None) -> tuple[list[Summary], str | None]:
        params: dict[str, Any] = {"limit": limit, "version": "latest"}
        if query:
            params["search"] = query
        if cursor:
            params["cursor"] = cursor
        body = await self._get_json("/v0.1/servers", params)
        if not isinstance(body, dict):
            raise RegistryError("The official registry answered an unexpected shape.", source=self.name)
        servers: list[Summary] = []
        for item in body.get("servers") or []:
            try:
                servers.append(parse_server_json(item, source=self.name).summary())
            except (ValueError, TypeError) as exc:
                log.debug("official registry: skipping an unusable entry: %s", exc)
        meta = body.get("metadata")
        nxt = meta.get("nextCursor") if isinstance(meta, dict) else None
        return servers, nxt if isinstance(nxt, str) and nxt else None

    async def search(self, query: str | None, page: int, page_size: int) -> SearchPage:
        """One page of latest versions whose name contains ``query``.

        The API matches one substring of the name. A query of several words sends its telling
        words (not ``mcp``, ``server``…): one alone as it is (a typed name such
        as ``mcp-server-github`` its longest telling word); several words at once,
        in parallel, then pages through the most selective one only (the fewest matches: every
        server that holds all the words is among them) and keeps the first page of the others
        (servers that hold some of the words). That union is ranked
        (:mod:`registry_clients.ranking`), cached, and paged here.
        """
        telling, _generic = query_words(query)
        if len(tokens(query)) > 1 and (len(telling) == 1 or not any(c.isspace() for c in (query or "").strip())):
            # one telling word, or one typed name (``mcp-server-github``): its longest telling word
            return await self._search(max(telling, key=len), page, page_size)
        if len(telling) > 1:
            union = await self._union(telling)
            servers = rank(union, query)
            start = (page - 1) * page_size
            return SearchPage(
                servers=servers[start : start + page_size], total_pages=math.ceil(len(servers) / page_size)
            )
        return await self._search(query, page, page_size)

    async def _union(self, words: list[str]) -> list[Summary]:
        key = " ".join(words)
        cached = self._unions.get(key)
        if cached is not None:
            return cached
        firsts: dict[str, SearchPage] = {}

        async def first(word: str) -> None:
            firsts[word] = await self._search(word, 1, _UNION_PAGE)

        async with anyio.create_task_group() as tg:
            for word in words:
                tg.start_soon(first, word)
        best = min(words, key=lambda w: (firsts[w].total_pages, len(firsts[w].servers), -len(w)))
        items = list(firsts[best].servers)
        result, page = firsts[best], 1
        while result.total_pages > page and page < _UNION_PAGES:
            page += 1
            result = await self._search(best, page, _UNION_PAGE)
            items.extend(result.servers)
        for word in words:
            if word != best:
                items.extend(firsts[word].servers)
        union = list({s.qualified_name: s for s in reversed(items)}.values())[::-1]  # first seen wins
        self._unions[key] = union
        return union

    async def _search(self, query: str | None, page: int, page_size: int) -> SearchPage:
        q = (query or "").strip()
        chain = self._chains.get((q, page_size))
        if chain is None:
            chain = self._chains[(q, page_size)] = _Chain()
        async with chain.lock:
            if chain.end is not None and page > chain.end:
                return SearchPage(servers=[], total_pages=chain.total())
            # Walk forward from the furthest known page (only pages never seen are fetched).
            current = min(page, len(chain.cursors))
            while True:
                servers, nxt = await self._fetch(q, page_size, chain.cursors[current - 1])
                if nxt is None:
                    chain.end = current if servers else current - 1
                    del chain.cursors[current:]
                else:
                    if chain.end is not None and current >= chain.end:
                        chain.end = None  # the data grew since the end was seen
                    if len(chain.cursors) == current:
                        chain.cursors.append(nxt)
                    else:
                        chain.cursors[current] = nxt
                if current == page:
                    return SearchPage(servers=servers, total_pages=chain.total())
                if nxt is None:  # the end came before the requested page
                    return SearchPage(servers=[], total_pages=chain.total())
                current += 1

    async def get(self, qualified_name: str, version: str | None = None) -> Detail:
        """The latest version of ``qualified_name``, or exactly ``version`` (each sent as ONE path segment)."""
        which = quote(version if version is not None else "latest", safe="")
        body = await self._get_json(f"/v0.1/servers/{quote(qualified_name, safe='')}/versions/{which}")
        if not isinstance(body, dict):
            raise RegistryError("The official registry answered an unexpected shape.", source=self.name)
        try:
            return parse_server_json(body, source=self.name)
        except ValueError as exc:
            raise RegistryError(f"The official registry answered an unusable entry: {exc}", source=self.name) from None

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
