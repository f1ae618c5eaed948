"""The store: installed MCP servers and their client env, every env value encrypted by the vault.

Tables ``mcp_servers``, ``mcp_client_env``, ``mcp_audit`` (append-only) and ``mcp_tokens`` (the
repository of the last is ``tokens.py``) come from the Alembic migrations in ``migrations/``,
run by ``engine.py`` (no ``alembic.ini``). Portable SQL: SQLite by default, any SQLAlchemy URL
works. Library errors become :class:`~setup_agent.errors.StoreError` (``engine.store_error``),
with no values in them.

The models and records are in ``models.py``; the tool pins and the audit (``tool_pins.py``) and
the encrypted values with key rotation (``keys.py``) are parts of :class:`Store`.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import secrets as _random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, selectinload, sessionmaker

from setup_agent.errors import AlreadyInstalled, InvalidInput, NotFound, StoreError
from setup_agent.secrets import SecretValue, Vault

from .catalog import SQLITE_FILE_NAME, Catalog, make_slug
from .change_feed import CHANGES_CHANNEL, notify
from .engine import HEAD_REVISION, MIGRATIONS_DIR, VERSION_TABLE, current_revision, migrate, open_engine, translated
from .keys import EncryptedValues
from .member_values import MemberValues
from .models import (
    AuditEntry,
    AuditRow,
    Base,
    ChangeRow,
    ClientEnvRow,
    Clock,
    EnvKey,
    InstalledServer,
    ServerRow,
    TokenRow,
    _aware,
    _check_text,
    _record,
    _tools_json,
    utcnow,
)
from .pins import tools_hash as _pin_hash
from .server_extras import ServerExtras
from .shared_rows import SecretRefRow as _SecretRefRow  # noqa: F401 - the shared tables in Base.metadata (0008)
from .tool_pins import ToolPins

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


#: ``{KEY: (value, secret)}`` as :meth:`Store.install` takes it.
EnvInput = Mapping[str, tuple[str | SecretValue, bool]]
_EnvItems = list[tuple[str, tuple[str | SecretValue, bool]]]


# --- the repository ---------------------------------------------------------------------


class Store(ToolPins, ServerExtras, EncryptedValues, MemberValues):
    """Repository of installed servers. Sync and thread-safe (one session per call).

    Its tool pins and audit come from :class:`~setup_agent.store.tool_pins.ToolPins`, its encrypted
    values and key rotation from :class:`~setup_agent.store.keys.EncryptedValues`, each member's own
    values from :class:`~setup_agent.store.member_values.MemberValues`.
    """

    def __init__(self, database_url: str | URL, vault: Vault, *, clock: Clock = utcnow) -> None:
        self._vault = vault
        self._clock = clock
        self._closed = False
        self._listeners: builtins.list[Callable[[], None]] = []
        self._engine = open_engine(database_url)
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
        return current_revision(self._engine)

    def migrate(self) -> None:
        """Run ``alembic upgrade head`` on this store's database (nothing to do at head)."""
        migrate(self._engine)

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
        replaces: str | None = None,
        member_keys: Sequence[str] = (),
        artifact_digest: str | None = None,
        hidden_tools: Sequence[str] = (),
    ) -> InstalledServer:
        """Record a server and its env (``{KEY: (value, secret)}``) in one transaction.

        The server gets a gateway slug not used by any other installed server
        (:func:`~setup_agent.store.catalog.make_slug`); ``tools`` is the tool list its test saw.
        ``replaces``: the server id of the version this one replaces (``mcp-setup update``): its
        row and encrypted values are deleted in the same transaction, so a crash at
        any moment leaves exactly one of the two; its slug passes to the new row. ``member_keys``:
        the keys each member enters for themselves (``member_values.py``).
        ``artifact_digest``: the registry's digest of what was installed (setup_agent/launch/digests.py).
        ``hidden_tools``: the tools the user unticked in the consent, stored with the pin; an update keeps the ones of the
        version it replaces.
        """
        server_id = server_id or "srv_" + _random.token_hex(6)
        _check_fields(server_id=server_id, qualified_name=qualified_name, source=source, version=version)
        _check_fields(package_type=package_type, installed_by=installed_by, tools_hash=tools_hash)
        env_items = _env(env)
        spec_json = _spec_json(launch_spec, env_items)
        env_rows = [ClientEnvRow(key=k, value_encrypted=self._vault.encrypt(v), secret=s) for k, (v, s) in env_items]
        row = ServerRow(
            server_id=server_id,
            qualified_name=qualified_name,
            source=source,
            version=version,
            package_type=package_type,
            launch_spec=spec_json,
            enabled=True,
            installed_at=_aware(self._clock()),
            installed_by=installed_by,
            tools_hash=tools_hash,
            env=env_rows,
            title=(title or None) and title[:512],
            tools_json=_tools_json(tools),
            member_keys=json.dumps(sorted(set(member_keys))) if member_keys else None,
            artifact_digest=(artifact_digest or None) and artifact_digest[:160],
        )
        if tools is not None:  # pinned: what the install test saw is what the user approved
            digest = _pin_hash(tools)
            row.pinned_tools_json = row.live_tools_json = row.tools_json
            row.pinned_hash = row.live_hash = digest
            row.pinned_at, row.pinned_version, row.tools_state = row.installed_at, version, "pinned"
        try:
            with translated(f"install {qualified_name}"), self._session() as s, s.begin():
                carried = self._carry_members(s, replaces, row) if replaces is not None else []  # members' own keys
                if replaces is not None:
                    hidden_tools = [*hidden_tools, *self._hidden_of(s, replaces)]
                    self._delete_replaced(s, replaces, qualified_name, installed_by)
                self._refuse_duplicate(s, qualified_name, server_id)
                row.slug = make_slug(qualified_name, set(s.scalars(select(ServerRow.slug))))
                s.add(row)
                s.flush()
                self._restore_members(s, row, carried)
                self._audit(s, "installed", row, installed_by, new=row.pinned_hash)
                if hidden_tools:
                    self._write_hidden(s, row, hidden_tools, installed_by)
                self._bump(s)
                result = _record(row)
        except StoreError as exc:
            if exc.details.get("cause") == "IntegrityError":  # lost a race with another writer
                with translated(f"install {qualified_name}"), self._session() as s:
                    self._refuse_duplicate(s, qualified_name, server_id)
            raise
        self._changed()
        return result

    def _delete_replaced(self, s: Session, server_id: str, qualified_name: str, actor: str) -> None:
        old = s.get(ServerRow, server_id)
        if old is None or old.qualified_name != qualified_name:
            raise NotFound(f"The server {server_id} to replace is not installed (any more).")
        self._audit(s, "removed", old, actor, old=old.pinned_hash, detail="replaced by a new version")
        s.execute(delete(ClientEnvRow).where(ClientEnvRow.server_id == server_id))
        s.execute(delete(ServerRow).where(ServerRow.server_id == server_id))
        s.flush()

    def set_enabled(self, server_id: str, enabled: bool, *, actor: str = "user") -> InstalledServer:
        with translated(f"update server {server_id}"), self._session() as s, s.begin():
            done = s.execute(update(ServerRow).where(ServerRow.server_id == server_id).values(enabled=bool(enabled)))
            if not done.rowcount:
                raise NotFound(f"No installed server has the id {server_id}.")
            self._bump(s)
            row = s.get_one(ServerRow, server_id, populate_existing=True)
            self._audit(s, "enabled" if enabled else "disabled", row, actor)
            result = _record(row)
        self._changed()
        return result

    def set_network(self, server_id: str, policy: Mapping[str, Any], *, actor: str = "user") -> InstalledServer:
        """The person's network policy for the server (``NetPolicy.to_dict()``), kept in its launch
        spec as ``sandbox_net``: its next start's proxy applies it. Audited as ``network``."""
        with translated(f"update server {server_id}"), self._session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            spec = {**json.loads(row.launch_spec), "sandbox_net": dict(policy)}
            row.launch_spec = json.dumps(spec, sort_keys=True, separators=(",", ":"))
            self._bump(s)
            self._audit(s, "network", row, actor, detail=json.dumps(dict(policy), sort_keys=True)[:500])
            result = _record(row)
        self._changed()
        return result

    def set_needs_sign_in(self, server_id: str, needed: bool) -> bool:
        """Remember that the server's sign-in could not be renewed (or works again); True when it
        changed. Not a change other processes act on (no counter bump): a face shows it."""
        with translated(f"update server {server_id}"), self._session() as s, s.begin():
            done = s.execute(
                update(ServerRow)
                .where(ServerRow.server_id == server_id, ServerRow.needs_sign_in.isnot(bool(needed)))
                .values(needs_sign_in=bool(needed))
            )
            return bool(done.rowcount)

    def remove(self, server_id: str, *, actor: str = "user") -> bool:
        """Delete the server and its env rows in one transaction; ``False`` if it was not there."""
        with translated(f"remove server {server_id}"), self._session() as s, s.begin():
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

    # -- change marker -------------------------------------------------------------
    def change_counter(self) -> int:
        """The change counter: bumped by every install, removal, enable/disable, tool change."""
        with translated("read the change counter"), self._session() as s:
            return int(s.scalar(select(ChangeRow.counter).where(ChangeRow.id == 1)) or 0)

    def add_change_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Called (in the writing thread) after each change this process committed."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _bump(self, s: Session) -> None:
        done = s.execute(update(ChangeRow).where(ChangeRow.id == 1).values(counter=ChangeRow.counter + 1))
        if not done.rowcount:
            s.add(ChangeRow(id=1, counter=1))
        notify(s, CHANGES_CHANNEL)  # PostgreSQL: other replicas hear it at commit (change_feed.py)

    def remote_changed(self) -> None:
        """Another process committed a change (a team's feed heard it): this process's listeners look."""
        self._changed()

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
        with translated("list servers"), self._session() as s:
            return [_record(r) for r in s.scalars(query)]

    def catalog(self) -> Catalog:
        """The gateway catalog of every installed server (see :mod:`setup_agent.store.catalog`)."""
        return Catalog.build(server.catalog_entry() for server in self.list())

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
        with translated(action), self._session() as s:
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


# --- helpers ----------------------------------------------------------------------------


_LIMITS = {
    "server_id": 64,
    "qualified_name": 512,
    "source": 64,
    "version": 128,
    "package_type": 32,
    "installed_by": 128,
    "tools_hash": 128,
}


def _check_fields(**fields: object) -> None:
    for name, value in fields.items():
        if not (name == "version" and value is None):
            _check_text(name, value, _LIMITS[name])


def _env(env: EnvInput) -> _EnvItems:
    items = builtins.list(env.items())
    for key, pair in items:
        _check_text("An env key", key, 128)
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], bool)):
            raise InvalidInput(f"The env entry for {key} must be a (value, secret: bool) pair.", key=key)
    return items


def _holds(text: str, value: str) -> bool:
    """``value`` in ``text``, byte-exactly: anywhere from 8 characters, as a whole token below
    (the redactor's rule, a short secret is refused from disk too)."""
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
