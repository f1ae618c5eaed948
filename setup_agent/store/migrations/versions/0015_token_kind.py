"""What a named token stands for: a team member or one of the person's own AI clients.

Revision ID: 0015_token_kind
Revises: 0014_consent_requester
Create Date: 2026-12-05

``mcp_tokens.kind``: ``member`` (a team member's token, as every token before) or ``client``
(made by ``mcp-setup client connect CLIENT --http`` for that client's config). Neither approves
anything, unless a member token was made with ``--admin``. NULL reads as ``member``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_token_kind"
down_revision: str | Sequence[str] | None = "0014_consent_requester"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mcp_tokens") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mcp_tokens") as batch:
        batch.drop_column("kind")
