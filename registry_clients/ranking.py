"""Search ranking and version order shared by every source and the hub.

Ranking (:func:`rank`), best first; a server that matches none of these does not match:

0. exact name: the query equals the qualified name or its last segment (``…/time``)
1. name prefix: the last segment or the whole name starts with the query
2. name tokens: every query token is a token of the last name segment (``postgres mcp``,
   ``mcp-server-github`` match ``…/github-mcp-server``; the namespace ``io.github.x/`` does
   not count)
3. name substring: the query, or every token, is inside the last name segment
4. title: the title equals the query, or holds every token
5. description: the description holds every token
6. namespace: only the namespace holds the query (``github`` in ``io.github.x/…``)

Ties keep the order the sources gave (source order, then each source's own order). Tokens split on
anything that is not a letter or digit, case-insensitively.

Version order (:func:`version_key`): semantic versions compare numerically (a release ranks
above its pre-releases, ``1.0.3 > 1.0.0 > 1.0.0-alpha``); unparseable versions rank lowest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from .models import Summary

__all__ = ["match_rank", "rank", "tokens", "version_key"]

S = TypeVar("S", bound=Summary)

_SPLIT = re.compile(r"[^a-z0-9]+")


def tokens(text: str | None) -> list[str]:
    return [t for t in _SPLIT.split((text or "").lower()) if t]


def match_rank(summary: Summary, query: str | None) -> int | None:
    """The rank class (0 best … 6) of ``summary`` for ``query``; None when it does not match."""
    q = (query or "").strip().lower()
    if not q:
        return 0
    qt = tokens(q)
    name = summary.qualified_name.lower()
    short = name.rsplit("/", 1)[-1]
    if q in (name, short):
        return 0
    if short.startswith(q) or name.startswith(q):
        return 1
    name_tokens = set(tokens(short))  # the namespace (io.github.x/) says nothing about the server
    if qt and all(t in name_tokens for t in qt):
        return 2
    if q in short or (qt and all(t in short for t in qt)):
        return 3
    title = (summary.display_name or "").lower()
    if title == q or (qt and all(t in title for t in qt)):
        return 4
    desc = (summary.description or "").lower()
    if q in desc or (qt and all(t in desc for t in qt)):
        return 5
    if q in name:
        return 6  # only the namespace holds it (``github`` in ``io.github.x/…``)
    return None


def rank(servers: Sequence[S], query: str | None) -> list[S]:
    """The servers that match ``query``, best first (stable for equal ranks)."""
    scored: list[tuple[int, int, S]] = []
    for i, s in enumerate(servers):
        r = match_rank(s, query)
        if r is not None:
            scored.append((r, i, s))
    scored.sort(key=lambda t: t[:2])
    return [s for *_, s in scored]


_SEMVER = re.compile(r"^v?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.\-]+))?(?:\+.*)?$")


def version_key(version: str | None) -> tuple[Any, ...]:
    """A sort key for ``version``: higher semver sorts higher; unparseable sorts lowest."""
    m = _SEMVER.match((version or "").strip())
    if not m:
        return (0,)
    nums = tuple(int(x) for x in m.group(1).split("."))
    nums = nums + (0,) * (3 - len(nums)) if len(nums) < 3 else nums
    pre = m.group(2)
    if pre is None:
        return (1, nums, 1, ())
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (1, nums, 0, parts)
