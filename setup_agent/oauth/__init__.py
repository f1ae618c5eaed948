"""Sign-ins for remote servers: :class:`SignIns` (``sign_ins.py``, behind
``mcp_setup_authorize``), the grant and the auth that renews it (``grant.py``), what a sign-in
refuses to send (``checks.py``), and the loopback listener that catches the redirect
(``callback.py``); for a team's replicas, the redirect received by any of them
(``shared_callback.py``: :func:`callback_answer` behind serve's ``/oauth/callback``), whose code
that replica redeems itself (``shared_exchange.py``), so a sign-in survives the replica that
started it.

Imports store (a team's sign-in rows), secrets and errors only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .callback import CALLBACK_PATH
    from .grant import GRANT_KEY, GrantAuth
    from .shared_callback import callback_answer, callback_page
    from .sign_ins import SignIns

__all__ = [
    "CALLBACK_PATH",
    "GRANT_KEY",
    "GrantAuth",
    "SignIns",
    "callback_answer",
    "callback_page",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CALLBACK_PATH": "callback",
        "GRANT_KEY": "grant",
        "GrantAuth": "grant",
        "SignIns": "sign_ins",
        "callback_answer": "shared_callback",
        "callback_page": "shared_callback",
    },
)
