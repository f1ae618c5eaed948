"""Installed servers, live: the :class:`ConnectionManager` (``connections.py``), one server's
connection (``live.py``; its status record, ``status.py``; its lists read again when the server says they changed,
``relisting.py``; what its start checked, not checked again after an idle stop when nothing changed, ``resume.py``) and its relay of the server's requests to the calling client (``relay.py``) and of its input-required
results in the client's era (``input_required.py``; a 2025-era server's requests held for a 2026-07-28 client's
retry, ``held_calls.py``), the :class:`Gateway` that lists and routes their tools (``router.py``), calls passed through
as sent (``passthrough.py``), prompts, resources and completions (``offers.py``), the find/call pair
for clients that never re-list and the context budget (``discover.py``; where the budget comes from and
stands, ``budget.py``), each server's redacted log (``server_logs.py``)
and each member's own sessions and the asking for their own keys (``members.py``,
``member_prompts.py``; where else such a prompt is answered, ``member_elsewhere.py``).

Imports launch, store, secrets and errors; never oauth, setup or agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .budget import (
        MAX_BUDGET,
        Budget,
        Standing,
        ToolsBudget,
        adds_words,
        parse_budget,
        source_words,
        standing_of,
        stored_catalog,
    )
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
    "adds_words",
    "MAX_BUDGET",
    "Budget",
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
    "parse_budget",
    "Standing",
    "source_words",
    "standing_of",
    "stored_catalog",
    "ToolsBudget",
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
        "adds_words": "budget",
        "MAX_BUDGET": "budget",
        "Budget": "budget",
        "parse_budget": "budget",
        "Standing": "budget",
        "source_words": "budget",
        "standing_of": "budget",
        "stored_catalog": "budget",
        "ToolsBudget": "budget",
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
