"""The digest of the artifact each server was installed from.

Revision ID: 0010_artifact_digest
Revises: 0009_member_values
Create Date: 2026-12-02

``mcp_servers.artifact_digest``: the registry's digest of what the install ran (npm integrity,
PyPI sha256, OCI digest, MCPB sha256; setup_agent/launch/digests.py), recorded at install and
written into a lock file by ``mcp-setup export``. Rows installed before stay NULL: an MCPB
bundle's sha256 is in its launch spec anyway; for the others the lock file says "not recorded".
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_artifact_digest"
down_revision: str | Sequence[str] | None = "0009_member_values"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_servers", sa.Column("artifact_digest", sa.String(length=160), nullable=True))


def downgrade() -> None:
    op.drop_column("mcp_servers", "artifact_digest")
