"""The ``per_member`` argument of an install: which keys of the server every member
of a team gateway enters for themselves (``token:NAME``; see ``setup_agent/gateway/members.py``).

Names only (their form is checked by the install's model, ``tool_requests.py``), checked here
against the keys the prepared launch takes; a name that matches none is refused without being
quoted (the no-echo rule, ``tool_args.py``). The install's own value of such a key (if given)
stays the shared one, used by every caller that is not a member.
"""

from __future__ import annotations

from collections.abc import Sequence

from setup_agent.errors import InvalidInput

__all__ = ["per_member_keys"]


def per_member_keys(names: Sequence[str], known: set[str]) -> list[str]:
    """The install's ``per_member`` names, each one of ``known`` (the keys the launch takes)."""
    if any(k not in known for k in names):
        raise InvalidInput("per_member names a setting this server does not take; mcp_setup_get lists its settings.")
    return sorted(set(names))
