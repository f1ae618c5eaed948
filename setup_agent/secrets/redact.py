"""The redactor: the last gate before any string leaves the core.

It knows every live secret value (the ref store's, plus decrypted stored values handed to
running servers) and replaces each occurrence, in every form :mod:`.forms` lists (plain,
URL-quoted, base64 and base64url at any alignment, base32, hex, JSON and HTML escapes, the
value reversed), with a placeholder: the value's ref where it has one, ``[secret:KEY]``
otherwise.

How a form is matched:

* a form of at least :data:`ANYWHERE_CHARS` characters is matched anywhere, *normalised*:
  whitespace and zero-width characters between its characters and any case
  (:func:`~.forms.skeleton`): spaced out, joined by zero-width characters, upper-cased, base64
  wrapped at any column;
* a shorter form only exactly and as a whole token (not touching a letter, digit or ``_``);
  a value under :data:`MIN_REDACT_CHARS` characters is not replaced in outbound text at all
  (a one-character secret would otherwise rewrite every id). Short values
  are still kept out of logs (:class:`RedactingFilter` redacts in *strict* mode, where every
  length counts) and :meth:`Redactor.contains_secret` with ``strict=True`` finds them;
* a string whose decoded text (HTML entities, JSON escapes, percent-encoding, mixed in ways no
  table lists) holds a value is withheld whole;
* :meth:`Redactor.redact_obj` also scans the string values of an object joined in order (a
  value split across two content blocks, or across structured fields and ``_meta``) and cuts
  what spans them.

The search is one Aho-Corasick automaton per mode over the UTF-8 of the text's skeleton (a
DFA in Rust, ``ahocorasick-rs``): 1 MiB with 20 stored secrets stays under 20 ms (``bench/``, the
redactor row). A hit is then located in the original text with a pattern of its own.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import ahocorasick_rs as ac

from .forms import ANYWHERE_CHARS, decoded_views, forms, loose_pattern, skeleton, skeleton_bytes, skeleton_offset
from .refs import SecretValue

__all__ = ["ANYWHERE_CHARS", "MIN_REDACT_CHARS", "RedactingFilter", "Redactor", "install_log_redaction"]

Source = Callable[[], Iterable[tuple[str, str]]]  # yields (placeholder, value)

#: Values shorter than this are not replaced in outbound text (only refused elsewhere).
MIN_REDACT_CHARS = 4
_WITHHELD = "{placeholder} (withheld: this text held a protected value in an encoded form)"
_SKIP_JOIN_KEYS = frozenset({"type"})
_SMALL_CHARS = (
    64 * 1024
)  # up to this much text, an object is first searched as a whole  # a content block's "type" sits between two blocks' texts


class _Index(NamedTuple):
    """One mode's search: long forms by skeleton (anywhere), short forms exactly (whole tokens)."""

    long: ac.BytesAhoCorasick | None  # over the skeletons' UTF-8
    long_keys: list[str]
    long_places: list[str]
    short: ac.BytesAhoCorasick | None  # over exact short forms' UTF-8 (overlapping search)
    short_forms: list[str]
    short_places: list[str]
    width: int  # the longest skeleton


def _index(table: dict[str, str]) -> _Index:
    long: dict[str, str] = {}
    short: dict[str, str] = {}
    for form, placeholder in sorted(table.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        skel = skeleton(form).replace("\0", "")
        if len(form) >= ANYWHERE_CHARS and len(skel) >= ANYWHERE_CHARS - 2:
            long.setdefault(skel, placeholder)
        else:
            short.setdefault(form, placeholder)
    long_keys, short_forms = list(long), list(short)
    return _Index(
        ac.BytesAhoCorasick(
            [_utf8(k) for k in long_keys], matchkind=ac.MatchKind.LeftmostLongest, implementation=ac.Implementation.DFA
        )
        if long_keys
        else None,
        long_keys,
        [long[k] for k in long_keys],
        ac.BytesAhoCorasick([_utf8(k) for k in short_forms], implementation=ac.Implementation.DFA)
        if short_forms
        else None,
        short_forms,
        [short[k] for k in short_forms],
        max((len(k) for k in long_keys), default=0),
    )


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement that is ``text`` as written (``re.sub`` would read a string's backslashes)."""
    return lambda _match: text


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


_EMPTY = _Index(None, [], [], None, [], [], 0)


def _known(value: str | SecretValue) -> str:
    """The text the redactor looks for: it must know a value's text to find it."""
    return value.reveal() if isinstance(value, SecretValue) else value


class Redactor:
    """Replaces live secret values in strings and nested JSON-like objects."""

    def __init__(self) -> None:
        self._sources: list[Source] = []
        self._static: dict[str, str] = {}  # value -> placeholder
        self._lock = threading.Lock()
        self._outbound = _EMPTY
        self._strict = _EMPTY
        self._loose: dict[str, re.Pattern[str]] = {}
        self._dirty = True

    # -- what to hide -------------------------------------------------------------
    def add_source(self, source: Source) -> None:
        with self._lock:
            self._sources.append(source)
            self._dirty = True

    def register(self, value: str | SecretValue, placeholder: str) -> None:
        """Hide ``value`` (a decrypted stored secret in use) behind ``placeholder``. The redactor
        must know a value's text to find it: a masked one is read here."""
        plain = _known(value)
        if not plain:
            return
        with self._lock:
            self._static[plain] = placeholder
            self._dirty = True

    def unregister(self, value: str | SecretValue) -> None:
        plain = _known(value)
        with self._lock:
            if self._static.pop(plain, None) is not None:
                self._dirty = True

    def invalidate(self) -> None:
        """Call when a source's values changed."""
        with self._lock:
            self._dirty = True

    def _index(self, strict: bool) -> _Index:
        with self._lock:
            if self._dirty:
                strict_table: dict[str, str] = {}
                outbound: dict[str, str] = {}
                pairs = list(self._static.items())
                for source in self._sources:
                    pairs.extend((value, placeholder) for placeholder, value in source())
                for value, placeholder in pairs:
                    for form in forms(value):
                        strict_table.setdefault(form, placeholder)
                        if len(value) >= MIN_REDACT_CHARS:
                            outbound.setdefault(form, placeholder)
                self._outbound, self._strict = _index(outbound), _index(strict_table)
                self._loose = {}
                self._dirty = False
            return self._strict if strict else self._outbound

    def _loose_pattern(self, skel: str) -> re.Pattern[str]:
        pattern = self._loose.get(skel)
        if pattern is None:
            pattern = self._loose[skel] = loose_pattern(skel)
        return pattern

    # -- hiding -------------------------------------------------------------------
    def redact(self, text: str, *, strict: bool = False) -> str:
        """``text`` with every known value replaced by its placeholder.

        ``strict`` (logs) also replaces values under :data:`MIN_REDACT_CHARS` characters.
        """
        if not isinstance(text, str) or not text:
            return text
        return self._redact(text, self._index(strict))

    def _redact(self, text: str, idx: _Index) -> str:
        raw = _utf8(text)
        if idx.short is not None and (matches := _short_matches(raw, idx)):
            raw = _replace_short(raw, matches, idx)
            text = raw.decode("utf-8", "surrogatepass")
        if idx.long is not None:
            hits = idx.long.find_matches_as_indexes(skeleton_bytes(raw))
            if hits:
                for i in sorted({h[0] for h in hits}, key=lambda i: -len(idx.long_keys[i])):
                    place = idx.long_places[i]
                    text = self._loose_pattern(idx.long_keys[i]).sub(_literal(place), text)
                if (left := _long_hit(_utf8(text), idx)) is not None:  # not found again in the original
                    return _WITHHELD.format(placeholder=left)
        for view in decoded_views(text):
            if (found := _hit(view, idx)) is not None:
                return _WITHHELD.format(placeholder=found)
        return text

    def redact_obj(self, obj: Any, *, strict: bool = False) -> Any:
        """Redact every string (keys included) inside dicts, lists and tuples, and what the string
        values hold joined in order (a value split across two of them)."""
        if isinstance(obj, str):
            return self.redact(obj, strict=strict)
        idx = self._index(strict)
        strings: list[str] = []
        joinable: list[int] = []
        _collect(obj, strings, joinable, join=True)
        if not strings:
            return obj
        if sum(map(len, strings)) <= _SMALL_CHARS and not self.contains_any(
            [*strings, "".join(strings[k] for k in joinable)], strict=strict
        ):  # the common small answer: one search over it all, nothing to replace
            return _rebuild(obj, iter(strings))
        out = [self._redact(s, idx) if s else s for s in strings]
        if idx.long is not None and len(joinable) > 1:
            _cut_across(out, joinable, idx)
        return _rebuild(obj, iter(out))

    def contains_any(self, texts: Iterable[str], *, strict: bool = False) -> bool:
        """Whether any of ``texts`` holds a known value (as :meth:`contains_secret` of each, in one
        search: the texts joined by a NUL, which no form holds and which ends a token)."""
        texts = [t for t in texts if isinstance(t, str) and t]
        if not texts:
            return False
        idx = self._index(strict)
        if _hit("\0".join(texts), idx) is not None:
            return True
        return any(_hit(view, idx) is not None for text in texts for view in decoded_views(text))

    def contains_secret(self, text: str, *, strict: bool = False) -> bool:
        """Whether ``text`` holds a known value in any form (``strict``: of any length, short ones
        as whole tokens; the guessing guard and the argv/disk checks use it)."""
        if not isinstance(text, str) or not text:
            return False
        idx = self._index(strict)
        return _hit(text, idx) is not None or any(_hit(view, idx) is not None for view in decoded_views(text))


def _is_word(byte: int) -> bool:
    return 48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122 or byte == 95


def _short_matches(raw: bytes, idx: _Index) -> list[tuple[int, int, int]]:
    """Exact short forms in ``raw`` that stand as whole tokens, leftmost-longest, not overlapping."""
    found: list[tuple[int, int, int]] = []
    if idx.short is None:
        return found
    for i, start, end in idx.short.find_matches_as_indexes(raw, overlapping=True):
        if (start and _is_word(raw[start - 1])) or (end < len(raw) and _is_word(raw[end])):
            continue
        found.append((start, end, i))
    found.sort(key=lambda m: (m[0], -(m[1] - m[0])))
    chosen: list[tuple[int, int, int]] = []
    for m in found:
        if not chosen or m[0] >= chosen[-1][1]:
            chosen.append(m)
    return chosen


def _replace_short(raw: bytes, matches: list[tuple[int, int, int]], idx: _Index) -> bytes:
    parts, last = [], 0
    for start, end, i in matches:
        parts.append(raw[last:start])
        parts.append(_utf8(idx.short_places[i]))
        last = end
    parts.append(raw[last:])
    return b"".join(parts)


def _long_hit(raw: bytes, idx: _Index) -> str | None:
    if idx.long is None:
        return None
    hits = idx.long.find_matches_as_indexes(skeleton_bytes(raw))
    return idx.long_places[hits[0][0]] if hits else None


def _hit(text: str, idx: _Index) -> str | None:
    """The placeholder of a value ``text`` holds (as the redactor would replace it), or None."""
    raw = _utf8(text)
    if idx.short is not None and (matches := _short_matches(raw, idx)):
        return idx.short_places[matches[0][2]]
    return _long_hit(raw, idx)


# -- objects: strings in order, and what spans two of them ---------------------------------
def _collect(obj: Any, out: list[str], joinable: list[int], *, join: bool) -> None:
    if isinstance(obj, str):
        if join:
            joinable.append(len(out))
        out.append(obj)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _collect(key, out, joinable, join=False)
            _collect(value, out, joinable, join=not (isinstance(key, str) and key in _SKIP_JOIN_KEYS))
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            _collect(value, out, joinable, join=True)


def _rebuild(obj: Any, strings: Iterator[str]) -> Any:
    if isinstance(obj, str):
        return next(strings)
    if isinstance(obj, dict):
        return {_rebuild(k, strings): _rebuild(v, strings) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_rebuild(v, strings) for v in obj)
    return obj


def _edges(text: str, width: int) -> tuple[str, str, bool]:
    """The skeleton of ``text``'s first and last ``width`` kept characters, and whether that is all of it."""
    chars = 4 * width
    if len(text) > 2 * chars:
        head, tail = skeleton(text[:chars]), skeleton(text[-chars:])
        if len(head) >= width and len(tail) >= width:
            return head[:width], tail[-width:], False
    sk = skeleton(text)
    if len(sk) <= 2 * width:
        return sk, sk, True
    return sk[:width], sk[-width:], False


def _cut_across(out: list[str], joinable: list[int], idx: _Index) -> None:
    """Find values that span joinable strings (their edges joined) and cut them out, in place."""
    for _round in range(len(joinable) + 4):
        joined: list[str] = []
        spans: list[tuple[int, int, int]] = []  # (start, end, index in out) of each piece's edge
        pos = 0
        for k in joinable:
            if not out[k]:
                continue
            head, tail, whole = _edges(out[k], idx.width)
            if whole:
                joined.append(head)
                spans.append((pos, pos + len(head), k))
                pos += len(head)
            else:  # a break the automaton cannot match across, between this piece's two edges
                joined.extend((head, "\0", tail))
                spans.append((pos, pos + len(head), k))
                spans.append((pos + len(head) + 1, pos + len(head) + 1 + len(tail), k))
                pos += len(head) + 1 + len(tail)
        flat = "".join(joined)
        encoded = _utf8(flat)
        hits = idx.long.find_matches_as_indexes(encoded) if idx.long is not None and len(spans) > 1 else []
        if not hits:
            return
        i, a, b = hits[0]
        if len(encoded) != len(flat):  # byte offsets → character offsets
            a, b = len(encoded[:a].decode("utf-8", "surrogatepass")), len(encoded[:b].decode("utf-8", "surrogatepass"))
        inside = [(s, e, k) for s, e, k in spans if s < b and e > a]
        if len(inside) < 2:  # cannot happen after per-string redaction; withhold to be safe
            for _s, _e, k in inside:
                out[k] = _WITHHELD.format(placeholder=idx.long_places[i])
            continue
        (_s0, e0, first), (sn, _en, last) = inside[0], inside[-1]
        out[first] = out[first][: skeleton_offset(out[first], e0 - a, from_end=True)] + idx.long_places[i]
        for _s, _e, k in inside[1:-1]:
            out[k] = ""
        out[last] = out[last][skeleton_offset(out[last], b - sn) :]


class RedactingFilter(logging.Filter):
    """A logging filter that renders the record and redacts it (message, args, traceback)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string must not drop the record
            message = str(record.msg)
        record.msg = self.redactor.redact(message, strict=True)
        record.args = None
        if record.exc_info:
            formatter = logging.Formatter()
            record.exc_text = self.redactor.redact(formatter.formatException(record.exc_info), strict=True)
            record.exc_info = None
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info, strict=True)
        return True


def install_log_redaction(redactor: Redactor, *handlers: logging.Handler) -> None:
    """Attach the redacting filter to ``handlers`` (default: every root handler)."""
    targets = handlers or tuple(logging.getLogger().handlers)
    for handler in targets:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redactor))
