"""Installed servers, live: the :class:`ConnectionManager` (``connections.py``), one server's
connection (``live.py``; its status record, ``status.py``; its lists read again when the server says they changed,
``relisting.py``) and its relay of the server's requests to the calling client (``relay.py``) and of its input-required
results in the client's era (``input_required.py``; a 2025-era server's requests held for a 2026-07-28 client's
retry, ``held_calls.py``), the :class:`Gateway` that lists and routes their tools (``router.py``), calls passed through
as sent (``passthrough.py``), prompts, resources and completions (``offers.py``), the find/call pair
for clients that never re-list (``discover.py``), each server's redacted log (``server_logs.py``)
and each member's own sessions and the asking for their own keys (``members.py``,
``member_prompts.py``; where else such a prompt is answered, ``member_elsewhere.py``).

Imports launch, store, secrets and errors; never oauth, setup or agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .connections import ConnectionManager
    from .discover import (
        CALL_TOOL,
        DISCOVER_NAMES,
        DISCOVER_SPECS,
        FIND_TOOLS,
        Listing,
        RecentTools,
        estimated_tokens,
        find_tools,
        within_budget,
    )
    from .input_required import InputRetry
    from .member_elsewhere import MemberPromptReplicas, MemberPromptsElsewhere, OnlyHere
    from .member_prompts import MEMBER_SECRET_REQUIRED, MemberPrompts
    from .members import MemberSessions, member_of
    from .relay import Caller, InFlight, relay_callbacks
    from .relay_rules import ORIGIN_KEY, Origin, RelayRules
    from .router import Gateway, UnknownPrompt, UnknownResource, UnknownTool
    from .server_logs import log_path, read_log
    from .status import ServerStatus

__all__ = [
    "CALL_TOOL",
    "Caller",
    "ConnectionManager",
    "DISCOVER_NAMES",
    "DISCOVER_SPECS",
    "FIND_TOOLS",
    "estimated_tokens",
    "find_tools",
    "Gateway",
    "InFlight",
    "InputRetry",
    "Listing",
    "log_path",
    "MEMBER_SECRET_REQUIRED",
    "member_of",
    "MemberPromptReplicas",
    "MemberPrompts",
    "MemberPromptsElsewhere",
    "MemberSessions",
    "OnlyHere",
    "ORIGIN_KEY",
    "Origin",
    "read_log",
    "RecentTools",
    "relay_callbacks",
    "RelayRules",
    "ServerStatus",
    "UnknownPrompt",
    "UnknownResource",
    "UnknownTool",
    "within_budget",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CALL_TOOL": "discover",
        "Caller": "relay",
        "ConnectionManager": "connections",
        "DISCOVER_NAMES": "discover",
        "DISCOVER_SPECS": "discover",
        "FIND_TOOLS": "discover",
        "estimated_tokens": "discover",
        "find_tools": "discover",
        "Gateway": "router",
        "InFlight": "relay",
        "InputRetry": "input_required",
        "Listing": "discover",
        "RecentTools": "discover",
        "log_path": "server_logs",
        "MEMBER_SECRET_REQUIRED": "member_prompts",
        "member_of": "members",
        "MemberPromptReplicas": "member_elsewhere",
        "MemberPrompts": "member_prompts",
        "MemberPromptsElsewhere": "member_elsewhere",
        "MemberSessions": "members",
        "OnlyHere": "member_elsewhere",
        "ORIGIN_KEY": "relay_rules",
        "Origin": "relay_rules",
        "read_log": "server_logs",
        "relay_callbacks": "relay",
        "RelayRules": "relay_rules",
        "ServerStatus": "status",
        "UnknownPrompt": "router",
        "UnknownResource": "router",
        "UnknownTool": "router",
        "within_budget": "discover",
    },
)
