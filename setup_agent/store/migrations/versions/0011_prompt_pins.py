"""What a server offers besides tools: its prompts pinned like tools, its resources and templates.

Revision ID: 0011_prompt_pins
Revises: 0010_artifact_digest
Create Date: 2026-12-02

``mcp_server_extras`` holds one row per installed server (removed with it): the exposed
(approved) prompts, the pinned list and its hash, what the server lists now and the verdict
(``prompts_state``: pinned | changed), the resources and resource templates of its last
connect, and the names of the tools the user unticked in the consent (held back like
unapproved ones). Rules in setup_agent/store/tool_pins.py.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_prompt_pins"
down_revision: str | Sequence[str] | None = "0010_artifact_digest"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_server_extras",
        sa.Column("server_id", sa.String(64), nullable=False),
        sa.Column("prompts_json", sa.Text(), nullable=True),
        sa.Column("pinned_prompts_json", sa.Text(), nullable=True),
        sa.Column("pinned_hash", sa.String(64), nullable=True),
        sa.Column("live_prompts_json", sa.Text(), nullable=True),
        sa.Column("live_hash", sa.String(64), nullable=True),
        sa.Column("prompts_state", sa.String(16), nullable=True),
        sa.Column("resources_json", sa.Text(), nullable=True),
        sa.Column("templates_json", sa.Text(), nullable=True),
        sa.Column("hidden_tools_json", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["server_id"],
            ["mcp_servers.server_id"],
            name="fk_mcp_server_extras_server_id_mcp_servers",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("server_id", name="pk_mcp_server_extras"),
    )


def downgrade() -> None:
    op.drop_table("mcp_server_extras")
