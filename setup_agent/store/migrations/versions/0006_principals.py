"""Principals: admin tokens, and approvals waiting for the user, shared by every process.

Revision ID: 0006_principals
Revises: 0005_sign_in
Create Date: 2026-12-02

``mcp_tokens.admin`` marks a token made with ``mcp-setup token create NAME --admin``: it may
approve like the user (audited as ``token:NAME``); every other named token is a member, a client.

``mcp_pending`` holds the consents and tool reviews that wait for the user, opened by any
process on the data dir (or the team's database), so that every process's user channels see
them and ``mcp-setup approve`` answers them in a terminal. A row holds the request as shown
(templates and non-secret values only: never a secret value, never a capability), its status,
and the answer: the destination settings the user chose, and who answered.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_principals"
down_revision: str | Sequence[str] | None = "0005_sign_in"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_tokens", sa.Column("admin", sa.Boolean(), nullable=True))
    op.create_table(
        "mcp_pending",
        sa.Column("item_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("request_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("decision_json", sa.Text(), nullable=True),
        sa.Column("answered_by", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("item_id", name="pk_mcp_pending"),
    )
    op.create_index("ix_mcp_pending_status", "mcp_pending", ["status"])


def downgrade() -> None:
    op.drop_index("ix_mcp_pending_status", table_name="mcp_pending")
    op.drop_table("mcp_pending")
    op.drop_column("mcp_tokens", "admin")
