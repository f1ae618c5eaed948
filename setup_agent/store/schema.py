"""The names of the store's tables and their columns: the one schema definition.

The SQLAlchemy models (``models.py``, ``shared_rows.py``) declare their tables under these names,
and their declarative base refuses a model whose columns differ from the ones listed here. The
stdlib readers behind the read-only commands (``catalog.py``, ``records.py``) build their SQL
from here too, through :meth:`Table.select`, which refuses a column the table does not have: a
column renamed in a model and a migration cannot leave a reader asking for the old name.

Standard library only: ``mcp-setup list`` and ``mcp-setup mcp`` read through it before the ORM
loads.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "AUDIT",
    "AUDIT_KEY",
    "CAPABILITIES",
    "CHANGES",
    "CLIENT_ENV",
    "CONSENT_APPROVALS",
    "GUARD_COUNTS",
    "MEMBER_VALUES",
    "PENDING",
    "PREFERENCES",
    "SECRET_REFS",
    "SERVERS",
    "SERVER_EXTRAS",
    "SIGN_INS",
    "TABLES",
    "TOKENS",
    "TOOLS_BUDGET",
    "TOOL_USE",
    "VERSIONS",
    "VERSION_TABLE",
    "Table",
]

#: Our own Alembic version table, so a shared (team) database can host other apps too.
VERSION_TABLE = "mcp_setup_alembic_version"


class Table:
    """A table's name and its columns, in declaration order."""

    def __init__(self, name: str, *columns: str) -> None:
        self.name = name
        self.columns = columns

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    def check(self, *columns: str) -> None:
        """Raise ``KeyError`` naming any of ``columns`` this table does not have."""
        unknown = [c for c in columns if c not in self.columns]
        if unknown:
            raise KeyError(f"{self.name} has no column {', '.join(unknown)}")

    def select(
        self,
        *columns: str,
        where: Mapping[str, object] | None = None,
        group_by: tuple[str, ...] = (),
        order_by: tuple[str, ...] = (),
        count: bool = False,
        limit: int | None = None,
    ) -> tuple[str, tuple[object, ...]]:
        """``(sql, parameters)`` of a plain SELECT of ``columns`` (``COUNT(*)`` appended when
        ``count``); order names may end in `` DESC``."""
        ordered = tuple(o.removesuffix(" DESC") for o in order_by)
        self.check(*columns, *(where or {}), *group_by, *ordered)
        picked = ", ".join((*columns, "COUNT(*)") if count else columns)
        sql = f"SELECT {picked} FROM {self.name}"
        params: tuple[object, ...] = ()
        if where:
            sql += " WHERE " + " AND ".join(f"{c} = ?" for c in where)
            params = tuple(where.values())
        if group_by:
            sql += " GROUP BY " + ", ".join(group_by)
        if order_by:
            sql += " ORDER BY " + ", ".join(order_by)
        if limit is not None:
            sql += f" LIMIT {max(int(limit), 0)}"
        return sql, params


SERVERS = Table(
    "mcp_servers",
    "server_id",
    "qualified_name",
    "source",
    "version",
    "package_type",
    "launch_spec",
    "enabled",
    "installed_at",
    "installed_by",
    "tools_hash",
    "slug",
    "title",
    "tools_json",
    "pinned_tools_json",
    "pinned_hash",
    "pinned_at",
    "pinned_version",
    "live_tools_json",
    "live_hash",
    "tools_state",
    "tools_diff",
    "rejected_hash",
    "needs_sign_in",
    "member_keys",
    "artifact_digest",
    "sampling",
)
CHANGES = Table("mcp_setup_changes", "id", "counter")
CLIENT_ENV = Table("mcp_client_env", "id", "server_id", "key", "value_encrypted", "secret")
MEMBER_VALUES = Table("mcp_member_values", "id", "server_id", "member", "key", "value_encrypted", "updated_at")
AUDIT = Table(
    "mcp_audit",
    "id",
    "at",
    "event",
    "server_id",
    "qualified_name",
    "actor",
    "old_hash",
    "new_hash",
    "detail",
    "prev_hash",
    "row_hash",
)
#: One row (id 1): the audit chain's key, encrypted under the data key (audit_key.py).
AUDIT_KEY = Table("mcp_audit_key", "id", "key_encrypted", "created_at")
TOKENS = Table("mcp_tokens", "name", "token_hash", "created_at", "revoked_at", "admin", "kind")
PENDING = Table(
    "mcp_pending",
    "item_id",
    "kind",
    "owner",
    "created_at",
    "expires_at",
    "request_json",
    "status",
    "decision_json",
    "answered_by",
    "fingerprint",
    "requester",
)
SERVER_EXTRAS = Table(
    "mcp_server_extras",
    "server_id",
    "prompts_json",
    "pinned_prompts_json",
    "pinned_hash",
    "live_prompts_json",
    "live_hash",
    "prompts_state",
    "resources_json",
    "templates_json",
    "hidden_tools_json",
    "updated_at",
)
SECRET_REFS = Table(
    "mcp_secret_refs",
    "ref_hash",
    "key_name",
    "prompt_id",
    "value_encrypted",
    "created_at",
    "expires_at",
    "claimed_by",
)
CAPABILITIES = Table("mcp_capabilities", "digest", "item_id", "action", "expires_at", "spent")
CONSENT_APPROVALS = Table(
    "mcp_consent_approvals", "fingerprint", "server", "decision_json", "approved_by", "expires_at"
)
GUARD_COUNTS = Table("mcp_guard_counts", "principal", "refusals", "locked", "updated_at")
SIGN_INS = Table(
    "mcp_sign_ins", "state_hash", "owner", "answer_encrypted", "created_at", "expires_at", "exchange_encrypted"
)
#: When each installed tool (by gateway name) was last called through any gateway on this store:
#: what a context budget lists first, in every process and session (usage.py).
TOOL_USE = Table("mcp_tool_use", "name", "used_at")
#: The person's own settings of the whole gateway, by name (preferences.py): the page's.
PREFERENCES = Table("mcp_preferences", "name", "value", "updated_at", "updated_by")
#: The preference of the tokens of tool definitions ``tools/list`` may take (an integer).
TOOLS_BUDGET = "tools_budget"
VERSIONS = Table(VERSION_TABLE, "version_num")

#: Every table the migrations make, by name (the version table is Alembic's).
TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        SERVERS,
        CHANGES,
        CLIENT_ENV,
        MEMBER_VALUES,
        AUDIT,
        AUDIT_KEY,
        TOKENS,
        PENDING,
        SERVER_EXTRAS,
        SECRET_REFS,
        CAPABILITIES,
        CONSENT_APPROVALS,
        GUARD_COUNTS,
        SIGN_INS,
        TOOL_USE,
        PREFERENCES,
    )
}
