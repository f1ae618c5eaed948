"""The consent's choices in a terminal (setup_agent/setup/consent_choices.py): each line with its
options numbered, Enter keeps the default (marked), a number picks another. Used by the consent
prompt of ``mcp-setup add`` / ``agent`` (app/cli/terminal.py) and by ``mcp-setup approve``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["pick_choices"]


def pick_choices(request: Any, ask: Callable[[str], str], out: TextIO) -> dict[str, str]:
    """``{name: value}`` for each choice ``request`` shows; asked again until the answer is one of its numbers."""
    picked: dict[str, str] = {}
    for choice in request.choices:
        options = choice["options"]
        default = next((n for n, o in enumerate(options, 1) if o["value"] == choice["default"]), 1)
        print(f"  {choice['label']}:", file=out)
        for n, option in enumerate(options, 1):
            print(f"    [{n}] {option['label']}{' (default)' if n == default else ''}", file=out)
        out.flush()
        while True:
            typed = ask(f"  Pick 1-{len(options)} [{default}]: ").strip()
            if not typed:
                picked[choice["name"]] = options[default - 1]["value"]
                break
            if typed.isdigit() and 1 <= int(typed) <= len(options):
                picked[choice["name"]] = options[int(typed) - 1]["value"]
                break
            print(f"  Type a number from 1 to {len(options)}, or press Enter.", file=out, flush=True)
    return picked
