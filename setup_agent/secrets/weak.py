"""Weak secret values: short or guessable ones a determined agent could find by guessing.

Only inspected, never kept. Shown by the secret page, the web modal and the terminal.
"""

from __future__ import annotations

import re

__all__ = ["WEAK_VALUE_WARNING", "is_weak_value"]

#: Shown to the user (secret page, web modal, terminal) for a short or guessable value.
WEAK_VALUE_WARNING = (
    "This value is short or easy to guess (under 8 characters, or a word, a date or a simple pattern "
    "such as Summer2024!). mcp-setup hides it from the assistant, but such a value cannot be protected "
    "against a determined agent: it could find it by guessing."
)
_WEAK_MIN_CHARS = 8
_COMMON_WORDS = (
    "password",
    "passwort",
    "qwerty",
    "azerty",
    "letmein",
    "welcome",
    "admin",
    "secret",
    "changeme",
    "iloveyou",
    "monkey",
    "dragon",
    "master",
    "login",
    "abc123",
    "111111",
    "123123",
    "summer",
    "winter",
    "spring",
    "autumn",
    "football",
    "baseball",
    "princess",
    "sunshine",
    "shadow",
    "trustno1",
)
#: a word with a capital, digits (a year) and a symbol or two: Summer2024!, Password1
_WORD_DIGITS = re.compile(r"[A-Za-z]{2,}[0-9]{0,4}[^A-Za-z0-9]{0,3}|[0-9]{1,4}[A-Za-z]{2,}[^A-Za-z0-9]{0,3}")
_SEQUENCES = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl", "zxcvbnm")


def is_weak_value(value: str) -> bool:
    """Whether a secret value is short or dictionary-like: a guessing agent could find it.

    Under 8 characters; only digits (a PIN, a date); a word with a few digits and symbols
    (``Summer2024!``); a common password word inside; few distinct characters; a keyboard or
    alphabet run. A long random token is not weak. The value is only inspected, never kept.
    """
    if not isinstance(value, str):
        return False
    text = value.strip()
    if len(text) < _WEAK_MIN_CHARS:
        return True
    lower = text.lower()
    if text.isdigit() or len(set(lower)) <= 3 or (len(text) <= 20 and _WORD_DIGITS.fullmatch(text)):
        return True
    if any(word in lower for word in _COMMON_WORDS):
        return True
    return len(text) < 16 and any(lower in seq or lower in seq[::-1] for seq in _SEQUENCES)
