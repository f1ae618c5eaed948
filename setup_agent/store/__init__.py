"""The database: :class:`Store` (``database.py``), one session factory (``engine.py``) and the
repositories that receive it: installed servers (``servers.py``), their encrypted values, each
member's own values and key rotation (``values.py``), tool and prompt pins (``tool_pins.py``, rules
in ``pins.py``), named tokens (``tokens.py``), when each tool was last used (``usage.py``), the person's
gateway-wide settings (``preferences.py``) and the audit, chained under a key the data key
encrypts (``audit.py``, the key in ``audit_key.py``). Also the
table and column names (``schema.py``, standard library only), the models (``models.py``),
approvals waiting for the user across processes (``approvals.py``), the data dir's permissions
(``data_dir.py``), the gateway's catalog read from the rows (``catalog.py``, standard library
only), the records it hands out and their stdlib reader for the read-only commands
(``records.py``), the person's sampling setting per server (``sampling.py``) and the
migrations (``migrations/``).

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
        context_cost,
        gateway_name,
        names_too_long,
        read_sqlite_catalog,
        read_sqlite_counter,
        read_sqlite_hidden,
        read_sqlite_preference,
        read_sqlite_recent,
    )
    from .change_feed import CHANGES_CHANNEL, PENDING_CHANNEL, ChangeFeed
    from .data_dir import prepare_data_dir
    from .database import Store
    from .pins import canonical_json, diff_tools, relabel, summarize, tools_hash
    from .preferences import Preferences
    from .records import InstalledServer, read_sqlite_audit, read_sqlite_servers
    from .sampling import SAMPLING, SAMPLING_DEFAULT, SAMPLING_LABEL, SAMPLING_WORDS, Sampling, sampling_of
    from .schema import TOOLS_BUDGET
    from .shared_sign_ins import SharedSignIns
    from .shared_state import SharedApprovals, SharedCapabilities, SharedGuardCounts, SharedRefs, ref_digest
    from .tokens import Tokens
    from .usage import ToolUse
    from .values import member_label

__all__ = [
    "CHANGES_CHANNEL",
    "ChangeFeed",
    "PENDING_CHANNEL",
    "owner_alive",
    "PendingApproval",
    "PendingApprovals",
    "process_owner",
    "Catalog",
    "canonical_json",
    "context_cost",
    "diff_tools",
    "gateway_name",
    "GatewayTool",
    "InstalledServer",
    "member_label",
    "names_too_long",
    "prepare_data_dir",
    "read_sqlite_catalog",
    "read_sqlite_counter",
    "read_sqlite_hidden",
    "read_sqlite_preference",
    "read_sqlite_recent",
    "read_sqlite_audit",
    "read_sqlite_servers",
    "ref_digest",
    "relabel",
    "SAMPLING",
    "SAMPLING_DEFAULT",
    "SAMPLING_LABEL",
    "SAMPLING_WORDS",
    "Sampling",
    "sampling_of",
    "SharedApprovals",
    "SharedCapabilities",
    "SharedGuardCounts",
    "SharedRefs",
    "SharedSignIns",
    "SQLITE_FILE_NAME",
    "Store",
    "summarize",
    "Tokens",
    "ToolUse",
    "TOOLS_BUDGET",
    "tools_hash",
    "Preferences",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CHANGES_CHANNEL": "change_feed",
        "ChangeFeed": "change_feed",
        "PENDING_CHANNEL": "change_feed",
        "owner_alive": "approvals",
        "PendingApproval": "approvals",
        "PendingApprovals": "approvals",
        "process_owner": "approvals",
        "Catalog": "catalog",
        "canonical_json": "pins",
        "context_cost": "catalog",
        "diff_tools": "pins",
        "gateway_name": "catalog",
        "GatewayTool": "catalog",
        "InstalledServer": "records",
        "member_label": "values",
        "names_too_long": "catalog",
        "prepare_data_dir": "data_dir",
        "read_sqlite_catalog": "catalog",
        "read_sqlite_counter": "catalog",
        "read_sqlite_hidden": "catalog",
        "read_sqlite_preference": "catalog",
        "read_sqlite_recent": "catalog",
        "ref_digest": "shared_state",
        "read_sqlite_audit": "records",
        "read_sqlite_servers": "records",
        "relabel": "pins",
        "SAMPLING": "sampling",
        "SAMPLING_DEFAULT": "sampling",
        "SAMPLING_LABEL": "sampling",
        "SAMPLING_WORDS": "sampling",
        "Sampling": "sampling",
        "sampling_of": "sampling",
        "SharedApprovals": "shared_state",
        "SharedCapabilities": "shared_state",
        "SharedGuardCounts": "shared_state",
        "SharedRefs": "shared_state",
        "SharedSignIns": "shared_sign_ins",
        "SQLITE_FILE_NAME": "catalog",
        "Store": "database",
        "summarize": "pins",
        "Tokens": "tokens",
        "ToolUse": "usage",
        "TOOLS_BUDGET": "schema",
        "tools_hash": "pins",
        "Preferences": "preferences",
    },
)
