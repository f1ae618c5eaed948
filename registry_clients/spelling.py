"""Typos: the word of a vocabulary nearest to a word nobody's text holds.

Distance is Damerau's (optimal string alignment): one edit is a letter added, dropped,
changed, or two neighbours swapped (``notoin`` → ``notion``, ``githbu`` → ``github``,
``postgress`` → ``postgres``: one edit each).

How far a word may be from its correction grows with its length (:func:`allowed`): none
under 4 letters (``jra`` is as near to ``jira`` as to ``ra``), one edit up to 7, two from 8.
The ranker may look one edit further for a *suggestion* ("did you mean"), which it only
offers, never searches in the word's place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["Vocabulary", "allowed", "distance"]


def allowed(word: str) -> int:
    """The edits a correction of ``word`` may be away."""
    n = len(word)
    return 0 if n < 4 else 1 if n < 8 else 2


def distance(a: str, b: str, limit: int) -> int:
    """Edits from ``a`` to ``b`` (a swap of neighbours is one), or ``limit + 1`` when more than ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    if a == b:
        return 0
    before: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if before is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        before, previous = previous, row
    return min(previous[-1], limit + 1)


class Vocabulary:
    """Words with a preference each (a word in many servers' names before a word of one description)."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        self._weights = dict(weights)
        self._by_length: dict[int, list[str]] = {}
        for word in self._weights:
            self._by_length.setdefault(len(word), []).append(word)

    def __contains__(self, word: str) -> bool:
        return word in self._weights

    def nearest(
        self, word: str, limit: int, *, among: Iterable[str] | None = None, same_start: bool = False
    ) -> str | None:
        """The nearest word within ``limit`` edits (the most preferred of equals), or None.

        ``among``: only these words; ``same_start``: only words starting with ``word``'s letter
        (a far guess is believable when the first letter, which people rarely miss, agrees)."""
        if limit <= 0:
            return None
        best: tuple[int, float, str] | None = None
        pool = among if among is not None else self._near_lengths(word, limit)
        for candidate in pool:
            if same_start and candidate[:1] != word[:1]:
                continue
            d = distance(word, candidate, limit)
            if d > limit or d == 0:
                continue
            key = (d, -self._weights.get(candidate, 0.0), candidate)
            if best is None or key < best:
                best = key
        return None if best is None else best[2]

    def _near_lengths(self, word: str, limit: int) -> Iterable[str]:
        for n in range(len(word) - limit, len(word) + limit + 1):
            yield from self._by_length.get(n, ())
