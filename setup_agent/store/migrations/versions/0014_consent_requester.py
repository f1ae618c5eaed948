"""One pending consent per request and requester on a team's gateway.

Revision ID: 0014_consent_requester
Revises: 0013_sign_in_exchange
Create Date: 2026-12-02

``mcp_pending.requester``: the SHA-256 of the principal that asked for a consent (never the
principal itself), so a retry that reaches another replica waits on the consent already pending
for the same request and requester instead of opening a second one
(setup_agent/setup/shared_consents.py).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_consent_requester"
down_revision: str | Sequence[str] | None = "0013_sign_in_exchange"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mcp_pending") as batch:
        batch.add_column(sa.Column("requester", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mcp_pending") as batch:
        batch.drop_column("requester")
