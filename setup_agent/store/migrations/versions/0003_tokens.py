"""Named bearer tokens of a team gateway (only their hashes).

Revision ID: 0003_tokens
Revises: 0002_gateway
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_tokens"
# Re-chained after 0002_gateway when both land (the lead merges them).
down_revision: str | Sequence[str] | None = "0002_gateway"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_tokens",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_mcp_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_mcp_tokens_token_hash"),
    )


def downgrade() -> None:
    op.drop_table("mcp_tokens")
