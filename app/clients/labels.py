"""Who installed a server, in words a person reads: ``mcp-setup list`` and ``show``, the page's cards.

The stored label (``installed_by``) stays as it is, for ``--json``, the audit and agents:
``cli`` (the terminal), ``ui`` (the page), ``agent``, ``import:<client>``, ``mcp:<client>`` (an AI
client over MCP), and a principal's ``token:NAME`` / ``client:…`` / ``user:…``, maybe with
`` via <client>``. :func:`installed_by_words` is the one place they become words; a client's
name is the one its maker uses (:data:`CLIENT_NAMES`, kept with the principals in the core).
"""

from __future__ import annotations

from setup_agent.principals import CLIENT_NAMES, client_name

__all__ = ["CLIENT_NAMES", "client_name", "installed_by_words"]


def installed_by_words(label: str | None) -> str:
    """``cli`` -> ``installed by you, in the terminal``; ``import:claude-desktop`` -> ``imported from
    Claude Desktop``; ``mcp:claude-code`` -> ``installed by Claude Code``. Lower case: a phrase to
    begin a sentence with or to put in one."""
    if not label:
        return "installed by someone mcp-setup did not record"
    kind, _, rest = label.partition(":")
    if kind == "import":
        return f"imported from {client_name(rest)}"
    if kind == "mcp":
        return f"installed by {client_name(rest)}" if rest else "installed by an AI client"
    return "installed by " + _who(label)


def _who(label: str) -> str:
    words = {"cli": "you, in the terminal", "ui": "you, in this page", "agent": "an agent"}
    if label in words:
        return words[label]
    principal, _, via = label.partition(" via ")
    through = f" ({client_name(via)})" if via else ""
    kind, _, name = principal.partition(":")
    if kind == "token":
        return f"the token {name}{through}"
    if kind == "client":
        return f"an AI client{through}"
    if kind == "user":
        return "you"
    return label
