"""The store: one :class:`~setup_agent.store.engine.Database` (the session factory) and the
repositories that receive it, built together in :class:`Store`'s constructor.

- ``store.servers`` (``servers.py``): install, replace, enable or disable, remove, read servers;
- ``store.values`` (``values.py``): their encrypted settings, each member's own values, key rotation;
- ``store.pins`` (``tool_pins.py``): the tools and prompts each server offers and what was approved;
- ``store.tokens`` (``tokens.py``): a team gateway's named bearer tokens;
- ``store.tool_use`` (``usage.py``): when each installed tool was last called (what a budget lists first);
- ``store.preferences`` (``preferences.py``): the person's gateway-wide settings (the tools budget);
- ``store.audit`` (``audit.py``): the append-only audit, chained under a key the data key encrypts (``audit_key.py``);
- ``store.database`` (``engine.py``): sessions, migrations and the change counter other processes watch.

Tables come from the Alembic migrations in ``migrations/`` (no ``alembic.ini``); their names are
in ``schema.py``. Portable SQL: SQLite by default, any SQLAlchemy URL works. Library errors become
:class:`~setup_agent.errors.StoreError` (``engine.store_error``), with no values in them.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL

from setup_agent.secrets import Vault

from .audit import AuditLog
from .catalog import SQLITE_FILE_NAME
from .engine import HEAD_REVISION, MIGRATIONS_DIR, VERSION_TABLE, Database
from .models import (
    AuditEntry,
    AuditRow,
    Base,
    ClientEnvRow,
    Clock,
    EnvKey,
    InstalledServer,
    ServerRow,
    TokenRow,
    utcnow,
)
from .preferences import Preferences
from .servers import EnvInput, Servers
from .shared_rows import SecretRefRow as _SecretRefRow  # noqa: F401 - the shared tables in Base.metadata (0008)
from .tokens import Tokens
from .tool_pins import Pins
from .usage import ToolUse
from .values import Values

__all__ = [
    "DB_FILE_NAME",
    "HEAD_REVISION",
    "MIGRATIONS_DIR",
    "VERSION_TABLE",
    "AuditEntry",
    "AuditRow",
    "Base",
    "ClientEnvRow",
    "Clock",
    "EnvInput",
    "EnvKey",
    "InstalledServer",
    "ServerRow",
    "Store",
    "TokenRow",
    "utcnow",
]

DB_FILE_NAME = SQLITE_FILE_NAME


class Store:
    """The database and its repositories. Sync and thread-safe (one session per call)."""

    def __init__(self, database_url: str | URL, vault: Vault, *, clock: Clock = utcnow) -> None:
        self.database = Database(database_url, clock=clock)
        self.audit = AuditLog(self.database, vault)
        self.values = Values(self.database, vault, self.audit)
        self.pins = Pins(self.database, self.audit)
        self.servers = Servers(self.database, self.values, self.pins, self.audit)
        self.tokens = Tokens(self.database, self.values)
        self.tool_use = ToolUse(self.database)
        self.preferences = Preferences(self.database, self.audit)

    @classmethod
    def for_data_dir(
        cls, data_dir: Path, vault: Vault, database_url: str | URL | None = None, *, clock: Clock = utcnow
    ) -> Store:
        """The store for ``data_dir``: ``<data_dir>/mcp-setup.db`` unless ``database_url`` is given."""
        data_dir = Path(data_dir)
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if database_url is None:
            db = data_dir / DB_FILE_NAME
            if not db.exists():  # SQLite gives its journal/WAL files the db file's mode
                os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
            database_url = URL.create("sqlite", database=str(db))
        return cls(database_url, vault, clock=clock)

    def close(self) -> None:
        """Dispose of the engine's connections. The store cannot be used afterwards."""
        self.database.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store(url={self.database.engine.url!r}, vault={self.values.vault!r})"  # URL repr hides a password
