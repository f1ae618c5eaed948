"""Tool pinning and the audit: the approved tool list per server, and an append-only log.

Revision ID: 0004_pins_audit
Revises: 0003_tokens
Create Date: 2026-12-01

``mcp_servers`` gets the pinned tool list (``pinned_tools_json``, its ``pinned_hash``, when and
at which version it was pinned), the list the server offers now (``live_tools_json``,
``live_hash``), ``tools_state`` (pinned | changed | rejected), a short diff (names only) and the
hash of a rejected list. ``tools_json`` stays the list the gateway exposes: the approved forms.
A server installed before this revision is pinned to the list recorded at its last connect.

``mcp_audit`` is append-only (no update or delete: SQLite triggers, PostgreSQL rules): installs,
removals, enable/disable, tool-list changes, approvals and rejections, with time, actor and
hashes, never values. It has no foreign key: rows outlive the server they name.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from setup_agent.store.catalog import parse_tools
from setup_agent.store.pins import tools_hash

revision: str = "0004_pins_audit"
down_revision: str | Sequence[str] | None = "0003_tokens"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("pinned_tools_json", sa.Text()),
    ("pinned_hash", sa.String(64)),
    ("pinned_at", sa.DateTime(timezone=True)),
    ("pinned_version", sa.String(128)),
    ("live_tools_json", sa.Text()),
    ("live_hash", sa.String(64)),
    ("tools_state", sa.String(16)),
    ("tools_diff", sa.Text()),
    ("rejected_hash", sa.String(64)),
)


def upgrade() -> None:
    for name, type_ in _COLUMNS:  # plain ADD COLUMN: no table rebuild (see 0002)
        op.add_column("mcp_servers", sa.Column(name, type_, nullable=True))
    conn = op.get_bind()
    rows = conn.execute(
        sa.text("SELECT server_id, tools_json, installed_at, version FROM mcp_servers WHERE tools_json IS NOT NULL")
    ).all()
    for server_id, tools_json, installed_at, version in rows:
        digest = tools_hash(parse_tools(tools_json))
        conn.execute(
            sa.text(
                "UPDATE mcp_servers SET pinned_tools_json = :t, live_tools_json = :t, pinned_hash = :h, live_hash = :h, "
                "pinned_at = :at, pinned_version = :v, tools_state = 'pinned' WHERE server_id = :sid"
            ),
            {"t": tools_json, "h": digest, "at": installed_at, "v": version, "sid": server_id},
        )
    op.create_table(
        "mcp_audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("server_id", sa.String(64), nullable=True),
        sa.Column("qualified_name", sa.String(512), nullable=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("old_hash", sa.String(64), nullable=True),
        sa.Column("new_hash", sa.String(64), nullable=True),
        sa.Column("detail", sa.String(512), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_audit"),
    )
    op.create_index("ix_mcp_audit_at", "mcp_audit", ["at"])
    if conn.dialect.name == "sqlite":
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER mcp_audit_no_{verb.lower()} BEFORE {verb} ON mcp_audit "
                "BEGIN SELECT RAISE(ABORT, 'mcp_audit is append-only'); END"
            )
    elif conn.dialect.name == "postgresql":
        for verb in ("UPDATE", "DELETE"):
            op.execute(f"CREATE RULE mcp_audit_no_{verb.lower()} AS ON {verb} TO mcp_audit DO INSTEAD NOTHING")


def downgrade() -> None:
    op.drop_index("ix_mcp_audit_at", table_name="mcp_audit")
    op.drop_table("mcp_audit")  # drops its triggers and rules too
    for name, _ in reversed(_COLUMNS):
        op.drop_column("mcp_servers", name)
