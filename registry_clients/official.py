"""Client for the official MCP registry (``/v0.1/servers``, cursor pages, ``…/versions/latest``).

Pages: the API pages by opaque cursor; callers ask for ``page``/``page_size``. The client
remembers, per ``(query, page_size)``, the cursor that starts each page it has seen, so
page N costs one request once page N-1 was fetched, and going back reuses the remembered
cursor. Reaching an unseen page walks forward from the furthest known one (each
intermediate page fetched once).

``total_pages``: the API reports no total, so it is the number of pages known so far,
plus one while the last known page has a ``metadata.nextCursor`` (it grows as you page
on), and exact once the end has been seen.

Search: the API matches one substring of the name only, so a query is widened here (its
words' stems and synonyms asked for at once, a typo's halves when nothing is found) and the
answers ranked with their descriptions: see :meth:`OfficialRegistry.search`.

Errors: network failures and timeouts → RegistryError; 404 → RegistryNotFound; any other
error status → RegistryError carrying the body's message (problem-JSON ``title``/``detail``
or ``{"error": …}``). Responses are read leniently; unparseable entries are skipped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import anyio
import httpx
from cachetools import TTLCache

from .errors import RegistryError, RegistryNotFound
from .models import Detail, SearchPage, Summary
from .ranking import Ranked, ranked
from .serverjson import parse_server_json
from .synonyms import alternatives_of
from .words import query_words, stem, tokens

__all__ = ["DEFAULT_OFFICIAL_URL", "OfficialRegistry", "error_message"]

log = logging.getLogger(__name__)

DEFAULT_OFFICIAL_URL = "https://registry.modelcontextprotocol.io"

#: A widened search reads each name's matches in pages of this size, at most this many pages.
_UNION_PAGE = 100
_UNION_PAGES = 10
#: A widened search asks for at most this many names (and has at most this many requests in flight).
_TERMS = 10


def _terms(word: str, alts: tuple[str, ...]) -> list[str]:
    """The names to ask for to find ``word``: itself, its stem (4 letters or more: not ``tim`` for
    ``time``), its singular (``map`` for ``maps``), its synonyms ``alts`` of 3 letters or more
    (``pg`` would match half the registry). A name holding another is left out: the API matches
    substrings, so the shorter one finds it (``kube`` answers for ``kubernetes``)."""
    root = stem(word)
    singular = word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) >= 4 else word
    terms = [word, *([root] if len(root) >= 4 else []), singular, *(a for a in alts if len(a) >= 3)]
    terms = list(dict.fromkeys(terms))
    return [t for t in terms if not any(other != t and other in t for other in terms)]


def _budget(groups: dict[str, list[str]]) -> dict[str, list[str]]:
    """``groups`` cut to :data:`_TERMS` names in all: every word's first name, then every word's second…"""
    kept: dict[str, list[str]] = {word: [] for word in groups}
    count = 0
    for i in range(max((len(ts) for ts in groups.values()), default=0)):
        for word, ts in groups.items():
            if i < len(ts) and count < _TERMS:
                kept[word].append(ts[i])
                count += 1
    return kept


def _halves(word: str) -> list[str]:
    """Two pieces of a word of 5 letters or more, 3 letters each at least, that one edit leaves
    one of whole. From 8 letters the two middle letters are left out, so a swap across the middle
    leaves both whole (``playwrigth``: ``play`` and ``igth``)."""
    n, half = len(word), len(word) // 2
    if n < 5:
        return []
    if n >= 8:
        return [word[: half - 1], word[half + 1 :]]
    return list(dict.fromkeys([word[: max(3, half)], word[-max(3, n - half) :]]))


async def _each(items: list[str], fn: Callable[[str], Awaitable[None]]) -> None:
    """``fn(item)`` for every item at once. The first RegistryError stops the others and is
    raised as it is (one failing request fails the search, in the same words as alone)."""
    failed: list[RegistryError] = []

    async def one(item: str) -> None:
        try:
            await fn(item)
        except RegistryError as exc:
            failed.append(exc)
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        for item in items:
            tg.start_soon(one, item)
    if failed:
        raise failed[0]


def _merged(*lists: list[Summary]) -> list[Summary]:
    """The lists one after the other, each name once (the first seen wins)."""
    merged: dict[str, Summary] = {}
    for servers in lists:
        for summary in servers:
            merged.setdefault(summary.qualified_name, summary)
    return list(merged.values())


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

    def ends_at(self, page: int | None) -> None:
        """The last page is ``page`` (None: not known, the data grew since)."""
        self.end = page

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
        self._ranked: TTLCache[str, Ranked[Summary]] = TTLCache(maxsize=64, ttl=300)

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
        """One page of latest versions matching ``query``.

        The API matches one substring of the name, so the search is widened here: each telling
        word of the query (not ``mcp``, ``server``…; of a typed name such as ``mcp-server-github``
        its longest telling word) is asked for with its stem and its synonyms
        (:mod:`registry_clients.synonyms`), all at once (:data:`_TERMS` names at most); the
        names of the most selective word are paged to their end (every server that holds all
        the words is among them), the others' first pages kept. That union is ranked with the
        descriptions (:mod:`registry_clients.ranking`). When nothing in it matches, a word no
        server holds may be a typo: each half of it is asked for too (``not`` and ``oin`` of
        ``notoin``: one edit leaves one half whole), one more round, and the union ranked again (the typo read as
        the nearest word of the answers, said in ``did_you_mean``). The ranking is cached and
        paged here. A single word with nothing to widen gets the registry's own pages, in its
        order (the hub ranks them), unless it finds nothing.
        """
        q = (query or "").strip()
        telling, _generic = query_words(q)
        if not telling:
            return await self._search(q or None, page, page_size)
        if len(tokens(q)) > 1 and not any(c.isspace() for c in q):
            telling = [max(telling, key=len)]
        groups = {word: _terms(word, alts) for word, alts in zip(telling, alternatives_of(telling))}
        if len(groups) == 1 and groups[telling[0]] == [telling[0]]:
            found = await self._search(telling[0], page, page_size)
            if found.total_pages or not _halves(telling[0]):
                return found
            result = await self._widened(q, groups, asked=[])  # nothing: only a typo's halves are left to ask
        else:
            result = await self._widened(q, groups)
        start = (page - 1) * page_size
        return SearchPage(
            servers=result.servers[start : start + page_size],
            total_pages=math.ceil(len(result.servers) / page_size),
            did_you_mean=result.did_you_mean,
        )

    async def _widened(
        self, q: str, groups: dict[str, list[str]], *, asked: list[Summary] | None = None
    ) -> Ranked[Summary]:
        """The union for ``q`` ranked (``asked``: what its names already answered), typos' halves included."""
        key = q.lower()
        cached = self._ranked.get(key)
        if cached is not None:
            return cached
        limiter = anyio.CapacityLimiter(_TERMS)
        servers = await self._union(groups, limiter) if asked is None else asked
        result = ranked(servers, q)
        # nothing at all: a typo, maybe (a word that only descriptions hold costs no round more)
        typos = [] if result.servers else [word for word in result.unmatched if word in groups]
        halves = [h for word in typos for h in _halves(word)][:_TERMS]
        if halves:
            more = await self._firsts(halves, limiter)
            servers = _merged(servers, *(more[h].servers for h in halves))
            result = ranked(servers, q)
        self._ranked[key] = result
        return result

    async def _firsts(self, terms: list[str], limiter: anyio.CapacityLimiter) -> dict[str, SearchPage]:
        """The first page of each term, at once (as many in flight as the limiter lets)."""
        firsts: dict[str, SearchPage] = {}

        async def first(term: str) -> None:
            async with limiter:
                firsts[term] = await self._search(term, 1, _UNION_PAGE)

        await _each(list(dict.fromkeys(terms)), first)
        return firsts

    async def _union(self, groups: dict[str, list[str]], limiter: anyio.CapacityLimiter) -> list[Summary]:
        """All the names of the most selective word (each of its terms paged to the end), then
        the first page of every other word's terms."""
        terms = _budget(groups)
        firsts = await self._firsts([t for ts in terms.values() for t in ts], limiter)

        def size(word: str) -> tuple[int, int, int]:
            pages = [firsts[t] for t in terms[word]]
            return (sum(p.total_pages for p in pages), sum(len(p.servers) for p in pages), -len(word))

        best = min((word for word in terms if terms[word]), key=size)
        paged: dict[str, list[Summary]] = {}

        async def rest(term: str) -> None:
            result, page, items = firsts[term], 1, list(firsts[term].servers)
            while result.total_pages > page and page < _UNION_PAGES:
                page += 1
                async with limiter:
                    result = await self._search(term, page, _UNION_PAGE)
                items.extend(result.servers)
            paged[term] = items

        await _each(terms[best], rest)
        others = [firsts[t].servers for word, ts in terms.items() if word != best for t in ts]
        return _merged(*(paged[t] for t in terms[best]), *others)

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
                    chain.ends_at(current if servers else current - 1)
                    del chain.cursors[current:]
                else:
                    if chain.end is not None and current >= chain.end:
                        chain.ends_at(None)  # the data grew since the end was seen
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
