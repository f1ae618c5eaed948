"""``mcp-setup serve``: the FastAPI app (``app.py``), its socket (``serve.py``), the one serve of a
data folder and the link it records for ``mcp-setup open`` (``running.py``), its guards
(``security.py``), JSON-RPC (``rpc.py``; the context budget's methods in ``budget_rpc.py``), the
websocket hub (``ws.py``), agent runs from the page (``agent_runs.py``), the modals' answers
(``secrets.py``, ``consents.py``, ``answers.py``) and an installed server's requests shown in the
tab that ran its tool (``relayed.py``).

May import mcp, pages, ``app.runtime``, ``app.settings`` and the core; never cli.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .running import display_available, open_in_browser, running_serve
    from .serve import run_serve

__all__ = [
    "display_available",
    "open_in_browser",
    "run_serve",
    "running_serve",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "display_available": "running",
        "open_in_browser": "running",
        "run_serve": "serve",
        "running_serve": "running",
    },
)
