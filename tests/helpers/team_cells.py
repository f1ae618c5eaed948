"""Every cell of a team's setup state in its database, to look for a value in."""

from __future__ import annotations

from sqlalchemy import inspect, text

from setup_agent.store.database import Store


def every_cell(store: Store) -> str:
    out = []
    with store.database.engine.connect() as conn:
        for table in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                out.append(repr(tuple(row)))
    return "\n".join(out)
