"""The audit chained and harder to rewrite.

Revision ID: 0007_audit_chain
Revises: 0006_principals
Create Date: 2026-12-02

``mcp_audit`` gets ``prev_hash`` and ``row_hash`` (setup_agent/store/audit.py); the rows
already there are chained in id order (the append-only rules are lifted for that one update and
set again). Two more refusals:

- SQLite: an insert whose id is not past the last row (``INSERT OR REPLACE`` over a row deletes it
  without firing the DELETE trigger);
- PostgreSQL: ``TRUNCATE`` (the rules cover UPDATE and DELETE only), by a ``BEFORE TRUNCATE``
  trigger. A role that does not own the table cannot drop the rules or triggers (docs/secrets-and-consent.md:
  the owner migrates, the service's role gets SELECT and INSERT).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from setup_agent.store.audit import GENESIS, LinkContent, row_digest

revision: str = "0007_audit_chain"
down_revision: str | Sequence[str] | None = "0006_principals"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("id", "at", "event", "server_id", "qualified_name", "actor", "old_hash", "new_hash", "detail")


def _lift(dialect: str) -> None:
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS mcp_audit_no_update")
    elif dialect == "postgresql":
        op.execute("DROP RULE IF EXISTS mcp_audit_no_update ON mcp_audit")


def _restore(dialect: str) -> None:
    if dialect == "sqlite":
        op.execute(
            "CREATE TRIGGER mcp_audit_no_update BEFORE UPDATE ON mcp_audit "
            "BEGIN SELECT RAISE(ABORT, 'mcp_audit is append-only'); END"
        )
    elif dialect == "postgresql":
        op.execute("CREATE RULE mcp_audit_no_update AS ON UPDATE TO mcp_audit DO INSTEAD NOTHING")


def upgrade() -> None:
    op.add_column("mcp_audit", sa.Column("prev_hash", sa.String(64), nullable=True))
    op.add_column("mcp_audit", sa.Column("row_hash", sa.String(64), nullable=True))
    conn = op.get_bind()
    dialect = conn.dialect.name
    audit = sa.table("mcp_audit", *(sa.column(c) for c in (*_COLUMNS, "prev_hash", "row_hash")))
    rows = conn.execute(sa.select(*(audit.c[c] for c in _COLUMNS)).order_by(audit.c.id)).all()
    if rows:
        _lift(dialect)
        prev = GENESIS
        for row in rows:
            values = dict(zip(_COLUMNS, row, strict=True))
            if isinstance(values["at"], str):  # SQLite without the model's type: ISO text
                from datetime import datetime

                values["at"] = datetime.fromisoformat(values["at"])
            digest = row_digest(LinkContent(prev, **values))
            conn.execute(audit.update().where(audit.c.id == values["id"]).values(prev_hash=prev, row_hash=digest))
            prev = digest
        _restore(dialect)
    if dialect == "sqlite":
        op.execute(
            "CREATE TRIGGER mcp_audit_no_replace BEFORE INSERT ON mcp_audit "
            "WHEN NEW.id IS NOT NULL AND NEW.id <= (SELECT max(id) FROM mcp_audit) "
            "BEGIN SELECT RAISE(ABORT, 'mcp_audit is append-only'); END"
        )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION mcp_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'mcp_audit is append-only'; END $$"
        )
        op.execute(
            "CREATE TRIGGER mcp_audit_no_truncate BEFORE TRUNCATE ON mcp_audit "
            "FOR EACH STATEMENT EXECUTE FUNCTION mcp_audit_refuse()"
        )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS mcp_audit_no_replace")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS mcp_audit_no_truncate ON mcp_audit")
        op.execute("DROP FUNCTION IF EXISTS mcp_audit_refuse()")
    op.drop_column("mcp_audit", "row_hash")
    op.drop_column("mcp_audit", "prev_hash")
