"""Whether an installed server may ask the person's AI to write text (MCP sampling), as the
person chose it: in the install's consent, then with ``mcp-setup allow NAME --sampling`` or the
control on the page's server card. Standard library only (the read-only commands show it).

``no``: its sampling requests are refused; ``text`` (the default): relayed without tools;
``tools``: relayed, tools included. The gateway's relay enforces it (setup_agent/gateway/relay.py).
"""

from __future__ import annotations

from typing import Literal, cast

__all__ = ["SAMPLING", "SAMPLING_DEFAULT", "SAMPLING_LABEL", "SAMPLING_WORDS", "Sampling", "sampling_of"]

Sampling = Literal["no", "text", "tools"]
#: The choices, in the order a person sees them.
SAMPLING: tuple[Sampling, ...] = ("no", "text", "tools")
SAMPLING_DEFAULT: Sampling = "text"
#: The setting's name as a person reads it (the consent's line, ``show``, the server card).
SAMPLING_LABEL = "May ask your AI to write text"
#: Each choice in a person's words.
SAMPLING_WORDS: dict[Sampling, str] = {
    "no": "No",
    "text": "Yes, without tools",
    "tools": "Yes, with tools",
}


def sampling_of(stored: object) -> Sampling:
    """A stored value as a choice (NULL, from before the setting existed, is the default)."""
    return cast(Sampling, stored) if stored in SAMPLING else SAMPLING_DEFAULT
