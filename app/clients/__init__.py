"""AI clients' config files and connecting them to this mcp-setup: where each client keeps
its servers and a careful merge (``files.py``: backup, idempotent, malformed files untouched; JSON
and JSONC edited in place, comments kept: ``jsonc.py``), the gateway entry, the plan of a connect
and which clients are found here and connected (``connect.py``), and who installed a server, in
words (``labels.py``). Shared by the CLI (``client connect|list``, ``import``, ``list``, ``show``)
and the page.

May import ``app.runtime``-free parts only: :mod:`app.settings` (types) and the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setup_agent.lazy import lazy_exports

if TYPE_CHECKING:
    from .connect import (
        GATEWAY_ENTRY,
        NEW_TOKEN_PLACEHOLDER,
        ClientTokens,
        ConnectPlan,
        client_rows,
        connect_over_http,
        launcher_command,
        launcher_env,
        plan_connect,
    )
    from .files import (
        CLIENTS,
        ClientConfig,
        ConfigError,
        Edit,
        client_config,
        entry_for,
        is_ours,
        looks_secret,
        secret_reason,
        updated_words,
    )
    from .labels import CLIENT_NAMES, client_name, installed_by_words

__all__ = [
    "CLIENTS",
    "CLIENT_NAMES",
    "ClientConfig",
    "ConfigError",
    "ClientTokens",
    "ConnectPlan",
    "Edit",
    "GATEWAY_ENTRY",
    "client_config",
    "client_name",
    "client_rows",
    "connect_over_http",
    "entry_for",
    "installed_by_words",
    "is_ours",
    "launcher_command",
    "launcher_env",
    "looks_secret",
    "NEW_TOKEN_PLACEHOLDER",
    "plan_connect",
    "secret_reason",
    "updated_words",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CLIENTS": "files",
        "ClientConfig": "files",
        "ConfigError": "files",
        "Edit": "files",
        "client_config": "files",
        "entry_for": "files",
        "is_ours": "files",
        "looks_secret": "files",
        "secret_reason": "files",
        "updated_words": "files",
        "ClientTokens": "connect",
        "ConnectPlan": "connect",
        "connect_over_http": "connect",
        "NEW_TOKEN_PLACEHOLDER": "connect",
        "GATEWAY_ENTRY": "connect",
        "client_rows": "connect",
        "launcher_command": "connect",
        "launcher_env": "connect",
        "plan_connect": "connect",
        "CLIENT_NAMES": "labels",
        "client_name": "labels",
        "installed_by_words": "labels",
    },
)
