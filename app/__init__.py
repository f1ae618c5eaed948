"""The faces of mcp-setup: the ``mcp-setup`` CLI (``app.cli``), the stdio MCP server
(``app.mcp_server``), the web app (``app.web``), the terminal agent (``app.terminal``) and the
one-time secret page (``app.secret_page``). Settings are read once here (``app.settings``) and
the core is wired in one place (``app.runtime``). Faces depend on the core, never the reverse.
"""

__all__ = [
    "agent_runs",
    "cli",
    "consent_page",
    "mcp_server",
    "rpc",
    "runtime",
    "secret_page",
    "settings",
    "terminal",
    "web",
    "web_consents",
    "web_secrets",
    "web_security",
    "ws",
]
