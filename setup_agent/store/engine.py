"""The database under the store: the session factory every repository receives, the engine for
a URL, the schema migrations, the error text.

:class:`Database` is the one session factory: the engine, its migrations, a :meth:`Database.session`
per unit of work, and the change counter other processes watch (with this process's listeners).
:func:`open_engine` makes the SQLAlchemy engine (SQLite by default, any URL; parameters hidden
from errors and logs); :func:`migrate` runs the Alembic migrations in ``migrations/`` from code
(PostgreSQL: under an advisory lock, so instances starting together migrate one at a time);
:func:`store_error` is the one place a library exception becomes a
:class:`~setup_agent.errors.StoreError`.

A SQLite file is kept in write-ahead-log mode (``journal_mode=WAL``, recorded in the file, so
every reader of it sees it, the standard-library ones too) with ``synchronous=NORMAL``: a commit
appends to ``<file>-wal`` and does not wait for the disk, which is synced at each checkpoint. A
commit stays atomic and the file is never left damaged. A crash of mcp-setup loses nothing (the
system still writes what it was given); a power cut can lose the commits of the last seconds,
each whole with its audit row: a person does that install or toggle again, and the audit chain
still verifies. A writer waits up to :data:`SQLITE_BUSY_TIMEOUT_MS` for another process's write
(``serve``, ``mcp-setup mcp`` and the CLI share one file) before its "locked" error; readers do not
wait for writers. WAL needs every process on one machine (``<file>-shm`` is shared memory), and
``-wal`` holds commits not yet in the database file: the data dir is copied with mcp-setup stopped
(docs/data-folder.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, select, text, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from setup_agent.errors import StoreError

from .change_feed import CHANGES_CHANNEL, notify
from .models import ChangeRow, Clock, utcnow
from .schema import VERSION_TABLE

__all__ = [
    "Database",
    "HEAD_REVISION",
    "MIGRATIONS_DIR",
    "SQLITE_BUSY_TIMEOUT_MS",
    "VERSION_TABLE",
    "current_revision",
    "migrate",
    "open_engine",
    "store_error",
    "translated",
]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: The newest migration; a test checks it is Alembic's head, so a database already there
#: skips importing Alembic at start.
HEAD_REVISION = "0018_tool_use"
#: PostgreSQL advisory lock key held while migrating ("mcpsetup" in ASCII, as an int64).
_MIGRATION_LOCK = 0x6D63_7073_6574_7570
#: How long a SQLite connection waits for another process's write transaction to end: far
#: longer than any transaction mcp-setup makes (milliseconds; a migration or a key rotation at
#: most seconds on a slow disk), short enough that a process stuck holding the lock becomes the
#: "locked" error instead of a hang.
SQLITE_BUSY_TIMEOUT_MS = 10_000


#: Library exception -> reason. Never ``str(exc)``: it can carry statements and values.
_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (sa_exc.IntegrityError, "it conflicts with stored data (a duplicate, or a server that does not exist)"),
    (sa_exc.OperationalError, "the database is unreachable, locked or read-only"),
    (sa_exc.ProgrammingError, "the database schema is not the expected one (run the migrations)"),
    (sa_exc.SQLAlchemyError, "the database reported an error"),
)


def store_error(exc: Exception, action: str) -> StoreError:
    reason = next((r for t, r in _REASONS if isinstance(exc, t)), "of an unexpected error")
    return StoreError(f"Could not {action}: {reason}.", details={"cause": type(exc).__name__})


@contextmanager
def translated(action: str) -> Iterator[None]:
    """SQLAlchemy's errors become one :class:`StoreError` saying what could not be done (the cause
    holds no values: engines are made with ``hide_parameters``)."""
    try:
        yield
    except sa_exc.SQLAlchemyError as exc:
        raise store_error(exc, action) from exc


class Database:
    """The session factory over one database: migrated on open, one session per unit of work.

    Every repository of the store receives it. Its change counter is bumped (:meth:`bump`) inside
    the transaction of every change other processes must see; after the commit the writer calls
    :meth:`changed` so this process's listeners look at once.
    """

    def __init__(self, database_url: str | URL, *, clock: Clock = utcnow) -> None:
        self.clock = clock
        self._closed = False
        self._listeners: list[Callable[[], None]] = []
        self.engine = open_engine(database_url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        try:
            self.migrate()
        except BaseException:
            self.engine.dispose()
            raise

    def session(self) -> Session:
        """A new session (use it as a context manager; ``session.begin()`` for a transaction)."""
        if self._closed:
            raise StoreError("The store is closed.")
        return self._sessions()

    def current_revision(self) -> str | None:
        """The schema revision recorded in the database (None when it has none yet)."""
        return current_revision(self.engine)

    def migrate(self) -> None:
        """Run ``alembic upgrade head`` on this database (nothing to do at head)."""
        migrate(self.engine)

    def close(self) -> None:
        """Dispose of the engine's connections. No session can be opened afterwards."""
        self._closed = True
        self.engine.dispose()

    # -- the change counter ----------------------------------------------------------
    def change_counter(self) -> int:
        """The change counter: bumped by every install, removal, enable/disable, tool change."""
        with translated("read the change counter"), self.session() as s:
            return int(s.scalar(select(ChangeRow.counter).where(ChangeRow.id == 1)) or 0)

    def bump(self, s: Session) -> None:
        """Bump the counter in ``s``'s transaction (PostgreSQL: other replicas hear it at commit)."""
        done = s.execute(update(ChangeRow).where(ChangeRow.id == 1).values(counter=ChangeRow.counter + 1))
        if not done.rowcount:
            s.add(ChangeRow(id=1, counter=1))
        notify(s, CHANGES_CHANNEL)

    def add_change_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Called (in the writing thread) after each change this process committed."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def changed(self) -> None:
        """A change was committed (here, or another process's that a team's feed heard): the
        listeners look."""
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # a listener must not undo a committed change
                logging.getLogger(__name__).exception("store change listener failed")

    def __repr__(self) -> str:
        return f"Database(url={self.engine.url!r})"  # URL repr hides a password


def open_engine(database_url: str | URL) -> Engine:
    """The engine for ``database_url`` (a missing SQLite file's folder is made, 0700)."""
    try:
        url = make_url(database_url)
    except (sa_exc.ArgumentError, ValueError):
        raise StoreError("The database URL is not a valid SQLAlchemy URL.") from None
    kwargs: dict[str, Any] = {"hide_parameters": True}  # no values in errors or logs
    if url.get_backend_name() != "sqlite":  # a server can restart or drop us: check before use
        kwargs["pool_pre_ping"] = True
    if url.get_backend_name() == "sqlite":
        if url.database in (None, "", ":memory:"):
            kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
        elif not url.database.startswith("file:"):
            Path(url.database).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        engine = create_engine(url, **kwargs)
    except Exception as exc:  # unknown dialect, missing driver
        raise StoreError(f"Cannot use the database URL ({type(exc).__name__}): is its driver installed?") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect)
    return engine


def current_revision(engine: Engine) -> str | None:
    """The schema revision recorded in the database (None when it has none yet)."""
    from sqlalchemy import inspect

    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(VERSION_TABLE):
                return None
            return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    except sa_exc.SQLAlchemyError as exc:
        raise store_error(exc, "read the schema revision") from exc


def migrate(engine: Engine) -> None:
    """Run ``alembic upgrade head`` on ``engine``'s database (nothing to do at head)."""
    if current_revision(engine) == HEAD_REVISION:
        return
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":  # instances starting together migrate one at a time
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except CommandError:  # e.g. a revision from a newer mcp-setup
        raise StoreError(
            "Could not migrate the database: its schema revision is unknown to this version of mcp-setup "
            "(was it written by a newer one?)."
        ) from None
    except sa_exc.SQLAlchemyError as exc:
        raise store_error(exc, "migrate the database") from exc


def _sqlite_on_connect(dbapi_connection: Any, _connection_record: Any) -> None:
    """Every SQLite connection: the busy timeout first (switching a file to WAL takes a lock),
    WAL with ``synchronous=NORMAL`` (module doc), foreign keys enforced."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        (mode,) = cursor.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode == "wal":  # an in-memory database stays "memory", with its default sync
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")  # SQLite enforces FKs (ON DELETE CASCADE) only with this
    finally:
        cursor.close()
