"""RegistryHub: one search and one get over several sources, concurrent, bounded, cached.

Search without ``source`` fans out to every source at once, each bounded by ``timeout``.
A source that fails or times out adds ``{source, message}`` to ``errors``; the others'
results still come back (a fan-out search never raises for a source). With a query, the
pages are cut from **one ranked list of the whole candidate set**: every
source is read to its end (in chunks of :data:`CHUNK`, at most :data:`MAX_CHUNKS`; a
*semantic* source such as Smithery, whose tail is noise, only its first chunk), the lists
are merged, de-duplicated by ``qualified_name`` (first source in order wins) and ranked
(:func:`~registry_clients.ranking.rank`, which keeps what a semantic source returned and
blends its order with ours), and that list is cached for ``cache_ttl``: pages never repeat
or skip a name and ``total_pages`` is exact. A word of the query that no server holds is read
as its nearest word (a typo) and ``did_you_mean`` says the query so read (ours, then the
sources' own). Without a query (browsing), the order is the
sources' own, so each is read only up to ``page * page_size`` and ``total_pages`` counts
what was seen, plus one while a source has more. ``notes`` (e.g. a skipped Smithery) are
appended to every ``errors``. With ``source`` only that one is asked (ranked and paged the
same way), and its failure is raised as a RegistryError (timeouts and unexpected
exceptions included).

Successful answers are cached for ``cache_ttl`` seconds (``TTLCache`` on the injected
``timer``): searches per (source, query, page, page_size), details per (source, name[, version]).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx
from cachetools import TTLCache

from .base import RegistrySource
from .errors import RegistryError, RegistryNotFound
from .local import LocalCatalog
from .models import Detail, SearchPage, SourceError, Summary
from .official import DEFAULT_OFFICIAL_URL, OfficialRegistry
from .ranking import Ranked, ranked
from .smithery import DEFAULT_SMITHERY_URL, SmitheryRegistry

__all__ = ["KNOWN_REGISTRIES", "RegistryHub", "build_sources"]

log = logging.getLogger(__name__)

KNOWN_REGISTRIES = ("official", "smithery", "local")

#: Page size the hub asks each source for while merging, and how many such pages at most.
CHUNK = 100
MAX_CHUNKS = 20
#: At most this many readings of a query with its typos corrected ("did you mean").
_SUGGESTIONS = 3


class RegistryHub:
    """Searches and gets across ``sources`` (name → RegistrySource, in preference order)."""

    def __init__(
        self,
        sources: Mapping[str, RegistrySource],
        *,
        timeout: float = 8.0,
        cache_ttl: float = 300.0,
        timer: Callable[[], float] = time.monotonic,
        notes: list[SourceError] | None = None,
    ) -> None:
        self.sources: dict[str, RegistrySource] = dict(sources)
        self.timeout = timeout
        self.notes: list[SourceError] = list(notes or [])
        self._pages: TTLCache[tuple[str, str, int, int], SearchPage] = TTLCache(1024, cache_ttl, timer=timer)
        self._details: TTLCache[tuple[str, ...], Detail] = TTLCache(1024, cache_ttl, timer=timer)
        self._ranked: TTLCache[tuple[tuple[str, ...], str], tuple[Ranked[Summary], list[SourceError]]] = TTLCache(
            256, cache_ttl, timer=timer
        )

    def __repr__(self) -> str:
        return f"RegistryHub(sources={list(self.sources)}, timeout={self.timeout})"

    def _check_source(self, source: str | None) -> None:
        if source is None or source in self.sources:
            return
        for note in self.notes:
            if note.source == source:
                raise RegistryError(f"{source}: {note.message}", source=source)
        known = ", ".join(self.sources) or "none"
        raise ValueError(f"Unknown source {source!r}; the configured sources are: {known}.")

    async def _call(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``fn()`` bounded by the timeout; every failure comes out as a RegistryError."""
        try:
            with anyio.fail_after(self.timeout):
                return await fn()
        except RegistryError:
            raise
        except TimeoutError:
            raise RegistryError(f"{name} did not answer within {self.timeout:g} s.", source=name) from None
        except Exception as exc:  # a buggy source must not sink the caller
            log.warning("registry %s failed", name, exc_info=True)
            raise RegistryError(f"{name} failed ({type(exc).__name__}).", source=name) from None

    async def _search_one(self, name: str, query: str, page: int, page_size: int) -> SearchPage:
        key = (name, query, page, page_size)
        cached = self._pages.get(key)
        if cached is not None:
            return cached.model_copy(deep=True)
        src = self.sources[name]
        result: SearchPage = await self._call(name, lambda: src.search(query or None, page, page_size))
        self._pages[key] = result.model_copy(deep=True)
        return result

    async def search(
        self, query: str | None = None, page: int = 1, page_size: int = 10, source: str | None = None
    ) -> SearchPage:
        """One page of servers matching ``query``, from ``source`` or from every source."""
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise ValueError(f"page must be an integer ≥ 1 (got {page!r}).")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 100:
            raise ValueError(f"page_size must be an integer from 1 to 100 (got {page_size!r}).")
        self._check_source(source)
        q = (query or "").strip()
        names = [source] if source is not None else list(self.sources)
        if q:
            found, found_errors = await self._whole(names, q, raise_errors=source is not None)
            start = (page - 1) * page_size
            return SearchPage(
                servers=[s.model_copy() for s in found.servers[start : start + page_size]],
                total_pages=math.ceil(len(found.servers) / page_size),
                errors=[*found_errors, *self.notes],
                did_you_mean=list(found.did_you_mean),
            )
        need = page * page_size
        results: dict[str, tuple[list[Summary], bool]] = {}
        errors: dict[str, SourceError] = {}
        extra: list[SourceError] = []

        async def run(name: str) -> None:
            try:
                results[name] = await self._collect(name, q, need, extra, [])
            except RegistryError as exc:
                if source is not None:
                    raise
                errors[name] = SourceError(source=name, message=str(exc))

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(run, name)

        merged: dict[str, Summary] = {}
        more = False
        out_errors: list[SourceError] = []
        for name in names:
            if name in errors:
                out_errors.append(errors[name])
                continue
            servers, has_more = results[name]
            more = more or has_more
            for summary in servers:
                merged.setdefault(summary.qualified_name, summary)
        ranked = list(merged.values())  # no query: the sources' own order
        start = (page - 1) * page_size
        total = math.ceil(len(ranked) / page_size)
        if more:
            total = max(total, page) + 1
        return SearchPage(
            servers=ranked[start : start + page_size], total_pages=total, errors=[*out_errors, *extra, *self.notes]
        )

    async def _whole(
        self, names: list[str], q: str, *, raise_errors: bool
    ) -> tuple[Ranked[Summary], list[SourceError]]:
        """Every candidate of ``q`` from ``names``, merged and ranked once per cache TTL, with
        the query as read with its typos corrected (ours over the merged list, then each
        source's, which knows its whole catalog).

        A list with a failed source is not cached: the next page asks that source again."""
        key = (tuple(names), q)
        cached = self._ranked.get(key)
        if cached is not None:
            return cached
        results: dict[str, list[Summary]] = {}
        errors: dict[str, SourceError] = {}
        extra: list[SourceError] = []
        hints: dict[str, list[str]] = {name: [] for name in names}

        async def run(name: str) -> None:
            semantic = bool(getattr(self.sources[name], "semantic", False))
            try:
                results[name] = (await self._collect(name, q, CHUNK if semantic else None, extra, hints[name]))[0]
            except RegistryError as exc:
                if raise_errors:
                    raise
                errors[name] = SourceError(source=name, message=str(exc))

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(run, name)
        merged: dict[str, Summary] = {}
        positions: dict[str, int] = {}
        for name in names:
            semantic = bool(getattr(self.sources[name], "semantic", False))
            for pos, summary in enumerate(results.get(name, [])):
                merged.setdefault(summary.qualified_name, summary)
                if semantic:
                    positions.setdefault(summary.qualified_name, pos)
        found = ranked(list(merged.values()), q, semantic=positions or None)
        said = list(dict.fromkeys([*found.did_you_mean, *(h for n in names for h in hints[n])]))[:_SUGGESTIONS]
        out = (replace(found, did_you_mean=said), [*(errors[n] for n in names if n in errors), *extra])
        if not errors:
            self._ranked[key] = out
        return out

    async def _collect(
        self, name: str, q: str, need: int | None, errors: list[SourceError], hints: list[str]
    ) -> tuple[list[Summary], bool]:
        """The first ``need`` matches of one source (all with None; read in chunks), and whether
        it has more; its errors and its ``did_you_mean`` are added to ``errors`` and ``hints``."""
        items: list[Summary] = []
        seen: set[str] = set()
        for chunk in range(1, MAX_CHUNKS + 1):
            result = await self._search_one(name, q, chunk, CHUNK)
            errors.extend(e for e in result.errors if e not in errors)
            hints.extend(h for h in result.did_you_mean if h not in hints)
            fresh = [s for s in result.servers if s.qualified_name not in seen]
            seen.update(s.qualified_name for s in fresh)
            items.extend(fresh)
            if chunk >= result.total_pages or not fresh:
                return items, False
            if need is not None and len(items) >= need:
                return items, True
        return items, True

    async def _get_one(self, name: str, qualified_name: str, version: str | None = None, fresh: bool = False) -> Detail:
        key = (name, qualified_name) if version is None else (name, qualified_name, version)
        cached = None if fresh else self._details.get(key)
        if cached is not None:
            return cached.model_copy(deep=True)
        src = self.sources[name]
        if version is None:
            detail: Detail = await self._call(name, lambda: src.get(qualified_name))
        else:
            detail = await self._call(name, lambda: src.get(qualified_name, version=version))
        self._details[key] = detail.model_copy(deep=True)
        return detail

    async def get(
        self, qualified_name: str, source: str | None = None, version: str | None = None, *, fresh: bool = False
    ) -> Detail:
        """The latest detail (or exactly ``version``'s) from ``source``, or from the first source
        (in order) that has it. ``fresh``: asked again, not from the cache (is there a newer version?)."""
        self._check_source(source)
        if source is not None:
            return await self._get_one(source, qualified_name, version, fresh)
        failures: list[str] = []
        for name in self.sources:
            try:
                return await self._get_one(name, qualified_name, version, fresh)
            except RegistryNotFound:
                continue
            except RegistryError as exc:
                failures.append(str(exc))
        tried = ", ".join(self.sources) or "no source"
        if failures:
            raise RegistryError(
                f"{qualified_name} was not found in {tried}; some could not be asked: " + " ".join(failures),
                source="hub",
            )
        which = f"{qualified_name} {version}" if version is not None else qualified_name
        raise RegistryNotFound(f"{which} was not found in any registry (tried {tried}).", source="hub")

    async def aclose(self) -> None:
        """Close every source (errors are logged, not raised)."""
        for name, src in self.sources.items():
            try:
                await src.aclose()
            except Exception:
                log.warning("closing registry %s failed", name, exc_info=True)


def build_sources(
    registries: Sequence[str] | str,
    *,
    catalog_dir: Path | str | None = None,
    official_url: str = DEFAULT_OFFICIAL_URL,
    smithery_url: str = DEFAULT_SMITHERY_URL,
    smithery_api_key: Any = None,
    http: httpx.AsyncClient | None = None,
    timeout: float = 10.0,
) -> tuple[dict[str, RegistrySource], list[SourceError]]:
    """The ``MCP_SETUP_REGISTRIES`` rule: names → sources, plus notes for skipped ones.

    ``registries`` is a list (or a comma-separated string) of ``official``, ``smithery``,
    ``local``; case and blanks are ignored, repeats dropped, order kept (it is the merge and
    ``get`` order). Unknown names, or none at all, raise ValueError. Smithery without an
    API key is skipped with a note. ``local`` needs ``catalog_dir``.
    """
    raw = registries.split(",") if isinstance(registries, str) else list(registries)
    names = list(dict.fromkeys(n.strip().lower() for n in raw if n and n.strip()))
    unknown = [n for n in names if n not in KNOWN_REGISTRIES]
    if unknown:
        raise ValueError(
            f"Unknown registry name(s) {', '.join(unknown)} in MCP_SETUP_REGISTRIES; "
            f"use a comma-separated list of {', '.join(KNOWN_REGISTRIES)}."
        )
    if not names:
        raise ValueError(f"MCP_SETUP_REGISTRIES names no registry; use any of {', '.join(KNOWN_REGISTRIES)}.")
    sources: dict[str, RegistrySource] = {}
    notes: list[SourceError] = []
    for name in names:
        if name == "official":
            sources[name] = OfficialRegistry(official_url, http=http, timeout=timeout)
        elif name == "local":
            if catalog_dir is None:
                raise ValueError("The local registry needs a catalog directory.")
            sources[name] = LocalCatalog(Path(catalog_dir))
        else:
            reveal = getattr(smithery_api_key, "get_secret_value", None)
            key = reveal() if callable(reveal) else smithery_api_key
            if isinstance(key, str) and key.strip():
                sources[name] = SmitheryRegistry(smithery_url, api_key=key, http=http, timeout=timeout)
            else:
                notes.append(
                    SourceError(
                        source="smithery",
                        message="skipped, no API key: set MCP_SETUP_SMITHERY_API_KEY to search Smithery too.",
                    )
                )
    return sources, notes
