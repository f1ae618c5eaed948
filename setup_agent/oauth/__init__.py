"""Sign-ins for remote servers: :class:`SignIns` (``sign_ins.py``, behind
``mcp_setup_authorize``), the grant and the auth that renews it (``grant.py``), and the loopback
listener that catches the redirect (``callback.py``).

Imports secrets and errors only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .grant import GRANT_KEY, GrantAuth
    from .sign_ins import SignIns

__all__ = [
    "GRANT_KEY",
    "GrantAuth",
    "SignIns",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "GRANT_KEY": "grant",
    "GrantAuth": "grant",
    "SignIns": "sign_ins",
})  # fmt: skip
