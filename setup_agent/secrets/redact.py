"""The redactor: the last gate before any string leaves the core.

It knows every live secret value (the ref store's, plus decrypted stored values handed to
running servers) and replaces each occurrence, and its base64 and URL-encoded forms, with a
placeholder: the value's ref where it has one, ``[secret:KEY]`` otherwise.

Short values (issue #10, item 8): a form of at least :data:`ANYWHERE_CHARS` characters is
replaced wherever it occurs; a shorter form only as a whole token (not touching a letter,
digit or ``_`` on either side), and a value under :data:`MIN_REDACT_CHARS` characters is not
replaced in outbound text at all (a one-character secret would otherwise rewrite every id).
Short values are still kept out of logs (:class:`RedactingFilter` redacts in *strict* mode,
where every length counts, whole tokens below :data:`ANYWHERE_CHARS`), and
:meth:`Redactor.contains_secret` with ``strict=True`` finds them byte-exactly, for the
guessing guard (:mod:`setup_agent.secrets.guard`) and for checks of argv and disk.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import quote, quote_plus

__all__ = ["ANYWHERE_CHARS", "MIN_REDACT_CHARS", "RedactingFilter", "Redactor", "install_log_redaction"]

Source = Callable[[], Iterable[tuple[str, str]]]  # yields (placeholder, value)

#: Values shorter than this are not replaced in outbound text (only refused elsewhere).
MIN_REDACT_CHARS = 4
#: Forms at least this long are replaced anywhere; shorter ones only as whole tokens.
ANYWHERE_CHARS = 8
_WORD = "A-Za-z0-9_"


def _forms(value: str) -> set[str]:
    raw = value.encode()
    forms = {value, quote(value, safe=""), quote_plus(value), quote(value)}
    for enc in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms.add(enc)
        forms.add(enc.rstrip("="))
    # base64 of the value at each of the three alignments inside a longer blob
    # (e.g. "user:VALUE" in a Basic auth header): the stable middle part.
    for shift in (1, 2):
        enc = base64.b64encode(b"\0" * shift + raw).decode()
        core = enc[4 : len(enc) - 4]
        if len(core) >= 8:
            forms.add(core)
    return {f for f in forms if f}


class Redactor:
    """Replaces live secret values in strings and nested JSON-like objects."""

    def __init__(self) -> None:
        self._sources: list[Source] = []
        self._static: dict[str, str] = {}  # value -> placeholder
        self._lock = threading.Lock()
        self._patterns = _Patterns(None, None)
        self._table: dict[str, str] = {}
        self._dirty = True

    # -- what to hide -------------------------------------------------------------
    def add_source(self, source: Source) -> None:
        with self._lock:
            self._sources.append(source)
            self._dirty = True

    def register(self, value: str, placeholder: str) -> None:
        """Hide ``value`` (a decrypted stored secret in use) behind ``placeholder``."""
        if not value:
            return
        with self._lock:
            self._static[value] = placeholder
            self._dirty = True

    def unregister(self, value: str) -> None:
        with self._lock:
            if self._static.pop(value, None) is not None:
                self._dirty = True

    def invalidate(self) -> None:
        """Call when a source's values changed."""
        with self._lock:
            self._dirty = True

    def _compiled(self) -> tuple[_Patterns, dict[str, str]]:
        with self._lock:
            if not self._dirty:
                return self._patterns, self._table
            table: dict[str, str] = {}
            outbound: set[str] = set()  # forms of values long enough to replace in outbound text
            pairs = list(self._static.items())
            for source in self._sources:
                pairs.extend((value, placeholder) for placeholder, value in source())
            for value, placeholder in pairs:
                for form in _forms(value):
                    table.setdefault(form, placeholder)
                    if len(value) >= MIN_REDACT_CHARS:
                        outbound.add(form)
            self._patterns = _Patterns(_pattern(outbound), _pattern(set(table)))
            self._table = table
            self._dirty = False
            return self._patterns, self._table

    # -- hiding -------------------------------------------------------------------
    def redact(self, text: str, *, strict: bool = False) -> str:
        """``text`` with every known value replaced by its placeholder.

        ``strict`` (logs) also replaces values under :data:`MIN_REDACT_CHARS` characters.
        """
        if not isinstance(text, str) or not text:
            return text
        patterns, table = self._compiled()
        pattern = patterns.strict if strict else patterns.outbound
        if pattern is None:
            return text
        return pattern.sub(lambda m: table[m.group(0)], text)

    def redact_obj(self, obj: Any, *, strict: bool = False) -> Any:
        """Redact every string (keys included) inside dicts, lists and tuples."""
        if isinstance(obj, str):
            return self.redact(obj, strict=strict)
        if isinstance(obj, dict):
            return {self.redact_obj(k, strict=strict): self.redact_obj(v, strict=strict) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_obj(v, strict=strict) for v in obj)
        return obj

    def contains_secret(self, text: str, *, strict: bool = False) -> bool:
        """Whether ``text`` holds a known value (``strict``: of any length, short ones as whole
        tokens; the guessing guard and the argv/disk checks use it)."""
        if not isinstance(text, str) or not text:
            return False
        patterns, _ = self._compiled()
        pattern = patterns.strict if strict else patterns.outbound
        return bool(pattern and pattern.search(text))


class _Patterns(NamedTuple):
    outbound: re.Pattern[str] | None  # values of at least MIN_REDACT_CHARS
    strict: re.Pattern[str] | None  # every value


def _pattern(forms: set[str]) -> re.Pattern[str] | None:
    """One alternation, longest first; a form under ANYWHERE_CHARS only as a whole token."""
    if not forms:
        return None
    alts = []
    for form in sorted(forms, key=len, reverse=True):
        escaped = re.escape(form)
        if len(form) < ANYWHERE_CHARS:
            escaped = f"(?<![{_WORD}]){escaped}(?![{_WORD}])"
        alts.append(escaped)
    return re.compile("|".join(alts))


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
