"""The redactor: the last gate before any string leaves the core.

It knows every live secret value (the ref store's, plus decrypted stored values handed to
running servers) and replaces each occurrence, and its base64 and URL-encoded forms, with a
placeholder: the value's ref where it has one, ``[secret:KEY]`` otherwise.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["RedactingFilter", "Redactor", "install_log_redaction"]

Source = Callable[[], Iterable[tuple[str, str]]]  # yields (placeholder, value)


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
        self._pattern: re.Pattern[str] | None = None
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

    def _compiled(self) -> tuple[re.Pattern[str] | None, dict[str, str]]:
        with self._lock:
            if not self._dirty:
                return self._pattern, self._table
            table: dict[str, str] = {}
            pairs = list(self._static.items())
            for source in self._sources:
                pairs.extend((value, placeholder) for placeholder, value in source())
            for value, placeholder in pairs:
                for form in _forms(value):
                    table.setdefault(form, placeholder)
            if table:
                alts = sorted(table, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(a) for a in alts))
            else:
                self._pattern = None
            self._table = table
            self._dirty = False
            return self._pattern, self._table

    # -- hiding -------------------------------------------------------------------
    def redact(self, text: str) -> str:
        if not isinstance(text, str) or not text:
            return text
        pattern, table = self._compiled()
        if pattern is None:
            return text
        return pattern.sub(lambda m: table[m.group(0)], text)

    def redact_obj(self, obj: Any) -> Any:
        """Redact every string (keys included) inside dicts, lists and tuples."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact_obj(k): self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_obj(v) for v in obj)
        return obj

    def contains_secret(self, text: str) -> bool:
        pattern, _ = self._compiled()
        return bool(pattern and isinstance(text, str) and pattern.search(text))


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
        record.msg = self.redactor.redact(message)
        record.args = None
        if record.exc_info:
            formatter = logging.Formatter()
            record.exc_text = self.redactor.redact(formatter.formatException(record.exc_info))
            record.exc_info = None
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info)
        return True


def install_log_redaction(redactor: Redactor, *handlers: logging.Handler) -> None:
    """Attach the redacting filter to ``handlers`` (default: every root handler)."""
    targets = handlers or tuple(logging.getLogger().handlers)
    for handler in targets:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redactor))
