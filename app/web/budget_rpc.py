"""The context budget on the page: where it stands and the person's own value.

* ``tools_budget.get`` ``{}`` → ``{budget, source, default, listed_tokens, total_tokens,
  listed_tools, unlisted_tools, words, source_words}``: what ``tools/list`` gives AI clients
  against the budget ("Tool definitions listed to AI clients: 6,100 of 8,000 tokens; 12 tools
  reachable through mcp_setup_find_tools") and where the budget comes from
  (setup_agent/gateway/budget.py: ``environment``, ``saved`` or ``default``);
* ``tools_budget.set`` ``{tokens}`` → the same, after the person's value is saved for every
  mcp-setup on this data folder (0: no budget). The person only (or an admin token), audited;
  every gateway reads it again and tells its clients their tool list changed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from setup_agent.errors import InvalidInput
from setup_agent.gateway import MAX_BUDGET, source_words, standing_of
from setup_agent.setup import FACE_TOKENS

from .security import current_principal, require_user

__all__ = ["BUDGET_METHODS", "budget_call"]

BUDGET_METHODS = ("tools_budget.get", "tools_budget.set")

_OUT_OF_RANGE = f"The budget is a whole number of tokens from 0 (no budget: every tool is listed) to {MAX_BUDGET:,}."


def parse_tokens(params: dict[str, Any]) -> int:
    """``tokens`` of ``tools_budget.set``, checked once here."""
    if set(params) != {"tokens"}:
        raise InvalidInput("tools_budget.set takes one parameter: tokens.")
    tokens = params["tokens"]
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_BUDGET:
        raise InvalidInput(_OUT_OF_RANGE)
    return tokens


async def budget_call(runtime: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    gateway = runtime.gateway
    if method == "tools_budget.set":
        require_user("changes how many tool definitions AI clients are listed")
        tokens = parse_tokens(params)
        principal = current_principal()
        by = principal.label if principal is not None else "user:web"
        await asyncio.to_thread(gateway.budget.save, tokens, actor=by)
    elif params:
        raise InvalidInput("tools_budget.get takes no parameters.")
    catalog = await gateway.ready()
    budget = gateway.budget.current
    discover = getattr(runtime.settings, "gateway_tools", "all") == "discover"
    standing = standing_of(catalog, FACE_TOKENS, budget, gateway.recent.newest_first(), discover=discover)
    return {
        **standing.public(),
        "default": gateway.budget.default,
        "source_words": source_words(budget, gateway.budget.default),
    }
