"""The gateway: a stable slug, a title and the recorded tool list per server; a change counter.

Revision ID: 0002_gateway
Revises: 0001_initial
Create Date: 2026-12-01

``mcp_setup_changes`` holds one row whose ``counter`` is bumped in the same transaction as every
install, removal, enable/disable and tool-list change, so every process on the database can
notice a change by reading one integer.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from setup_agent.store.catalog import make_slug

revision: str = "0002_gateway"
down_revision: str | Sequence[str] | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN and a unique index: no table rebuild, which on SQLite (foreign keys on)
    # would cascade-delete every env row when the old table is dropped.
    op.add_column("mcp_servers", sa.Column("slug", sa.String(64), nullable=True))
    op.add_column("mcp_servers", sa.Column("title", sa.String(512), nullable=True))
    op.add_column("mcp_servers", sa.Column("tools_json", sa.Text(), nullable=True))
    conn = op.get_bind()
    taken: set[str] = set()
    rows = conn.execute(sa.text("SELECT server_id, qualified_name FROM mcp_servers ORDER BY installed_at")).all()
    for server_id, qualified_name in rows:
        slug = make_slug(qualified_name, taken)
        taken.add(slug)
        conn.execute(
            sa.text("UPDATE mcp_servers SET slug = :slug WHERE server_id = :sid"), {"slug": slug, "sid": server_id}
        )
    op.create_index("ix_mcp_servers_slug", "mcp_servers", ["slug"], unique=True)
    op.create_table(
        "mcp_setup_changes",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("counter", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_setup_changes"),
    )
    conn.execute(sa.text("INSERT INTO mcp_setup_changes (id, counter) VALUES (1, 0)"))


def downgrade() -> None:
    op.drop_table("mcp_setup_changes")
    op.drop_index("ix_mcp_servers_slug", table_name="mcp_servers")
    op.drop_column("mcp_servers", "tools_json")
    op.drop_column("mcp_servers", "title")
    op.drop_column("mcp_servers", "slug")
