"""A team's setup state in its database, so any replica serves any step.

Revision ID: 0008_shared_state
Revises: 0007_audit_chain
Create Date: 2026-12-02

Three tables (setup_agent/store/shared_rows.py), used on PostgreSQL only (on SQLite they stay
empty: a ref lives in one process's memory and is lost at restart, as before):

- ``mcp_secret_refs``: a ref's SHA-256 (never the ref), its key, the prompt that reserved it, the
  value encrypted with the data key (NULL until the user answers), its deadline and its claim;
- ``mcp_capabilities``: a link key's SHA-256 (never the key), the item and action, its deadline;
- ``mcp_consent_approvals``: approvals remembered for the ref TTL, by request fingerprint;
- ``mcp_guard_counts``: the guessing guard's refused calls and lock per principal (no values).

``mcp_pending.fingerprint``: the consent's fingerprint, so an answer given on another replica is
remembered there under it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_shared_state"
down_revision: str | Sequence[str] | None = "0007_audit_chain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_secret_refs",
        sa.Column("ref_hash", sa.String(64), nullable=False),
        sa.Column("key_name", sa.String(128), nullable=False),
        sa.Column("prompt_id", sa.String(64), nullable=True),
        sa.Column("value_encrypted", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("ref_hash", name="pk_mcp_secret_refs"),
    )
    op.create_index("ix_mcp_secret_refs_prompt_id", "mcp_secret_refs", ["prompt_id"])
    op.create_index("ix_mcp_secret_refs_expires_at", "mcp_secret_refs", ["expires_at"])
    op.create_table(
        "mcp_capabilities",
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("item_id", sa.String(128), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("spent", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name="pk_mcp_capabilities"),
    )
    op.create_index("ix_mcp_capabilities_expires_at", "mcp_capabilities", ["expires_at"])
    op.create_table(
        "mcp_consent_approvals",
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("server", sa.String(256), nullable=False),
        sa.Column("decision_json", sa.Text(), nullable=False),
        sa.Column("approved_by", sa.String(128), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name="pk_mcp_consent_approvals"),
    )
    op.create_index("ix_mcp_consent_approvals_server", "mcp_consent_approvals", ["server"])
    op.create_index("ix_mcp_consent_approvals_expires_at", "mcp_consent_approvals", ["expires_at"])
    op.create_table(
        "mcp_guard_counts",
        sa.Column("principal", sa.String(256), nullable=False),
        sa.Column("refusals", sa.Integer(), nullable=False),
        sa.Column("locked", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("principal", name="pk_mcp_guard_counts"),
    )
    with op.batch_alter_table("mcp_pending") as batch:
        batch.add_column(sa.Column("fingerprint", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mcp_pending") as batch:
        batch.drop_column("fingerprint")
    op.drop_table("mcp_guard_counts")
    op.drop_table("mcp_consent_approvals")
    op.drop_table("mcp_capabilities")
    op.drop_table("mcp_secret_refs")
