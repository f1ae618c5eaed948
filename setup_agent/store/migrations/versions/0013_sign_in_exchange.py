"""A team's sign-in finished by whichever replica receives its redirect.

Revision ID: 0013_sign_in_exchange
Revises: 0012_shared_sign_ins
Create Date: 2026-12-02

``mcp_sign_ins.exchange_encrypted``: what the token exchange needs (the PKCE verifier, the token
endpoint, the client's id and secret, the redirect URI, the resource, the ref to fill), encrypted
with the data key, so the replica that receives the browser's redirect does the exchange even
when the one that started the sign-in is gone. Cleared once the exchange is claimed and done.
Rules in setup_agent/store/shared_sign_ins.py.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_sign_in_exchange"
down_revision: str | Sequence[str] | None = "0012_shared_sign_ins"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mcp_sign_ins") as batch:
        batch.add_column(sa.Column("exchange_encrypted", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mcp_sign_ins") as batch:
        batch.drop_column("exchange_encrypted")
