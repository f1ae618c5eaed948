"""When each installed tool was last used, and the person's gateway-wide settings.

Revision ID: 0018_tool_use
Revises: 0017_sampling
Create Date: 2026-12-06

``mcp_tool_use``: one row per gateway tool name (``<slug>__<tool>``) with the time of its last call
through any gateway on this store, written in batches (setup_agent/store/usage.py): the tools a
context budget lists first, also in a new session or process. A name only, never arguments.

``mcp_preferences``: the person's settings of the whole gateway by name (the tools budget chosen
on the page), with when and by whom (setup_agent/store/preferences.py).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_tool_use"
down_revision: str | Sequence[str] | None = "0017_sampling"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_tool_use",
        sa.Column("name", sa.String(160), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_mcp_tool_use"),
    )
    op.create_index("ix_mcp_tool_use_used_at", "mcp_tool_use", ["used_at"])
    op.create_table(
        "mcp_preferences",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_mcp_preferences"),
    )


def downgrade() -> None:
    op.drop_table("mcp_preferences")
    op.drop_index("ix_mcp_tool_use_used_at", table_name="mcp_tool_use")
    op.drop_table("mcp_tool_use")
