"""What every registry adapter provides."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .models import Detail, SearchPage

__all__ = ["RegistrySource"]


@runtime_checkable
class RegistrySource(Protocol):
    """A place to find servers. ``name`` is the ``source`` value (official, smithery, local)."""

    name: str
    # Optional: ``semantic = True`` when the source's search is semantic, not by words
    # (the hub then keeps its results unranked by words; see hub.py).

    async def search(self, query: str | None, page: int, page_size: int) -> SearchPage:
        """One page (1-based) of summaries matching ``query`` (all servers when None)."""
        ...

    async def get(self, qualified_name: str, version: str | None = None) -> Detail:
        """The latest version's detail, or exactly ``version``'s; RegistryNotFound when there is none.

        A source that keeps no versions (Smithery) raises RegistryNotFound for any ``version``."""
        ...

    async def aclose(self) -> None: ...
