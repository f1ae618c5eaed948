"""Alembic environment for mcp-setup, driven from code by ``Store.migrate()``.

``Store.migrate`` passes an open connection in ``config.attributes["connection"]``; without
one (a developer running ``alembic`` by hand) ``sqlalchemy.url`` from the config is used.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from setup_agent.store.engine import VERSION_TABLE
from setup_agent.store.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        **kwargs,
    )


def _run(connection: Connection) -> None:
    # batch mode lets later migrations ALTER tables on SQLite (copy-and-move)
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
    else:
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "", hide_parameters=True)
        try:
            with engine.begin() as connection:
                _run(connection)
        finally:
            engine.dispose()
