"""The words of a query and of a server's text: tokens, a crude stem, the words that say nothing.

Shared by the ranker (:mod:`registry_clients.ranking`), the synonym tables
(:mod:`registry_clients.synonyms`), typo correction (:mod:`registry_clients.spelling`) and the
official registry's widened search (:mod:`registry_clients.official`).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["GENERIC", "query_words", "stem", "tokens"]

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


def tokens(text: str | None) -> list[str]:
    return [t for t in _SPLIT.split((text or "").lower()) if t]


@lru_cache(maxsize=1 << 16)  # a search stems every word of every server: the words recur
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
