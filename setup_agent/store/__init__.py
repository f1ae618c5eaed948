"""The database: :class:`Store` (``database.py``) over SQLite or PostgreSQL, its models
(``models.py``), the tool-pin rules (``pins.py``) and their tables (``tool_pins.py``), encrypted
settings and key rotation (``keys.py``), named tokens (``tokens.py``), approvals waiting for the
user across processes (``approvals.py``), the data dir's permissions (``data_dir.py``), the gateway's catalog
read from the rows (``catalog.py``, standard library only), the records it hands out and their
stdlib reader for the read-only commands (``records.py``) and the migrations (``migrations/``).

Imports :mod:`setup_agent.secrets` and :mod:`setup_agent.errors` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .approvals import PendingApproval, PendingApprovals, owner_alive, process_owner
    from .catalog import (
        SQLITE_FILE_NAME,
        Catalog,
        GatewayTool,
        gateway_name,
        names_too_long,
        read_sqlite_catalog,
        read_sqlite_counter,
    )
    from .data_dir import prepare_data_dir
    from .database import Store
    from .records import InstalledServer, read_sqlite_servers
    from .pins import diff_tools, relabel, summarize
    from .tokens import Tokens

__all__ = [
    "owner_alive",
    "PendingApproval",
    "PendingApprovals",
    "process_owner",
    "Catalog",
    "diff_tools",
    "gateway_name",
    "GatewayTool",
    "InstalledServer",
    "names_too_long",
    "prepare_data_dir",
    "read_sqlite_catalog",
    "read_sqlite_counter",
    "read_sqlite_servers",
    "relabel",
    "SQLITE_FILE_NAME",
    "Store",
    "summarize",
    "Tokens",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "owner_alive": "approvals",
    "PendingApproval": "approvals",
    "PendingApprovals": "approvals",
    "process_owner": "approvals",
    "Catalog": "catalog",
    "diff_tools": "pins",
    "gateway_name": "catalog",
    "GatewayTool": "catalog",
    "InstalledServer": "records",
    "names_too_long": "catalog",
    "prepare_data_dir": "data_dir",
    "read_sqlite_catalog": "catalog",
    "read_sqlite_counter": "catalog",
    "read_sqlite_servers": "records",
    "relabel": "pins",
    "SQLITE_FILE_NAME": "catalog",
    "Store": "database",
    "summarize": "pins",
    "Tokens": "tokens",
})  # fmt: skip
