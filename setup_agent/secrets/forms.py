"""The forms of a secret value the redactor and the guard know.

:func:`forms` is the table: every literal form a benign encoder would write a value in —

=================  =================================================================
form               written by
=================  =================================================================
plain              anything
URL-quoted         ``quote`` (all, path-safe), ``quote_plus``; percent hex either case
base64             standard and URL-safe alphabets, with and without padding, and the
                   stable middle at each of the three alignments inside a longer blob
                   (``user:VALUE`` in a Basic auth header)
base32             with and without padding
hex                of the UTF-8 bytes, either case
JSON               Python/JS (``json.dumps``, ``JSON.stringify``: ``\\"``, ``\\\\``,
                   control characters, non-ASCII as ``\\uXXXX``), Go (``<`` ``>`` ``&``
                   as ``\\u003c`` …, ``/`` as ``\\/``), every character as ``\\uXXXX``
HTML               ``html.escape`` (named entities), every character as ``&#NN;`` and
                   as ``&#xHH;``
reversed           the value backwards
=================  =================================================================

— and :func:`skeleton` the normalisation a long form (:data:`ANYWHERE_CHARS` characters or
more) is matched under: whitespace and zero-width characters removed, ASCII lower-cased. So the
value spaced out, joined by zero-width characters, upper- or lower-cased, base64 wrapped at
any column and hex in either case are all the same skeleton. :func:`decoded_views` gives
the texts behind mixed encodings (some characters escaped, some not), which no table lists.

A deliberate covert encoding by a hostile server cannot be caught by any filter: that is
the sandbox's job. Standard library only.
"""

from __future__ import annotations

import base64
import html
import json
import re
from typing import Any
from urllib.parse import quote, quote_plus, unquote

__all__ = [
    "ANYWHERE_CHARS",
    "SEPARATORS",
    "decoded_views",
    "forms",
    "loose_pattern",
    "skeleton",
    "skeleton_bytes",
    "skeleton_offset",
]

#: Forms at least this long are matched anywhere, normalised; shorter ones exactly, as whole tokens.
ANYWHERE_CHARS = 8

#: What :func:`skeleton` drops: Unicode whitespace and the zero-width / invisible joiners.
SEPARATORS = (
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
    "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
)
# The skeleton folds ASCII letters only, so it is the same text as str and as UTF-8 bytes (the
# redactor scans a large text as bytes: str.translate is slow on non-ASCII text).
_DROP: dict[int, Any] = {ord(c): None for c in SEPARATORS}
_DROP.update({c: c + 32 for c in range(ord("A"), ord("Z") + 1)})
_ASCII_SEPARATORS = "".join(c for c in SEPARATORS if ord(c) < 0x80).encode()
_WIDE_SEPARATORS = re.compile(b"|".join(re.escape(c.encode()) for c in SEPARATORS if ord(c) >= 0x80))
_WIDE_LEADS = re.compile(b"[" + re.escape(bytes(sorted({c.encode()[0] for c in SEPARATORS if ord(c) >= 0x80}))) + b"]")
_SEP_CLASS = "[" + re.escape(SEPARATORS) + "]*"


def skeleton(text: str) -> str:
    """``text`` without separators, ASCII letters lower-cased: one character for each one kept."""
    return text.translate(_DROP)


def skeleton_bytes(raw: bytes) -> bytes:
    """:func:`skeleton` of the text whose UTF-8 is ``raw``, as UTF-8 (fast on a large text)."""
    raw = raw.translate(None, _ASCII_SEPARATORS)
    if _WIDE_LEADS.search(raw):
        raw = _WIDE_SEPARATORS.sub(b"", raw)
    return raw.lower()


def skeleton_offset(text: str, kept: int, *, from_end: bool = False) -> int:
    """The index in ``text`` after its first (or before its last) ``kept`` non-separator
    characters: maps an offset in :func:`skeleton` back."""
    if kept <= 0:
        return len(text) if from_end else 0
    seen = 0
    indexes = range(len(text) - 1, -1, -1) if from_end else range(len(text))
    for i in indexes:
        if _DROP.get(ord(text[i]), 0) is not None:
            seen += 1
            if seen == kept:
                return i if from_end else i + 1
    return 0 if from_end else len(text)


def loose_pattern(skel: str) -> re.Pattern[str]:
    """Finds ``skel`` in an original text: any case, separators between its characters."""
    return re.compile(_SEP_CLASS.join(re.escape(c) for c in skel), re.IGNORECASE)


def _b64_forms(raw: bytes) -> set[str]:
    out: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        enc = encode(raw).decode()
        out.update((enc, enc.rstrip("=")))
        for shift in (1, 2):  # the stable middle at the other two alignments
            shifted = encode(b"\0" * shift + raw).decode()
            core = shifted[4 : len(shifted) - 4]
            if len(core) >= ANYWHERE_CHARS:
                out.add(core)
    return out


def _json_forms(value: str) -> set[str]:
    py = json.dumps(value)[1:-1]  # ensure_ascii: non-ASCII as \uXXXX, as JS with escapes
    raw = json.dumps(value, ensure_ascii=False)[1:-1]  # JSON.stringify
    go = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    out = {py, raw, go, go.replace("/", "\\/"), raw.replace("/", "\\/")}
    every = "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else json.dumps(c)[1:-1] for c in value)
    out.add(every)
    return out


def _html_forms(value: str) -> set[str]:
    return {
        html.escape(value),
        html.escape(value, quote=False),
        html.escape(value).replace("&#x27;", "&#39;"),
        "".join(f"&#{ord(c)};" for c in value),
        "".join(f"&#x{ord(c):x};" for c in value),
    }


def forms(value: str) -> set[str]:
    """Every literal form of ``value`` in the table above (the value itself included)."""
    if not value:
        return set()
    raw = value.encode("utf-8", "surrogatepass")
    out = {value, value[::-1], quote(value, safe=""), quote_plus(value), quote(value)}
    out.update(q.lower() for q in list(out) if "%" in q)  # percent hex in lower case
    out |= _b64_forms(raw)
    b32 = base64.b32encode(raw).decode()
    out.update((b32, b32.rstrip("=")))
    out.update((raw.hex(), raw.hex().upper()))
    out |= _json_forms(value)
    out |= _html_forms(value)
    return {f for f in out if f}


_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])")
_JSON_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _json_unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        return chr(int(body[1:], 16)) if body[0] == "u" else _JSON_SIMPLE[body]

    return _JSON_ESCAPE.sub(one, text)


def decoded_views(text: str) -> list[str]:
    """The texts behind ``text``'s escapes (HTML entities, JSON escapes, percent-encoding), each
    decoded once and all together, when it has any: mixed forms no table lists."""
    views: list[str] = []
    current = text
    if "&" in text and ";" in text:
        view = html.unescape(text)
        if view != text:
            views.append(view)
            current = view
    if "\\" in text:
        view = _json_unescape(text)
        if view != text:
            views.append(view)
        both = _json_unescape(current)
        if both != current and both != view:
            views.append(both)
            current = both
    if "%" in text:
        view = unquote(text)
        if view != text:
            views.append(view)
        every = unquote(current)
        if every != current and every != view:
            views.append(every)
    return views
