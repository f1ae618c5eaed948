"""Secret-looking text in chat: a known live secret, a known key prefix (``sk-``, ``ghp_``, …),
an AWS key id, a JWT, a URL with a password, or a long high-entropy token. The harness keeps
such text out of the model's view and the transcript (:data:`WITHHELD` in its place).
"""

from __future__ import annotations

import math
import re
from collections import Counter

from .redact import Redactor

__all__ = ["WITHHELD", "looks_like_secret", "scrub_secrets"]

WITHHELD = "[withheld: looks like a secret]"

_PREFIX = re.compile(
    r"^(sk-|sk_|rk_live_|pk_live_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abposr]-|xapp-|secret_|ntn_"
    r"|AIza|hf_|npm_|pypi-|shpat_|dop_v1_)[A-Za-z0-9_\-.=]{8,}"
)
_AWS = re.compile(r"^(AKIA|ASIA)[0-9A-Z]{16}$")
_JWT = re.compile(r"^eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*$")
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
_TOKEN = re.compile(r"\S+")
_STRIP = "\"'`()[]{}<>,;"


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _token_is_secret(token: str) -> bool:
    token = token.strip(_STRIP).rstrip(".:")
    if len(token) < 12:
        return False
    if _PREFIX.match(token) or _AWS.match(token) or _JWT.match(token) or _URL_PASSWORD.search(token):
        return True
    if len(token) < 20 or "://" in token or token[0] in "/~." or "@" in token:
        return False
    classes = sum(bool(re.search(p, token)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes >= 2 and _entropy(token) >= 3.5


def looks_like_secret(text: str, redactor: Redactor | None = None) -> bool:
    """True for a known live secret, a known key prefix, a JWT, or a long high-entropy token."""
    if not isinstance(text, str) or not text.strip():
        return False
    if redactor is not None and redactor.contains_secret(text):
        return True
    return any(_token_is_secret(m.group(0)) for m in _TOKEN.finditer(text))


def scrub_secrets(text: str, redactor: Redactor | None = None) -> tuple[str, list[str]]:
    """``text`` with secret-looking tokens replaced by :data:`WITHHELD`, and those tokens."""
    if redactor is not None:
        text = redactor.redact(text)
    found: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if _token_is_secret(m.group(0)):
            found.append(m.group(0).strip(_STRIP).rstrip(".:"))
            return WITHHELD
        return m.group(0)

    return _TOKEN.sub(sub, text), found
