"""Each member's own keys: keys of a server marked per member, and their values.

Revision ID: 0009_member_values
Revises: 0008_shared_state
Create Date: 2026-12-02

``mcp_servers.member_keys`` lists (JSON, names only) the keys of a server that every member of a
team gateway (a named token, ``token:NAME``) enters for themselves; the install's value of such
a key, if any, stays the shared one of the non-member callers. ``mcp_member_values`` holds each
member's value of one key of one server, encrypted with the data key like ``mcp_client_env``;
its rows go with their server (cascade) and with their member's token (revoked: deleted).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_member_values"
down_revision: str | Sequence[str] | None = "0008_shared_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_servers", sa.Column("member_keys", sa.Text(), nullable=True))
    op.create_table(
        "mcp_member_values",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("server_id", sa.String(64), nullable=False),
        sa.Column("member", sa.String(64), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value_encrypted", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["server_id"],
            ["mcp_servers.server_id"],
            name="fk_mcp_member_values_server_id_mcp_servers",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_member_values"),
        sa.UniqueConstraint("server_id", "member", "key", name="uq_mcp_member_values_server_id_member_key"),
    )
    op.create_index("ix_mcp_member_values_member", "mcp_member_values", ["member"])


def downgrade() -> None:
    op.drop_index("ix_mcp_member_values_member", table_name="mcp_member_values")
    op.drop_table("mcp_member_values")
    op.drop_column("mcp_servers", "member_keys")
