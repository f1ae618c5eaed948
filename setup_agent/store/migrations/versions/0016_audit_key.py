"""The audit chain keyed: a table for its key, kept encrypted under the data key.

Revision ID: 0016_audit_key
Revises: 0015_token_kind
Create Date: 2026-12-06

``mcp_audit_key`` holds one row (id 1): the chain's key as a token of the data key's vault,
with the id of the first audit row keyed under it inside that token (setup_agent/store/audit_key.py).
A migration never holds the data key, so the table starts empty: the store makes the key at its
first audit write or ``mcp-setup audit --verify`` after this upgrade, and seals the rows already
there with one keyed row (``audit_keyed``) that chains to the last of them
(setup_agent/store/audit.py). The rows before it keep their unkeyed hashes; none is rewritten,
so the append-only rules stay as they are. The key's row is never deleted: SQLite refuses it by
a trigger, PostgreSQL ignores it by a rule, as for the audit's own rows. (A rotation of the data
key updates the row: its token is re-encrypted.)
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_audit_key"
down_revision: str | Sequence[str] | None = "0015_token_kind"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_audit_key",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("key_encrypted", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_audit_key"),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute(
            "CREATE TRIGGER mcp_audit_key_no_delete BEFORE DELETE ON mcp_audit_key "
            "BEGIN SELECT RAISE(ABORT, 'the audit chain key is never removed'); END"
        )
    elif dialect == "postgresql":
        op.execute("CREATE RULE mcp_audit_key_no_delete AS ON DELETE TO mcp_audit_key DO INSTEAD NOTHING")


def downgrade() -> None:
    op.drop_table("mcp_audit_key")  # its trigger or rule with it
