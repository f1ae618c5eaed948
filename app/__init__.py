"""The faces of mcp-setup, each a package, importing only those after it in this order::

    cli → web → clients → mcp → pages → runtime → settings

- ``app.cli``: the ``mcp-setup`` command line and the terminal agent;
- ``app.web``: ``mcp-setup serve`` (the page, ``/rpc``, ``/ws``, ``/mcp``);
- ``app.clients``: AI clients' config files and connecting them (the CLI's and the page's);
- ``app.mcp``: the MCP face (``mcp-setup mcp`` on stdio, and ``/mcp``);
- ``app.pages``: the one-time secret and consent pages;
- ``app.runtime``: the only wiring of the core; ``app.settings``: the environment, read once.

Faces depend on the core (:mod:`setup_agent`), never the reverse.
"""

__all__ = ["cli", "clients", "mcp", "pages", "runtime", "settings", "web"]
