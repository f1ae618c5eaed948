"""Search ranking and version order shared by every source and the hub.

Ranking (:func:`rank`, :func:`ranked`), best first. A query is split into words; *generic* words (``mcp``,
``server``, ``for``…) count only when the query has nothing else. A word matches a field
when it equals one of the field's words, shares its stem (``browsers``/``browser``,
``automation``/``automate``, ``pages``/``page``) or starts it (``postgres`` in
``postgresql``); inside the name it may also start a word (``web`` in ``websearch``) or, when
5 letters or more, be any substring (``browser`` in ``hyperbrowser``). A field holding one of
the word's alternatives (:mod:`registry_clients.synonyms`: ``k8s`` for ``kubernetes``, ``gmail``
for ``email``) matches it too, at 0.8 of the field's weight. Each word counts once, in its best
field:

- name (the last segment of the qualified name; the namespace ``io.github.x/`` says nothing
  about the server) 3, title 2, description 1, namespace 0.5 (2 when the whole query is the
  publisher: ``mcp-setup`` for ``io.github.mcp-setup/…``).

Typos (:func:`ranked`): a word that no server matches, nor any of its alternatives, is read as
the nearest word of the servers' text (:mod:`registry_clients.spelling`: ``notoin`` → ``notion``),
and :attr:`Ranked.did_you_mean` says the query so read; a word too far from any is left
unmatched, and a name near it is only suggested. Only a word that matches nothing is read
differently, so a right match is never pushed down by a correction.

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
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

from .models import Summary
from .spelling import Vocabulary, allowed
from .synonyms import alternatives, alternatives_of
from .words import GENERIC, query_words, stem, tokens

__all__ = ["GENERIC", "Ranked", "Score", "query_words", "rank", "ranked", "score", "stem", "tokens", "version_key"]

S = TypeVar("S", bound=Summary)

_NAME, _TITLE, _DESC, _NAMESPACE = 3.0, 2.0, 1.0, 0.5
_SYNONYM = 0.8  # a field holding an alternative of the word, not the word itself
_WORD = re.compile(r"[a-z0-9]+")
_K = 10  # reciprocal-rank constant: small, so the first places of each order weigh most


@lru_cache(maxsize=1 << 14)  # the same servers' texts are read by every search of a catalog
def _words_and_stems(text: str) -> tuple[frozenset[str], frozenset[str]]:
    words = frozenset(tokens(text))
    return words, frozenset(stem(w) for w in words)


class _Field:
    def __init__(self, text: str) -> None:
        self.text = text
        self.words, self.stems = _words_and_stems(text)

    def has(self, word: str, root: str, *, substring: bool = False) -> bool:
        """Whether this field holds ``word`` (whose stem is ``root``)."""
        if root[:-1] not in self.text:  # a stem is its word's start (but ``y`` for ``ies``): none of it here
            return False
        if word in self.words or root in self.stems:
            return True
        if len(word) >= 4 and any(w.startswith(word) for w in self.words):
            return True  # ``postgres`` in ``postgresql``
        if not substring or len(word) < 3:
            return False
        # inside a name: at the start of one of its words (``web`` in ``websearch``), or anywhere
        # for a longer word (``browser`` in ``hyperbrowser``; not ``text`` in ``context``)
        return any(w.startswith(word) for w in self.words) or (len(word) >= 5 and word in self.text)


@dataclass(frozen=True)
class _Word:
    """A word of the query as searched (as typed, or its correction), with its stem and its synonyms'."""

    text: str
    root: str
    alternatives: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, text: str, alts: tuple[str, ...] | None = None) -> _Word:
        alts = alternatives(text) if alts is None else alts
        return cls(text, stem(text), tuple((alt, stem(alt)) for alt in alts))

    def covers(self, name_word: str) -> bool:
        return name_word == self.text or stem(name_word) == self.root


class _Server:
    """The fields of one server, read once per ranking."""

    def __init__(self, summary: Summary) -> None:
        self.name = summary.qualified_name.lower()
        self.namespace, _, self.short = self.name.rpartition("/")
        title = (summary.display_name or "").lower()
        self.fields = (
            (_Field(self.short), _NAME, True),
            (_Field("" if title == self.name else title), _TITLE, False),
            (_Field((summary.description or "").lower()), _DESC, False),
        )
        self.space = _Field(self.namespace)
        self.name_words = [w for w in tokens(self.short) if w not in GENERIC]

    def _best(self, word: str, root: str) -> float:
        return next((w for f, w, sub in self.fields if f.has(word, root, substring=sub)), 0.0)

    def weight(self, word: _Word) -> float:
        """The weight of the best field holding ``word`` (a synonym weighs less); 0 for none."""
        itself = self._best(word.text, word.root)
        other = 0.0
        for alt, root in word.alternatives:
            if max(itself, other) >= _NAME * _SYNONYM:
                break
            other = max(other, _SYNONYM * self._best(alt, root))
        if other > itself:  # the synonym's field counts, and saying the word itself too, a little
            return other + 0.1 * itself
        if not itself and self.space.has(word.text, word.root):
            return _NAMESPACE
        return itself


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


def _tier(server: _Server, q: str) -> int:
    """0 for the exact name, 1 for a name the query starts (3 letters or more: ``gh`` says no name), else 2."""
    if q in (server.name, server.short):
        return 0
    return 1 if len(q) >= 3 and (server.short.startswith(q) or server.name.startswith(q)) else 2


def _score(
    server: _Server, q: str, weights: tuple[float, ...], words: Sequence[_Word], generic: Sequence[str]
) -> Score | None:
    """``server``'s score from its ``weights`` for ``words`` (None when it matches none and is not named)."""
    tier = _tier(server, q)
    if tokens(server.namespace.rsplit(".", 1)[-1]) == tokens(q):  # the publisher, by name (``mcp-setup``)
        weights = tuple(max(w, _TITLE) for w in weights)
    if tier == 2 and not any(weights):
        return None
    name = server.fields[0][0]
    bonus = 0.1 * sum(1 for word in generic if name.has(word, stem(word)))
    if server.name_words:  # a name that is mostly the query (``slack-mcp``) before a longer one
        covered = sum(1 for w in server.name_words if any(word.covers(w) for word in words))
        bonus += 0.5 * covered / len(server.name_words)
    return Score(tier, weights, bonus)


def score(summary: Summary, query: str | None) -> Score | None:
    """How ``summary`` matches ``query`` as typed (no typo corrected); None when no word of it matches."""
    q = (query or "").strip().lower()
    if not q:
        return Score(0, (), 0.0)
    telling, generic = query_words(q)
    server, words = _Server(summary), [_Word.of(w, alts) for w, alts in zip(telling, alternatives_of(telling))]
    return _score(server, q, tuple(server.weight(w) for w in words), words, generic)


@dataclass(frozen=True)
class Ranked(Generic[S]):
    """The servers matching a query, best first, and what the query was read as.

    ``did_you_mean``: the query with its typos corrected (only words of the servers' own text,
    and the query's words that matched), when a word matched nothing as typed: searched in its
    place when near enough, else only offered. ``unmatched``: the words that matched nothing,
    even corrected."""

    servers: list[S]
    did_you_mean: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)


def _vocabulary(texts: Sequence[_Server]) -> tuple[Vocabulary, set[str]]:
    """Every word of the servers' names, titles and descriptions (a name word preferred), and the name words."""
    weights: dict[str, float] = {}
    names: set[str] = set()
    for text in texts:
        seen: dict[str, float] = {}
        for f, w, _sub in text.fields:
            for word in f.words:
                seen[word] = max(seen.get(word, 0.0), w)
                if word.endswith("s") and not word.endswith("ss") and len(word) > 4:
                    seen.setdefault(word[:-1], w)  # ``clusters`` is there: ``clustr`` reads ``cluster``
        names.update(text.fields[0][0].words)
        for word, w in seen.items():
            weights[word] = weights.get(word, 0.0) + w
    return Vocabulary(weights), names


@dataclass
class _Reading:
    """A query as searched (typos corrected): each server's score, and what :class:`Ranked` says of it."""

    scores: list[Score | None]
    did_you_mean: list[str]
    unmatched: list[str]


def _read(texts: Sequence[_Server], q: str) -> _Reading:
    """Reads ``q`` against ``texts``: a word none of them holds (nor a synonym of it) is a typo,
    searched as the nearest word of their text when near enough (:mod:`registry_clients.spelling`),
    else only suggested from their names. A word some server holds is never corrected, so a typo
    can never push a right match down."""
    telling, generic = query_words(q)
    words = [_Word.of(w, alts) for w, alts in zip(telling, alternatives_of(telling))]
    columns = [[t.weight(word) for t in texts] for word in words]
    unknown = [j for j, column in enumerate(columns) if not any(column)]
    said: dict[str, str | None] = {}  # a typed word → the word the suggestion says instead (None: left out)
    unmatched: list[str] = []
    if unknown:
        vocabulary, names = _vocabulary(texts)
        for j in unknown:
            typed = telling[j]
            fix = vocabulary.nearest(typed, allowed(typed))
            if fix is not None:
                words[j] = _Word.of(fix)
                columns[j] = [t.weight(words[j]) for t in texts]
            else:
                unmatched.append(typed)
                fix = (
                    vocabulary.nearest(typed, allowed(typed) + 1, among=names, same_start=True)
                    if len(typed) >= 6
                    else None
                )
            said[typed] = fix
    fixes = {typed: word.text for typed, word in zip(telling, words) if word.text != typed}
    read = _WORD.sub(lambda m: fixes.get(m.group(), m.group()), q)  # exact and prefix names as corrected too
    rows = zip(*columns) if columns else ((),) * len(texts)
    scores = [_score(t, read, tuple(row), words, generic) for t, row in zip(texts, rows)]
    offered = [said.get(w, w) for w in dict.fromkeys(tokens(q))]
    did_you_mean = [" ".join(w for w in offered if w)] if any(said.values()) else []
    return _Reading(scores, did_you_mean, unmatched)


def _lexical(servers: Sequence[S], reading: _Reading) -> list[tuple[Score, int, S]]:
    """Matches best first. A rare word weighs more (``jira`` over ``issues``: inverse document
    frequency over ``servers``), and a match only in the namespace counts only when nothing
    matches elsewhere (``github`` would otherwise be every ``io.github.*`` server)."""
    scored = [(sc, i, s) for i, (s, sc) in enumerate(zip(servers, reading.scores)) if sc is not None]
    if any(not sc.namespace_only for sc, _, _ in scored):
        scored = [t for t in scored if not t[0].namespace_only]
    width = max((len(sc.words) for sc, _, _ in scored), default=0)
    idf = [
        math.log(1 + len(servers) / max(1, sum(1 for sc, _, _ in scored if len(sc.words) > j and sc.words[j])))
        for j in range(width)
    ]
    scored.sort(key=lambda t: (t[0].key(idf), t[1]))
    return scored


def ranked(servers: Sequence[S], query: str | None, *, semantic: Mapping[str, int] | None = None) -> Ranked[S]:
    """The servers that match ``query``, best first (stable for equal scores), and how it was read.

    ``semantic`` maps a qualified name to its position in a semantic source's own order:
    those servers are kept even when no word matches, and both orders are blended."""
    q = (query or "").strip().lower()
    if not q:
        return Ranked(list(servers))
    reading = _read([_Server(s) for s in servers], q)
    lexical = _lexical(servers, reading)
    if not semantic:
        return Ranked([s for *_, s in lexical], reading.did_you_mean, reading.unmatched)
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
    return Ranked([s for *_, s in blended], reading.did_you_mean, reading.unmatched)


def rank(servers: Sequence[S], query: str | None, *, semantic: Mapping[str, int] | None = None) -> list[S]:
    """The servers of :func:`ranked`, without how the query was read."""
    return ranked(servers, query, semantic=semantic).servers


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
