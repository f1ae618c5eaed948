"""Everything the promise rests on: secret refs and values (``refs.py``), the redactor
(``redact.py``), the guess guard (``guard.py``), pending secret prompts (``prompts.py``),
the single-use keys of page links (``capabilities.py``),
secret-looking chat text (``chat.py``) and the data key (``vault.py``).

Imports only :mod:`setup_agent.errors` (and libraries): no other core package, no face.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .capabilities import Capabilities
    from .chat import WITHHELD, looks_like_secret, scrub_secrets
    from .guard import GuardCounts, GuardIncident, GuessGuard
    from .prompts import PendingPrompt, PromptBroker, PromptsElsewhere
    from .redact import RedactingFilter, Redactor, install_log_redaction
    from .refs import SecretRefStore, SecretValue
    from .shared_refs import SharedRefStore
    from .vault import Vault
    from .weak import WEAK_VALUE_WARNING, is_weak_value

__all__ = [
    "Capabilities",
    "GuardIncident",
    "GuardCounts",
    "GuessGuard",
    "install_log_redaction",
    "is_weak_value",
    "looks_like_secret",
    "PendingPrompt",
    "PromptBroker",
    "PromptsElsewhere",
    "RedactingFilter",
    "Redactor",
    "scrub_secrets",
    "SecretRefStore",
    "SecretValue",
    "SharedRefStore",
    "Vault",
    "WEAK_VALUE_WARNING",
    "WITHHELD",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Capabilities": "capabilities",
        "GuardIncident": "guard",
        "GuardCounts": "guard",
        "GuessGuard": "guard",
        "install_log_redaction": "redact",
        "is_weak_value": "weak",
        "looks_like_secret": "chat",
        "PendingPrompt": "prompts",
        "PromptBroker": "prompts",
        "PromptsElsewhere": "prompts",
        "RedactingFilter": "redact",
        "Redactor": "redact",
        "scrub_secrets": "chat",
        "SecretRefStore": "refs",
        "SecretValue": "refs",
        "SharedRefStore": "shared_refs",
        "Vault": "vault",
        "WEAK_VALUE_WARNING": "weak",
        "WITHHELD": "chat",
    },
)
