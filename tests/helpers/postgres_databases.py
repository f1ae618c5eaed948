"""A throwaway database on a PostgreSQL cluster: created empty, dropped (its sessions ended) on
exit. Shared by the test fixtures (tests/conftest.py) and the team benchmark (bench/section_team.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def throwaway_database(base_url: str, prefix: str = "t_") -> Iterator[str]:
    """Yield the SQLAlchemy URL of a new database next to ``base_url``'s."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = prefix + uuid.uuid4().hex[:16]
    admin = make_url(base_url)
    dsn = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
