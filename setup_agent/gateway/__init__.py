"""Installed servers, live: the :class:`ConnectionManager` (``connections.py``), one server's
connection (``live.py``), the :class:`Gateway` that lists and routes their tools (``router.py``)
and each server's redacted log (``server_logs.py``).

Imports launch, store, secrets and errors; never oauth, setup or agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .connections import ConnectionManager
    from .live import ServerStatus
    from .router import Gateway, UnknownTool
    from .server_logs import log_path, read_log

__all__ = [
    "ConnectionManager",
    "Gateway",
    "log_path",
    "read_log",
    "ServerStatus",
    "UnknownTool",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ConnectionManager": "connections",
    "Gateway": "router",
    "log_path": "server_logs",
    "read_log": "server_logs",
    "ServerStatus": "live",
    "UnknownTool": "router",
})  # fmt: skip
