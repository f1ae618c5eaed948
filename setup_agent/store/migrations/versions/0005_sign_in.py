"""A server whose OAuth sign-in can no longer be renewed: remembered, so every face says so.

Revision ID: 0005_sign_in
Revises: 0004_pins_audit
Create Date: 2026-12-01

``mcp_servers.needs_sign_in`` is set when a refresh is refused (the connection manager) and
cleared when the server connects again; faces without a live session (``mcp-setup list``)
read it from here.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_sign_in"
down_revision: str | Sequence[str] | None = "0004_pins_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_servers", sa.Column("needs_sign_in", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("mcp_servers", "needs_sign_in")
