"""The ``mcp-setup`` command line: the parser and dispatch (``main.py``), a person's commands
(``servers.py``, ``server_view.py``, ``doctor.py``, ``update.py``, ``rotate.py``, ``audit.py``,
``tools.py``, ``team.py``), AI clients' config files (``clients.py``, ``client_import.py``; the files
themselves: :mod:`app.clients`), the read-only fast path (``readonly.py``) and the terminal agent (``terminal.py``).

May import the other faces (web, mcp, pages), ``app.runtime``, ``app.settings`` and the core;
no other face imports it.
"""

__all__: list[str] = []
