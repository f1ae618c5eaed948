"""The size cap of a proxied tool result: a server cannot flood the agent's context.

:func:`cap_result` keeps a result's text blocks, in order, up to ``limit`` characters in all
(the strings of every block and of ``structuredContent`` count); the block where the budget
ends is cut, later blocks and a structured part that no longer fits are left out, and a text
block is added that says how much was cut. Run it on the *redacted* result: a cut then never
splits a secret into a part the redactor no longer knows.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_RESULT_CHARS", "cap_result", "result_size"]

#: The default cap: 1 MiB of text (``MCP_SETUP_MAX_RESULT_CHARS``).
DEFAULT_RESULT_CHARS = 1024 * 1024


def result_size(obj: Any) -> int:
    """Characters of every string inside ``obj`` (keys included), iteratively."""
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


def cap_result(result: dict[str, Any], limit: int = DEFAULT_RESULT_CHARS) -> dict[str, Any]:
    """``result`` if it is within ``limit`` characters, else a copy cut to it with a note."""
    if limit <= 0:
        return result
    total = result_size(result)
    if total <= limit:
        return result
    budget = limit
    blocks: list[Any] = []
    for block in result.get("content") or []:
        size = result_size(block)
        if size <= budget:
            blocks.append(block)
            budget -= size
        elif (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            and budget > 0
        ):
            blocks.append({**block, "text": block["text"][:budget]})
            budget = 0
        else:
            budget = 0  # nothing after a cut: the kept text stays in order
    out = {k: v for k, v in result.items() if k != "content"}
    if "structuredContent" in out:
        if result_size(out["structuredContent"]) <= budget:
            budget -= result_size(out["structuredContent"])
        else:
            del out["structuredContent"]
    out["content"] = blocks
    cut = total - result_size(out)
    blocks.append(
        {
            "type": "text",
            "text": f"[mcp-setup cut this result: {cut:,} of {total:,} characters were left out "
            f"(the limit is {limit:,} characters, MCP_SETUP_MAX_RESULT_CHARS).]",
        }
    )
    return out
