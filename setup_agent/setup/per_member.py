"""The ``per_member`` argument of an install: which keys of the server every member
of a team gateway enters for themselves (``token:NAME``; see ``setup_agent/gateway/members.py``).

Names only, checked against the keys the prepared launch takes; a name that matches none is
refused without being quoted (the no-echo rule, ``tool_args.py``). The install's own value of such
a key (if given) stays the shared one, used by every caller that is not a member.
"""

from __future__ import annotations

from typing import Any

from setup_agent.errors import InvalidInput

__all__ = ["PER_MEMBER_SPEC", "per_member_keys"]

PER_MEMBER_SPEC: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "maxItems": 32,
    "description": (
        "Team gateways: the setting names each member enters for themselves (each person's own token). "
        "A member is asked for their own value out of band at their first call; nobody else's calls use it."
    ),
}


def per_member_keys(args: dict[str, Any], known: set[str]) -> list[str]:
    """The install's ``per_member`` names, each one of ``known`` (the keys the launch takes)."""
    raw = args.get("per_member")
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > 32 or not all(isinstance(k, str) and k for k in raw):
        raise InvalidInput("per_member must be a list of at most 32 setting names.")
    if any(k not in known for k in raw):
        raise InvalidInput("per_member names a setting this server does not take; mcp_setup_get lists its settings.")
    return sorted(set(raw))
