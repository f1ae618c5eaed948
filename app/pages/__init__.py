"""The one-time local pages a person answers on: the secret page (``secret.py``, its
HTML in ``html.py``, its loopback server in ``server.py``) and the consent page (``consent.py``).
The stdio face, ``serve`` and the terminal all use them.

Imports the core only; never cli, web or mcp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .consent import ONLY_THESE, consent_lines, consent_path, tools_note
    from .secret import SECURITY_HEADERS, create_secret_app, token_ok
    from .server import SecretPageServer, tcp_listener

__all__ = [
    "ONLY_THESE",
    "consent_path",
    "create_secret_app",
    "consent_lines",
    "SecretPageServer",
    "SECURITY_HEADERS",
    "tcp_listener",
    "token_ok",
    "tools_note",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ONLY_THESE": "consent",
        "consent_path": "consent",
        "create_secret_app": "secret",
        "consent_lines": "consent",
        "SecretPageServer": "server",
        "SECURITY_HEADERS": "secret",
        "tcp_listener": "server",
        "token_ok": "secret",
        "tools_note": "consent",
    },
)
