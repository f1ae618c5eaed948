"""Installed servers and their encrypted client env.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("server_id", sa.String(64), nullable=False),
        sa.Column("qualified_name", sa.String(512), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("package_type", sa.String(32), nullable=False),
        sa.Column("launch_spec", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("installed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("installed_by", sa.String(128), nullable=False),
        sa.Column("tools_hash", sa.String(128), nullable=False),
        sa.PrimaryKeyConstraint("server_id", name="pk_mcp_servers"),
        sa.UniqueConstraint("qualified_name", name="uq_mcp_servers_qualified_name"),
    )
    op.create_table(
        "mcp_client_env",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("server_id", sa.String(64), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value_encrypted", sa.LargeBinary(), nullable=False),
        sa.Column("secret", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["server_id"],
            ["mcp_servers.server_id"],
            name="fk_mcp_client_env_server_id_mcp_servers",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_client_env"),
        sa.UniqueConstraint("server_id", "key", name="uq_mcp_client_env_server_id_key"),
    )
    op.create_index("ix_mcp_client_env_server_id", "mcp_client_env", ["server_id"])


def downgrade() -> None:
    op.drop_index("ix_mcp_client_env_server_id", table_name="mcp_client_env")
    op.drop_table("mcp_client_env")
    op.drop_table("mcp_servers")
