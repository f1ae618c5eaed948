"""The store: installed MCP servers and their client env, every env value encrypted by the vault.

Tables ``mcp_servers``, ``mcp_client_env``, ``mcp_audit`` (append-only) and ``mcp_tokens`` (the repository of the last is
``tokens.py``) come from the Alembic migrations in ``migrations/``
(:meth:`Store.migrate`, no ``alembic.ini``). Portable SQL: SQLite by default, any SQLAlchemy URL
works. Library errors become :class:`~setup_agent.errors.StoreError` here, with no values in them.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import secrets as _random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Boolean, DateTime, Engine, ForeignKey, Integer, LargeBinary, MetaData, String, Text
from sqlalchemy import TypeDecorator, UniqueConstraint, create_engine, delete, event, select, text, true, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, selectinload, sessionmaker
from sqlalchemy.pool import StaticPool

from .catalog import SQLITE_FILE_NAME, Catalog, CatalogServer, make_slug, parse_tools
from .errors import AlreadyInstalled, InvalidInput, NotFound, StoreError, ToolsChanged
from .pins import reconcile, summarize
from .pins import tools_hash as _pin_hash
from .secrets import SecretValue
from .vault import Vault

__all__ = [
    "DB_FILE_NAME", "HEAD_REVISION", "MIGRATIONS_DIR", "VERSION_TABLE", "AuditEntry", "AuditRow", "Base",
    "ClientEnvRow", "Clock",
    "EnvInput", "EnvKey", "InstalledServer", "ServerRow", "Store", "TokenRow", "utcnow",
]  # fmt: skip

DB_FILE_NAME = SQLITE_FILE_NAME
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: Our own Alembic version table, so a shared (team) database can host other apps too.
VERSION_TABLE = "mcp_setup_alembic_version"
#: The newest migration; a test checks it is Alembic's head, so a database already there
#: skips importing Alembic at start.
HEAD_REVISION = "0004_pins_audit"
#: PostgreSQL advisory lock key held while migrating ("mcpsetup" in ASCII, as an int64).
_MIGRATION_LOCK = 0x6D63_7073_6574_7570


#: ``{KEY: (value, secret)}`` as :meth:`Store.install` takes it.
EnvInput = Mapping[str, tuple[str | SecretValue, bool]]
_EnvItems = list[tuple[str, tuple[str | SecretValue, bool]]]
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# --- models ---------------------------------------------------------------------------


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite stores naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return _aware(value).replace(tzinfo=None) if dialect.name == "sqlite" else _aware(value)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else _aware(value)


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class ServerRow(Base):
    __tablename__ = "mcp_servers"

    server_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    qualified_name: Mapped[str] = mapped_column(String(512), unique=True)
    source: Mapped[str] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(128))
    package_type: Mapped[str] = mapped_column(String(32))
    launch_spec: Mapped[str] = mapped_column(Text)  # JSON text; never holds a secret value
    enabled: Mapped[bool] = mapped_column(Boolean)
    installed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    installed_by: Mapped[str] = mapped_column(String(128))
    tools_hash: Mapped[str] = mapped_column(String(128))
    slug: Mapped[str] = mapped_column(String(64), nullable=True, unique=True, index=True)  # set at install
    title: Mapped[str | None] = mapped_column(String(512))
    tools_json: Mapped[str | None] = mapped_column(Text)  # the exposed (approved) tool list, redacted
    # Tool pinning (pins.py): the approved list, what the server offers now, and the verdict.
    pinned_tools_json: Mapped[str | None] = mapped_column(Text)
    pinned_hash: Mapped[str | None] = mapped_column(String(64))
    pinned_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    pinned_version: Mapped[str | None] = mapped_column(String(128))
    live_tools_json: Mapped[str | None] = mapped_column(Text)
    live_hash: Mapped[str | None] = mapped_column(String(64))
    tools_state: Mapped[str | None] = mapped_column(String(16))  # pinned | changed | rejected
    tools_diff: Mapped[str | None] = mapped_column(Text)  # names only (pins.diff_tools)
    rejected_hash: Mapped[str | None] = mapped_column(String(64))

    env: Mapped[list[ClientEnvRow]] = relationship(cascade="all, delete-orphan", passive_deletes=True)


class ChangeRow(Base):
    """One row (id 1) whose counter is bumped with every change other processes must see."""

    __tablename__ = "mcp_setup_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    counter: Mapped[int] = mapped_column(Integer)


class ClientEnvRow(Base):
    __tablename__ = "mcp_client_env"
    __table_args__ = (UniqueConstraint("server_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    server_id: Mapped[str] = mapped_column(String(64), ForeignKey(ServerRow.server_id, ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(128))
    value_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    secret: Mapped[bool] = mapped_column(Boolean)


class AuditRow(Base):
    """One audited event; append-only (the migration forbids UPDATE and DELETE). No values."""

    __tablename__ = "mcp_audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    event: Mapped[str] = mapped_column(String(32))
    server_id: Mapped[str | None] = mapped_column(String(64))
    qualified_name: Mapped[str | None] = mapped_column(String(512))
    actor: Mapped[str] = mapped_column(String(128))
    old_hash: Mapped[str | None] = mapped_column(String(64))
    new_hash: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str | None] = mapped_column(String(512))


class TokenRow(Base):
    """A named bearer token of a team gateway: only its SHA-256 is stored (see ``tokens.py``)."""

    __tablename__ = "mcp_tokens"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


# --- public records ---------------------------------------------------------------------


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit: what happened to which server, when, by whom; hashes, never values."""

    id: int
    at: datetime
    event: str  # installed | removed | enabled | disabled | pinned | tools_changed | tools_approved | tools_rejected
    server_id: str | None
    qualified_name: str | None
    actor: str
    old_hash: str | None = None
    new_hash: str | None = None
    detail: str | None = None

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id, "at": self.at.isoformat(), "event": self.event, "server_id": self.server_id,
            "qualified_name": self.qualified_name, "actor": self.actor, "old_hash": self.old_hash,
            "new_hash": self.new_hash, "detail": self.detail,
        }  # fmt: skip


@dataclass(frozen=True)
class EnvKey:
    key: str
    secret: bool


@dataclass(frozen=True)
class InstalledServer:
    """An installed server as stored; its env appears only as key names and secret flags."""

    server_id: str
    qualified_name: str
    source: str
    version: str | None
    package_type: str
    launch_spec: dict[str, Any]
    enabled: bool
    installed_at: datetime
    installed_by: str
    tools_hash: str
    env_keys: tuple[EnvKey, ...]
    slug: str = ""
    title: str | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tools_recorded: bool = False  # False until a test or a connection has listed its tools
    # Pinning (pins.py): ``tools`` above is what is exposed; these say what was approved and what is offered.
    pinned_tools: tuple[dict[str, Any], ...] = ()
    live_tools: tuple[dict[str, Any], ...] = ()
    pinned_hash: str | None = None
    live_hash: str | None = None
    pinned_at: datetime | None = None
    pinned_version: str | None = None
    tools_state: str = "pinned"  # pinned | changed (waiting for the user) | rejected
    tools_diff: dict[str, Any] | None = None

    def tools_change(self) -> dict[str, Any] | None:
        """The waiting or rejected change for a face: ``{state, summary, diff}`` (names only)."""
        if self.tools_state not in ("changed", "rejected") or not self.tools_diff:
            return None
        return {"state": self.tools_state, "summary": summarize(self.tools_diff), "diff": self.tools_diff}

    def catalog_entry(self) -> CatalogServer:
        return CatalogServer(
            self.server_id, self.qualified_name, self.slug, self.title, self.enabled, self.tools,
            self.package_type, self.version,
        )  # fmt: skip


_COLUMNS = (
    "server_id", "qualified_name", "source", "version", "package_type", "enabled", "installed_at",
    "installed_by", "tools_hash", "slug", "title",
)  # fmt: skip


def _record(row: ServerRow) -> InstalledServer:
    return InstalledServer(
        **{name: getattr(row, name) for name in _COLUMNS},
        launch_spec=json.loads(row.launch_spec),
        tools=parse_tools(row.tools_json),
        tools_recorded=row.tools_json is not None,
        pinned_tools=parse_tools(row.pinned_tools_json),
        live_tools=parse_tools(row.live_tools_json),
        pinned_hash=row.pinned_hash,
        live_hash=row.live_hash,
        pinned_at=row.pinned_at,
        pinned_version=row.pinned_version,
        tools_state=row.tools_state or "pinned",
        tools_diff=json.loads(row.tools_diff) if row.tools_diff else None,
        env_keys=tuple(EnvKey(e.key, e.secret) for e in sorted(row.env, key=lambda e: e.key)),
    )


# --- error translation: the one place ---------------------------------------------------

#: Library exception -> reason. Never ``str(exc)``: it can carry statements and values.
_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (sa_exc.IntegrityError, "it conflicts with stored data (a duplicate, or a server that does not exist)"),
    (sa_exc.OperationalError, "the database is unreachable, locked or read-only"),
    (sa_exc.ProgrammingError, "the database schema is not the expected one (run the migrations)"),
    (sa_exc.SQLAlchemyError, "the database reported an error"),
)


def _store_error(exc: Exception, action: str) -> StoreError:
    reason = next((r for t, r in _REASONS if isinstance(exc, t)), "of an unexpected error")
    return StoreError(f"Could not {action}: {reason}.", details={"cause": type(exc).__name__})


# --- the repository ---------------------------------------------------------------------


class Store:
    """Repository of installed servers. Sync and thread-safe (one session per call)."""

    def __init__(self, database_url: str | URL, vault: Vault, *, clock: Clock = utcnow) -> None:
        self._vault = vault
        self._clock = clock
        self._closed = False
        self._listeners: builtins.list[Callable[[], None]] = []
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
            self._engine = create_engine(url, **kwargs)
        except Exception as exc:  # unknown dialect, missing driver
            raise StoreError(f"Cannot use the database URL ({type(exc).__name__}): is its driver installed?") from None
        if self._engine.dialect.name == "sqlite":
            event.listen(self._engine, "connect", _sqlite_on_connect)
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        try:
            self.migrate()
        except BaseException:
            self._engine.dispose()
            raise

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

    @property
    def engine(self) -> Engine:
        return self._engine

    def current_revision(self) -> str | None:
        """The schema revision recorded in the database (None when it has none yet)."""
        from sqlalchemy import inspect

        with self._translated("read the schema revision"), self._engine.connect() as conn:
            if not inspect(conn).has_table(VERSION_TABLE):
                return None
            return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()

    def migrate(self) -> None:
        """Run ``alembic upgrade head`` on this store's database (nothing to do at head)."""
        if self.current_revision() == HEAD_REVISION:
            return
        from alembic import command
        from alembic.config import Config
        from alembic.util import CommandError

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        try:
            with self._translated("migrate the database"), self._engine.begin() as conn:
                if conn.dialect.name == "postgresql":  # instances starting together migrate one at a time
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except CommandError:  # e.g. a revision from a newer mcp-setup
            raise StoreError(
                "Could not migrate the database: its schema revision is unknown to this version of mcp-setup "
                "(was it written by a newer one?)."
            ) from None

    # -- writes --------------------------------------------------------------------
    def install(
        self,
        *,
        qualified_name: str,
        source: str,
        version: str | None,
        package_type: str,
        launch_spec: Mapping[str, Any],
        installed_by: str,
        tools_hash: str,
        env: EnvInput,
        server_id: str | None = None,
        title: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> InstalledServer:
        """Record a server and its env (``{KEY: (value, secret)}``) in one transaction.

        The server gets a gateway slug not used by any other installed server
        (:func:`~setup_agent.catalog.make_slug`); ``tools`` is the tool list its test saw.
        """
        server_id = server_id or "srv_" + _random.token_hex(6)
        _check_fields(server_id=server_id, qualified_name=qualified_name, source=source, version=version)
        _check_fields(package_type=package_type, installed_by=installed_by, tools_hash=tools_hash)
        env_items = _env(env)
        spec_json = _spec_json(launch_spec, env_items)
        env_rows = [ClientEnvRow(key=k, value_encrypted=self._vault.encrypt(v), secret=s) for k, (v, s) in env_items]
        row = ServerRow(
            server_id=server_id, qualified_name=qualified_name, source=source, version=version,
            package_type=package_type, launch_spec=spec_json, enabled=True, installed_at=_aware(self._clock()),
            installed_by=installed_by, tools_hash=tools_hash, env=env_rows,
            title=(title or None) and title[:512], tools_json=_tools_json(tools),
        )  # fmt: skip
        if tools is not None:  # pinned: what the install test saw is what the user approved
            digest = _pin_hash(tools)
            row.pinned_tools_json = row.live_tools_json = row.tools_json
            row.pinned_hash = row.live_hash = digest
            row.pinned_at, row.pinned_version, row.tools_state = row.installed_at, version, "pinned"
        try:
            with self._translated(f"install {qualified_name}"), self._session() as s, s.begin():
                self._refuse_duplicate(s, qualified_name, server_id)
                row.slug = make_slug(qualified_name, set(s.scalars(select(ServerRow.slug))))
                s.add(row)
                s.flush()
                self._audit(s, "installed", row, installed_by, new=row.pinned_hash)
                self._bump(s)
                result = _record(row)
        except StoreError as exc:
            if exc.details.get("cause") == "IntegrityError":  # lost a race with another writer
                with self._translated(f"install {qualified_name}"), self._session() as s:
                    self._refuse_duplicate(s, qualified_name, server_id)
            raise
        self._changed()
        return result

    def set_enabled(self, server_id: str, enabled: bool, *, actor: str = "user") -> InstalledServer:
        with self._translated(f"update server {server_id}"), self._session() as s, s.begin():
            done = s.execute(update(ServerRow).where(ServerRow.server_id == server_id).values(enabled=bool(enabled)))
            if not done.rowcount:
                raise NotFound(f"No installed server has the id {server_id}.")
            self._bump(s)
            row = s.get_one(ServerRow, server_id, populate_existing=True)
            self._audit(s, "enabled" if enabled else "disabled", row, actor)
            result = _record(row)
        self._changed()
        return result

    def set_tools(self, server_id: str, tools: Sequence[Mapping[str, Any]]) -> bool:
        """Record the tools the server offers now and expose only their approved forms (pins.py).

        The first list ever recorded for a server without a pin becomes its pin. A list that
        differs from the pin beyond whitespace holds back what changed and waits for the user
        (``tools_state`` ``changed``); a list the user rejected stays ``rejected``. A new live
        list is audited once (``tools_changed``). True (and a change bump) when what is
        exposed or the state changed.
        """
        live_text = _tools_json(tools)
        digest = _pin_hash(tools)
        with self._translated(f"update the tools of server {server_id}"), self._session() as s, s.begin():
            row = s.get(ServerRow, server_id, with_for_update=True)  # PostgreSQL: one writer per server
            if row is None:
                return False
            before = (row.tools_json, row.tools_state)
            if row.pinned_tools_json is None:  # installed before pinning and never listed: trust on first use
                row.pinned_tools_json, row.pinned_hash = live_text, digest
                row.pinned_at, row.pinned_version = _aware(self._clock()), row.version
                self._audit(s, "pinned", row, "mcp-setup", new=digest, detail="first list seen")
            verdict = reconcile(parse_tools(row.pinned_tools_json), parse_tools(live_text))
            previous = row.live_hash or row.pinned_hash
            if digest != previous:
                self._audit(s, "tools_changed", row, "server", old=previous, new=digest,
                            detail=summarize(verdict.diff) + ("" if verdict.needs_approval else "; pinned forms kept"))
            if not verdict.needs_approval:
                state = "pinned"
            else:
                state = "rejected" if row.rejected_hash == digest else "changed"
            row.live_tools_json, row.live_hash = live_text, digest
            row.tools_json = _tools_json(verdict.exposed)
            row.tools_state = state
            row.tools_diff = json.dumps(verdict.diff, sort_keys=True) if verdict.needs_approval else None
            if (row.tools_json, row.tools_state) == before:
                return False
            self._bump(s)
        self._changed()
        return True

    def approve_tools(self, server_id: str, live_hash: str, *, actor: str) -> InstalledServer:
        """The user approved the list with ``live_hash``: it becomes the pin and is exposed whole.

        Raises :class:`~setup_agent.errors.ToolsChanged` when the server offers another list by now.
        """
        return self._decide(server_id, live_hash, actor, approve=True)

    def reject_tools(self, server_id: str, live_hash: str, *, actor: str) -> InstalledServer:
        """The user rejected the list with ``live_hash``: the pin stays, nothing more is exposed."""
        return self._decide(server_id, live_hash, actor, approve=False)

    def _decide(self, server_id: str, live_hash: str, actor: str, *, approve: bool) -> InstalledServer:
        with self._translated(f"update the tools of server {server_id}"), self._session() as s, s.begin():
            row = s.get(ServerRow, server_id, with_for_update=True)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            if row.live_hash != live_hash or row.live_tools_json is None:
                raise ToolsChanged(
                    "The server's tool list changed again since this was asked; nothing was decided. "
                    "Review the new list."
                )
            if approve:
                old = row.pinned_hash
                row.pinned_tools_json = row.tools_json = row.live_tools_json
                row.pinned_hash, row.pinned_at, row.pinned_version = live_hash, _aware(self._clock()), row.version
                row.tools_state, row.tools_diff, row.rejected_hash = "pinned", None, None
                self._audit(s, "tools_approved", row, actor, old=old, new=live_hash)
            else:
                row.tools_state, row.rejected_hash = "rejected", live_hash
                self._audit(s, "tools_rejected", row, actor, old=row.pinned_hash, new=live_hash)
            self._bump(s)
            result = _record(s.get_one(ServerRow, server_id, populate_existing=True))
        self._changed()
        return result

    def set_env_value(self, server_id: str, key: str, value: str | SecretValue, secret: bool) -> None:
        """Write one env value (encrypted), replacing it: e.g. a renewed OAuth sign-in."""
        _check_text("An env key", key, 128)
        token = self._vault.encrypt(value)
        with self._translated(f"update the env of server {server_id}"), self._session() as s, s.begin():
            if s.get(ServerRow, server_id) is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            done = s.execute(
                update(ClientEnvRow)
                .where(ClientEnvRow.server_id == server_id, ClientEnvRow.key == key)
                .values(value_encrypted=token, secret=secret)
            )
            if not done.rowcount:
                s.add(ClientEnvRow(server_id=server_id, key=key, value_encrypted=token, secret=secret))

    def remove(self, server_id: str, *, actor: str = "user") -> bool:
        """Delete the server and its env rows in one transaction; ``False`` if it was not there."""
        with self._translated(f"remove server {server_id}"), self._session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is not None:
                self._audit(s, "removed", row, actor, old=row.pinned_hash)
            s.execute(delete(ClientEnvRow).where(ClientEnvRow.server_id == server_id))
            done = s.execute(delete(ServerRow).where(ServerRow.server_id == server_id))
            if not done.rowcount:
                return False
            self._bump(s)
        self._changed()
        return True

    # -- audit ---------------------------------------------------------------------
    def _audit(
        self, s: Session, event: str, row: ServerRow, actor: str, *, old: str | None = None, new: str | None = None,
        detail: str | None = None,
    ) -> None:
        s.add(AuditRow(
            at=_aware(self._clock()), event=event, server_id=row.server_id, qualified_name=row.qualified_name,
            actor=(actor or "unknown")[:128], old_hash=old, new_hash=new, detail=detail and detail[:512],
        ))  # fmt: skip

    def audit(self, *, limit: int | None = None, server_id: str | None = None) -> builtins.list[AuditEntry]:
        """Audit rows, oldest first (the last ``limit`` when given)."""
        query = select(AuditRow).order_by(AuditRow.id.desc())
        if server_id is not None:
            query = query.where(AuditRow.server_id == server_id)
        if limit is not None:
            query = query.limit(max(int(limit), 0))
        with self._translated("read the audit"), self._session() as s:
            rows = builtins.list(s.scalars(query))
        return [
            AuditEntry(r.id, r.at, r.event, r.server_id, r.qualified_name, r.actor, r.old_hash, r.new_hash, r.detail)
            for r in reversed(rows)
        ]

    def audit_counts(self) -> dict[str, int]:
        """Audit rows per event, and ``total`` (for ``tool_registry_diagnostics``)."""
        from sqlalchemy import func

        with self._translated("count the audit"), self._session() as s:
            pairs = s.execute(select(AuditRow.event, func.count()).group_by(AuditRow.event)).all()
        counts = {str(event): int(n) for event, n in pairs}
        counts["total"] = sum(counts.values())
        return counts

    # -- change marker -------------------------------------------------------------
    def change_counter(self) -> int:
        """The change counter: bumped by every install, removal, enable/disable, tool change."""
        with self._translated("read the change counter"), self._session() as s:
            return int(s.scalar(select(ChangeRow.counter).where(ChangeRow.id == 1)) or 0)

    def add_change_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Called (in the writing thread) after each change this process committed."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _bump(self, s: Session) -> None:
        done = s.execute(update(ChangeRow).where(ChangeRow.id == 1).values(counter=ChangeRow.counter + 1))
        if not done.rowcount:
            s.add(ChangeRow(id=1, counter=1))

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # a listener must not undo a committed change
                logging.getLogger(__name__).exception("store change listener failed")

    # -- reads ---------------------------------------------------------------------
    def get(self, server_id: str) -> InstalledServer | None:
        return self._one(ServerRow.server_id == server_id, f"read server {server_id}")

    def get_by_name(self, qualified_name: str) -> InstalledServer | None:
        return self._one(ServerRow.qualified_name == qualified_name, f"read server {qualified_name}")

    def list(self, *, enabled_only: bool = False) -> builtins.list[InstalledServer]:
        """Installed servers, oldest first."""
        query = select(ServerRow).options(selectinload(ServerRow.env))
        if enabled_only:
            query = query.where(ServerRow.enabled.is_(True))
        query = query.order_by(ServerRow.installed_at, ServerRow.qualified_name)
        with self._translated("list servers"), self._session() as s:
            return [_record(r) for r in s.scalars(query)]

    def catalog(self) -> Catalog:
        """The gateway catalog of every installed server (see :mod:`setup_agent.catalog`)."""
        return Catalog.build(server.catalog_entry() for server in self.list())

    def secret_values(self) -> builtins.list[tuple[str, str, SecretValue]]:
        """``(server_id, key, value)`` of every stored secret; one that cannot be decrypted is skipped."""
        with self._translated("read the stored secrets"), self._session() as s:
            rows = s.execute(
                select(ClientEnvRow.server_id, ClientEnvRow.key, ClientEnvRow.value_encrypted).where(
                    ClientEnvRow.secret.is_(True)
                )
            ).all()
        out = []
        for server_id, key, token in rows:
            try:
                out.append((server_id, key, self._vault.decrypt(token)))
            except StoreError:
                logging.getLogger(__name__).warning("the stored %s of server %s cannot be decrypted", key, server_id)
        return out

    def env_values(self, server_id: str) -> dict[str, SecretValue]:
        """Decrypted env of a server, every value a :class:`SecretValue` (secret or not)."""
        with self._translated(f"read the env of server {server_id}"), self._session() as s:
            server = s.get(ServerRow, server_id)
            if server is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            name = f"{server.qualified_name} ({server_id})"
            rows = s.execute(
                select(ClientEnvRow.key, ClientEnvRow.value_encrypted).where(ClientEnvRow.server_id == server_id)
            ).all()
        return {key: self._decrypt(token, name, key) for key, token in rows}

    def rotate_key(self, new_vault: Vault) -> int:
        """Re-encrypt every stored value with ``new_vault`` in one transaction; returns how many.

        Nothing changes unless all of them were re-encrypted: a failure midway (a value this
        store's vault cannot decrypt, the database) rolls back and leaves the old values intact.
        Afterwards this store uses ``new_vault``.
        """
        done: set[int] = set()
        with self._translated("re-encrypt the stored values"), self._session() as s, s.begin():
            if s.get_bind().dialect.name == "postgresql":  # no install may slip in under the old key
                s.execute(text("LOCK TABLE mcp_client_env IN SHARE ROW EXCLUSIVE MODE"))
            while True:  # SQLite: rows inserted before our first write are caught on the next pass
                rows = s.execute(
                    select(ClientEnvRow.id, ClientEnvRow.key, ClientEnvRow.value_encrypted, ServerRow.qualified_name)
                    .join(ServerRow, ServerRow.server_id == ClientEnvRow.server_id)
                    .where(ClientEnvRow.id.not_in(done) if done else true())
                    .order_by(ClientEnvRow.id)
                ).all()
                if not rows:
                    break
                for row_id, key, token, name in rows:
                    value = self._decrypt(token, name, key)
                    s.execute(
                        update(ClientEnvRow).where(ClientEnvRow.id == row_id).values(value_encrypted=new_vault.encrypt(value))
                    )
                    done.add(row_id)
        self._vault = new_vault
        return len(done)

    def _decrypt(self, token: bytes, server_name: str, key: str) -> SecretValue:
        try:
            return self._vault.decrypt(token)
        except StoreError as exc:
            raise StoreError(
                f"The setting {key} of {server_name} cannot be decrypted with this data key ({exc.message}). "
                "Start mcp-setup with the key it was stored with (MCP_SETUP_DATA_KEY_FILE; `mcp-setup key export` "
                "on a machine that has it), or remove the server and install it again.",
                key=key,
                details={"server": server_name},
            ) from None

    def close(self) -> None:
        """Dispose of the engine's connections. The store cannot be used afterwards."""
        self._closed = True
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store(url={self._engine.url!r}, vault={self._vault!r})"  # URL repr hides a password

    # -- internals -----------------------------------------------------------------
    def _session(self) -> Session:
        if self._closed:
            raise StoreError("The store is closed.")
        return self._sessions()

    def _one(self, where: Any, action: str) -> InstalledServer | None:
        with self._translated(action), self._session() as s:
            row = s.scalars(select(ServerRow).options(selectinload(ServerRow.env)).where(where)).one_or_none()
            return None if row is None else _record(row)

    @staticmethod
    def _refuse_duplicate(s: Session, qualified_name: str, server_id: str) -> None:
        taken = s.scalars(
            select(ServerRow).where((ServerRow.qualified_name == qualified_name) | (ServerRow.server_id == server_id))
        ).first()
        if taken is None:
            return
        what = qualified_name if taken.qualified_name == qualified_name else f"a server with the id {server_id}"
        raise AlreadyInstalled(
            f"{what} is already installed (server id {taken.server_id}). Remove it first "
            "(mcp_setup_remove), then install it again.",
            details={"server_id": taken.server_id, "qualified_name": taken.qualified_name},
        )

    @contextmanager
    def _translated(self, action: str) -> Iterator[None]:
        try:
            yield
        except sa_exc.SQLAlchemyError as exc:
            raise _store_error(exc, action) from exc  # hide_parameters: the cause holds no values


# --- helpers ----------------------------------------------------------------------------


def _sqlite_on_connect(dbapi_connection: Any, _connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")  # SQLite enforces FKs (ON DELETE CASCADE) only with this
    cursor.close()


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


_LIMITS = {
    "server_id": 64, "qualified_name": 512, "source": 64, "version": 128, "package_type": 32,
    "installed_by": 128, "tools_hash": 128,
}  # fmt: skip (the column lengths)


def _check_fields(**fields: object) -> None:
    for name, value in fields.items():
        if not (name == "version" and value is None):
            _check_text(name, value, _LIMITS[name])


def _check_text(name: str, value: object, limit: int) -> None:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidInput(f"{name} must be a non-empty string of at most {limit} characters.")


def _env(env: EnvInput) -> _EnvItems:
    items = builtins.list(env.items())
    for key, pair in items:
        _check_text("An env key", key, 128)
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], bool)):
            raise InvalidInput(f"The env entry for {key} must be a (value, secret: bool) pair.", key=key)
    return items


def _tools_json(tools: Sequence[Mapping[str, Any]] | None) -> str | None:
    if tools is None:
        return None
    try:
        return json.dumps([dict(t) for t in tools], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidInput("tools must be a list of JSON objects.") from None


def _holds(text: str, value: str) -> bool:
    """``value`` in ``text``, byte-exactly: anywhere from 8 characters, as a whole token below
    (the redactor's rule, #10 item 8: a short secret is refused from disk too)."""
    if len(value) >= 8:
        return value in text
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", text) is not None


def _spec_json(launch_spec: Mapping[str, Any], env: _EnvItems) -> str:
    try:
        text = json.dumps(dict(launch_spec), sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidInput("launch_spec must be a JSON object of plain values.") from None
    for key, (value, secret) in env:  # the launch spec is stored in clear: no secret value in it
        plain = value.reveal() if isinstance(value, SecretValue) else value
        if secret and isinstance(plain, str) and plain and _holds(text, json.dumps(plain)[1:-1]):
            raise InvalidInput(
                f"The launch spec contains the value of the secret {key}; use the template ${{{key}}} instead.",
                key=key,
            )
    return text
