"""A local catalog: a folder of server.json files (official format) for private servers.

The files are ``<folder>/*.json`` and ``<folder>/*/server.json`` (one level down, so a
folder of cloned server repositories works as a catalog). A file holds one document (plain
ServerDetail or ``{server, _meta}``) or a list of them. Files are re-read when their mtime
or size changes, so edits on disk show up on the next call. A broken file (or list item) is
skipped with a warning naming it, once per change. A name met more than once keeps the
document the registry marks ``isLatest``, then its highest version (semantic version order,
see :func:`~registry_clients.ranking.version_key`), then the latest ``publishedAt``, then the
first file in path order. Search ranks its matches (:mod:`registry_clients.ranking`). A missing folder is
an empty catalog.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread

from .errors import RegistryNotFound
from .inputs import unwrap
from .models import Detail, SearchPage
from .ranking import ranked, version_key
from .serverjson import parse_server_json

__all__ = ["LocalCatalog"]

log = logging.getLogger(__name__)

_OFFICIAL_META = "io.modelcontextprotocol.registry/official"


def _is_latest(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    meta = unwrap(doc)[1].get(_OFFICIAL_META)
    return bool(isinstance(meta, dict) and meta.get("isLatest"))


def _order(detail: Detail, latest: bool) -> tuple[object, ...]:
    """Which of two documents of one name wins: the one the registry marks ``isLatest``, then the
    higher version, then the later publishedAt (the registry's word first)."""
    return (latest, version_key(detail.version), detail.published_at or "")


class LocalCatalog:
    """RegistrySource over a directory of server.json files (``name == "local"``)."""

    def __init__(self, directory: Path | str, *, name: str = "local") -> None:
        self.name = name
        self.directory = Path(directory)
        self._lock = threading.Lock()
        # path -> ((mtime_ns, size), [(detail, is_latest)])
        self._files: dict[Path, tuple[tuple[int, int], list[tuple[Detail, bool]]]] = {}

    def __repr__(self) -> str:
        return f"LocalCatalog({str(self.directory)!r})"

    def _read_file(self, path: Path) -> list[tuple[Detail, bool]]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning("local catalog: skipping %s: %s", path, exc)
            return []
        docs = data if isinstance(data, list) else [data]
        out: list[tuple[Detail, bool]] = []
        for i, doc in enumerate(docs):
            try:
                out.append((parse_server_json(doc, source=self.name), _is_latest(doc)))
            except (ValueError, TypeError) as exc:
                where = f"{path} (item {i})" if isinstance(data, list) else str(path)
                log.warning("local catalog: skipping %s: %s", where, exc)
        return out

    def _load(self) -> list[Detail]:
        """Every server, reading only files that changed since the last call."""
        with self._lock:
            try:
                found = [*self.directory.glob("*.json"), *self.directory.glob("*/server.json")]
                paths = sorted(p for p in found if p.is_file())
            except OSError:
                paths = []
            fresh: dict[Path, tuple[tuple[int, int], list[tuple[Detail, bool]]]] = {}
            for path in paths:
                try:
                    st = path.stat()
                except OSError:
                    continue
                stamp = (st.st_mtime_ns, st.st_size)
                cached = self._files.get(path)
                fresh[path] = cached if cached and cached[0] == stamp else (stamp, self._read_file(path))
            self._files = fresh
            chosen: dict[str, tuple[Detail, bool]] = {}
            for _stamp, entries in fresh.values():
                for detail, latest in entries:
                    old = chosen.get(detail.qualified_name)
                    if old is None or _order(detail, latest) > _order(*old):
                        chosen[detail.qualified_name] = (detail, latest)
            return [d for d, _ in chosen.values()]

    async def search(self, query: str | None, page: int, page_size: int) -> SearchPage:
        """Ranked matches over name, title and description, typos read as the nearest word
        (see :mod:`registry_clients.ranking`)."""
        found = ranked(await anyio.to_thread.run_sync(self._load), query)
        start = (page - 1) * page_size
        return SearchPage(
            servers=[d.summary() for d in found.servers[start : start + page_size]],
            total_pages=math.ceil(len(found.servers) / page_size) if page_size > 0 else 0,
            did_you_mean=found.did_you_mean,
        )

    async def get(self, qualified_name: str, version: str | None = None) -> Detail:
        """Exact name, else a case-insensitive match; RegistryNotFound otherwise.

        With ``version``, exactly that version among every document of the name (not only the chosen one)."""
        servers = await anyio.to_thread.run_sync(self._load)
        if version is not None:
            servers = [d for _stamp, entries in list(self._files.values()) for d, _ in entries if d.version == version]
        for detail in servers:
            if detail.qualified_name == qualified_name:
                return detail.model_copy(deep=True)
        for detail in servers:
            if detail.qualified_name.lower() == qualified_name.lower():
                return detail.model_copy(deep=True)
        which = f"{qualified_name} {version}" if version is not None else qualified_name
        raise RegistryNotFound(f"{which} is not in the local catalog ({self.directory}).", source=self.name)

    async def aclose(self) -> None:
        return None
