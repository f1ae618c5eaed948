"""Search ranking and version order shared by every source and the hub.

Ranking (:func:`rank`), best first. A query is split into words; *generic* words (``mcp``,
``server``, ``for``…) count only when the query has nothing else. A word matches a field
when it equals one of the field's words, shares its stem (``browsers``/``browser``,
``automation``/``automate``, ``pages``/``page``) or starts it (``postgres`` in
``postgresql``); inside the name it may also start a word (``web`` in ``websearch``) or, when
5 letters or more, be any substring (``browser`` in ``hyperbrowser``). Each word counts once,
in its best field:

- name (the last segment of the qualified name; the namespace ``io.github.x/`` says nothing
  about the server) 3, title 2, description 1, namespace 0.5 (2 when the whole query is the
  publisher: ``mcp-setup`` for ``io.github.mcp-setup/…``).

Servers are ordered by: an exact name first (the query equals the qualified name or its last
segment), then a name that starts with the query, then **how many words matched** outside the
namespace (all words first, then most words), then the summed field weights (with a little for generic words and
for names mostly made of the query), then the order the sources gave. A server matching no
word is left out, so a query with some matching word never returns nothing.

*Semantic* sources (Smithery, whose ``q`` is a prompt) return servers that may share no word
with the query: :func:`rank` keeps them when their positions are passed as ``semantic``,
blending both orders by reciprocal rank (``1/(K+our position) + 1/(K+their position)``),
after the exact and prefix names.

Version order (:func:`version_key`): semantic versions compare numerically (a release ranks
above its pre-releases, ``1.0.3 > 1.0.0 > 1.0.0-alpha``); unparseable versions rank lowest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .models import Summary

__all__ = ["GENERIC", "Score", "match_rank", "query_words", "rank", "score", "stem", "tokens", "version_key"]

S = TypeVar("S", bound=Summary)

_SPLIT = re.compile(r"[^a-z0-9]+")

#: Words nearly every entry holds, or that say nothing on their own.
GENERIC = frozenset(
    {
        "mcp",
        "server",
        "servers",
        "model",
        "context",
        "protocol",
        "io",
        "com",
        "a",
        "an",
        "the",
        "for",
        "and",
        "or",
        "with",
        "to",
        "of",
        "in",
        "on",
        "my",
        "me",
        "i",
        "that",
        "this",
        "tool",
        "tools",
        "via",
        "using",
        "from",
    }
)
_SUFFIXES = (
    ("ations", "at"),
    ("ation", "at"),
    ("ings", ""),
    ("ing", ""),
    ("ers", ""),
    ("er", ""),
    ("ies", "y"),
    ("es", ""),
    ("ed", ""),
    ("s", ""),
    ("e", ""),
)
_NAME, _TITLE, _DESC, _NAMESPACE = 3.0, 2.0, 1.0, 0.5
_K = 10  # reciprocal-rank constant: small, so the first places of each order weigh most


def tokens(text: str | None) -> list[str]:
    return [t for t in _SPLIT.split((text or "").lower()) if t]


def stem(word: str) -> str:
    """A crude English stem: enough for ``browsers``/``browser``/``browse``, ``automation``/``automate``."""
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + replacement
    return word


def query_words(query: str | None) -> tuple[list[str], list[str]]:
    """(telling words, generic words) of ``query``, each once, in order."""
    words = list(dict.fromkeys(tokens(query)))
    telling = [w for w in words if w not in GENERIC]
    return (telling, [w for w in words if w in GENERIC]) if telling else (words, [])


class _Field:
    def __init__(self, text: str) -> None:
        self.text = text
        self.words = set(tokens(text))
        self.stems = {stem(w) for w in self.words}

    def has(self, word: str, *, substring: bool = False) -> bool:
        if word in self.words or stem(word) in self.stems:
            return True
        if len(word) >= 4 and any(w.startswith(word) for w in self.words):
            return True  # ``postgres`` in ``postgresql``
        if not substring or len(word) < 3:
            return False
        # inside a name: at the start of one of its words (``web`` in ``websearch``), or anywhere
        # for a longer word (``browser`` in ``hyperbrowser``; not ``text`` in ``context``)
        return any(w.startswith(word) for w in self.words) or (len(word) >= 5 and word in self.text)


@dataclass(frozen=True)
class Score:
    """How a server matches a query: per telling word, the weight of its best field (0: none)."""

    tier: int  # 0 exact name, 1 name prefix, 2 otherwise
    words: tuple[float, ...]
    bonus: float  # generic words in the name, a name mostly made of the query

    @property
    def matched(self) -> int:
        """Words matched outside the namespace (``io.github.x/`` does not make ``github`` match)."""
        return sum(1 for w in self.words if w > _NAMESPACE)

    @property
    def namespace_only(self) -> bool:
        return self.tier == 2 and all(w in (0.0, _NAMESPACE) for w in self.words)

    def key(self, idf: Sequence[float]) -> tuple[int, int, float]:
        return (self.tier, -self.matched, -(sum(w * f for w, f in zip(self.words, idf)) + self.bonus))


def score(summary: Summary, query: str | None) -> Score | None:
    """How ``summary`` matches ``query``; None when no word of it matches."""
    q = (query or "").strip().lower()
    if not q:
        return Score(0, (), 0.0)
    name = summary.qualified_name.lower()
    namespace, _, short = name.rpartition("/")
    tier = 0 if q in (name, short) else 1 if short.startswith(q) or name.startswith(q) else 2
    title_text = (summary.display_name or "").lower()
    fields = [
        (_Field(short), _NAME, True),
        (_Field("" if title_text == name else title_text), _TITLE, False),
        (_Field((summary.description or "").lower()), _DESC, False),
        (_Field(namespace), _NAMESPACE, False),
    ]
    telling, generic = query_words(q)
    words = tuple(next((w for f, w, sub in fields if f.has(word, substring=sub)), 0.0) for word in telling)
    if tokens(namespace.rsplit(".", 1)[-1]) == tokens(q):  # the publisher, by name (``mcp-setup``)
        words = tuple(max(w, _TITLE) for w in words)
    if tier == 2 and not any(words):
        return None
    bonus = 0.1 * sum(1 for word in generic if fields[0][0].has(word))
    name_words = [w for w in tokens(short) if w not in GENERIC]
    if name_words:  # a name that is mostly the query (``slack-mcp``) before a longer one
        covered = sum(1 for w in name_words if any(w == t or stem(w) == stem(t) for t in telling))
        bonus += 0.5 * covered / len(name_words)
    return Score(tier, words, bonus)


def match_rank(summary: Summary, query: str | None) -> int | None:
    """0 for an exact name, 1 for a name prefix, 2 for any other match; None when nothing matches."""
    found = score(summary, query)
    return None if found is None else found.tier


def _lexical(servers: Sequence[S], query: str | None) -> list[tuple[Score, int, S]]:
    """Matches best first. A rare word weighs more (``jira`` over ``issues``: inverse document
    frequency over ``servers``), and a match only in the namespace counts only when nothing
    matches elsewhere (``github`` would otherwise be every ``io.github.*`` server)."""
    scored = [(sc, i, s) for i, s in enumerate(servers) if (sc := score(s, query)) is not None]
    if any(not sc.namespace_only for sc, _, _ in scored):
        scored = [t for t in scored if not t[0].namespace_only]
    width = max((len(sc.words) for sc, _, _ in scored), default=0)
    idf = [
        math.log(1 + len(servers) / max(1, sum(1 for sc, _, _ in scored if len(sc.words) > j and sc.words[j])))
        for j in range(width)
    ]
    scored.sort(key=lambda t: (t[0].key(idf), t[1]))
    return scored


def rank(servers: Sequence[S], query: str | None, *, semantic: Mapping[str, int] | None = None) -> list[S]:
    """The servers that match ``query``, best first (stable for equal scores).

    ``semantic`` maps a qualified name to its position in a semantic source's own order:
    those servers are kept even when no word matches, and both orders are blended."""
    lexical = _lexical(servers, query)
    if not semantic or not (query or "").strip():
        return [s for *_, s in lexical]
    ours = {s.qualified_name: (pos, sc.tier) for pos, (sc, _, s) in enumerate(lexical)}
    blended: list[tuple[int, float, int, S]] = []
    for i, s in enumerate(servers):
        theirs = semantic.get(s.qualified_name)
        mine = ours.get(s.qualified_name)
        if mine is None and theirs is None:
            continue
        fused = (1 / (_K + mine[0]) if mine is not None else 0.0) + (1 / (_K + theirs) if theirs is not None else 0.0)
        blended.append((mine[1] if mine is not None else 2, -fused, i, s))
    blended.sort(key=lambda t: t[:3])
    return [s for *_, s in blended]


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
