"""OAuth sign-ins in progress shared by a team's replicas.

Revision ID: 0012_shared_sign_ins
Revises: 0011_prompt_pins
Create Date: 2026-12-02

``mcp_sign_ins``: one row per sign-in waiting for its browser redirect, keyed by the SHA-256 of its
``state`` (never the state), the replica waiting for it, and the authorization response (the code,
or the error) once any replica's ``/oauth/callback`` received it, encrypted with the data key. Used
on PostgreSQL only; rules in setup_agent/store/shared_sign_ins.py.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_shared_sign_ins"
down_revision: str | Sequence[str] | None = "0011_prompt_pins"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_sign_ins",
        sa.Column("state_hash", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("answer_encrypted", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state_hash", name="pk_mcp_sign_ins"),
    )
    op.create_index("ix_mcp_sign_ins_expires_at", "mcp_sign_ins", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_mcp_sign_ins_expires_at", table_name="mcp_sign_ins")
    op.drop_table("mcp_sign_ins")
