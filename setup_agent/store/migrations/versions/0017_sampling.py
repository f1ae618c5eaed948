"""Whether each installed server may ask the person's AI to write text (MCP sampling).

Revision ID: 0017_sampling
Revises: 0016_audit_key
Create Date: 2026-12-06

``mcp_servers.sampling``: ``no``, ``text`` (without tools) or ``tools`` (with tools), chosen in
the install's consent and changed with ``mcp-setup allow NAME --sampling`` or on the page.
Rows installed before stay NULL, which reads as ``text`` (setup_agent/store/sampling.py).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_sampling"
down_revision: str | Sequence[str] | None = "0016_audit_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_servers", sa.Column("sampling", sa.String(8), nullable=True))


def downgrade() -> None:
    op.drop_column("mcp_servers", "sampling")
