"""The store's tables (SQLAlchemy models) and the records it hands out (no values in them).

``ServerRow``, ``ClientEnvRow``, ``ChangeRow``, ``AuditRow``, ``TokenRow`` and ``PendingRow`` map the tables the
migrations in ``migrations/`` create; :class:`InstalledServer`, :class:`EnvKey` and
:class:`AuditEntry` are what :class:`~setup_agent.store.database.Store` returns. Also the small
row helpers the store's parts share (UTC datetimes, tool-list JSON, text checks).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from setup_agent.errors import InvalidInput

from . import schema
from .catalog import parse_tools
from .records import AuditEntry, EnvKey, InstalledServer
from .sampling import sampling_of

__all__ = [
    "AuditEntry",
    "AuditKeyRow",
    "AuditRow",
    "Base",
    "ChangeRow",
    "ClientEnvRow",
    "Clock",
    "EnvKey",
    "ExtrasRow",
    "InstalledServer",
    "MemberValueRow",
    "PendingRow",
    "PreferenceRow",
    "ServerRow",
    "TokenRow",
    "ToolUseRow",
    "UTCDateTime",
    "utcnow",
]

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A model declares exactly the columns ``schema.py`` names for its table (the stdlib
        readers build their SQL from there)."""
        super().__init_subclass__(**kwargs)
        declared = tuple(cls.__table__.columns.keys())  # type: ignore[attr-defined]
        expected = schema.TABLES[cls.__tablename__].columns  # type: ignore[attr-defined]
        if set(declared) != set(expected):
            raise TypeError(f"{cls.__name__} declares {declared}; schema.py says {expected}")


class ServerRow(Base):
    __tablename__ = schema.SERVERS.name

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
    # Its OAuth sign-in could not be renewed (connections.py): the user must sign in again.
    needs_sign_in: Mapped[bool | None] = mapped_column(Boolean)
    # Keys every member enters for themselves (JSON list of names; values.py).
    member_keys: Mapped[str | None] = mapped_column(Text)
    # The registry's digest of the artifact installed (setup_agent/launch/digests.py; migration 0010).
    artifact_digest: Mapped[str | None] = mapped_column(String(160))
    # May it ask the person's AI to write text (sampling.py: no | text | tools; NULL: the default).
    sampling: Mapped[str | None] = mapped_column(String(8))

    env: Mapped[list[ClientEnvRow]] = relationship(cascade="all, delete-orphan", passive_deletes=True)


class ChangeRow(Base):
    """One row (id 1) whose counter is bumped with every change other processes must see."""

    __tablename__ = schema.CHANGES.name

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    counter: Mapped[int] = mapped_column(Integer)


class ClientEnvRow(Base):
    __tablename__ = schema.CLIENT_ENV.name
    __table_args__ = (UniqueConstraint("server_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    server_id: Mapped[str] = mapped_column(String(64), ForeignKey(ServerRow.server_id, ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(128))
    value_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    secret: Mapped[bool] = mapped_column(Boolean)


class MemberValueRow(Base):
    """One member's own value of one key of one server, encrypted (see ``values.py``)."""

    __tablename__ = schema.MEMBER_VALUES.name
    __table_args__ = (UniqueConstraint("server_id", "member", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    server_id: Mapped[str] = mapped_column(String(64), ForeignKey(ServerRow.server_id, ondelete="CASCADE"))
    member: Mapped[str] = mapped_column(String(64), index=True)
    key: Mapped[str] = mapped_column(String(128))
    value_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class AuditRow(Base):
    """One audited event; append-only (the migrations forbid UPDATE, DELETE, TRUNCATE and an insert
    over a row) and chained: ``row_hash`` covers the row and ``prev_hash`` (audit.py). No values."""

    __tablename__ = schema.AUDIT.name

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    event: Mapped[str] = mapped_column(String(32))
    server_id: Mapped[str | None] = mapped_column(String(64))
    qualified_name: Mapped[str | None] = mapped_column(String(512))
    actor: Mapped[str] = mapped_column(String(128))
    old_hash: Mapped[str | None] = mapped_column(String(64))
    new_hash: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str | None] = mapped_column(String(512))
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    row_hash: Mapped[str | None] = mapped_column(String(64))


class AuditKeyRow(Base):
    """The audit chain's key (one row, id 1), only as a token of the data key's vault: the key
    and the first row keyed under it, authenticated together (``audit_key.py``)."""

    __tablename__ = schema.AUDIT_KEY.name

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    key_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class TokenRow(Base):
    """A named bearer token of a team gateway: only its SHA-256 is stored (see ``tokens.py``)."""

    __tablename__ = schema.TOKENS.name

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    admin: Mapped[bool | None] = mapped_column(Boolean)  # --admin: may approve (audited as token:NAME)
    kind: Mapped[str | None] = mapped_column(String(16))  # member (NULL) or client: one of the person's AI clients


class PendingRow(Base):
    """A consent or tool review waiting for the user, shared by every process (see ``approvals.py``)."""

    __tablename__ = schema.PENDING.name

    item_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # consent
    owner: Mapped[str] = mapped_column(String(64))  # the process that waits for the answer
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    request_json: Mapped[str] = mapped_column(Text)  # templates and non-secret values only
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending | approved | denied | expired
    decision_json: Mapped[str | None] = mapped_column(Text)
    answered_by: Mapped[str | None] = mapped_column(String(128))
    fingerprint: Mapped[str | None] = mapped_column(String(64))  # a consent's (0008): remembered on any replica
    requester: Mapped[str | None] = mapped_column(String(64))  # a consent's asker, hashed (0014): one per team


class ExtrasRow(Base):
    """What a server offers besides tools, and the tools the user unticked (see ``offers`` in
    ``tool_pins.py``); one row per server, removed with it."""

    __tablename__ = schema.SERVER_EXTRAS.name

    server_id: Mapped[str] = mapped_column(
        String(64), ForeignKey(ServerRow.server_id, ondelete="CASCADE"), primary_key=True
    )
    prompts_json: Mapped[str | None] = mapped_column(Text)  # the exposed (approved) prompts
    pinned_prompts_json: Mapped[str | None] = mapped_column(Text)
    pinned_hash: Mapped[str | None] = mapped_column(String(64))
    live_prompts_json: Mapped[str | None] = mapped_column(Text)
    live_hash: Mapped[str | None] = mapped_column(String(64))
    prompts_state: Mapped[str | None] = mapped_column(String(16))  # pinned | changed
    resources_json: Mapped[str | None] = mapped_column(Text)
    templates_json: Mapped[str | None] = mapped_column(Text)
    hidden_tools_json: Mapped[str | None] = mapped_column(Text)  # tool names the user unticked
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ToolUseRow(Base):
    """When one gateway tool was last called, through any gateway on this store (``usage.py``)."""

    __tablename__ = schema.TOOL_USE.name

    name: Mapped[str] = mapped_column(String(160), primary_key=True)
    used_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class PreferenceRow(Base):
    """One of the person's gateway-wide settings (``preferences.py``)."""

    __tablename__ = schema.PREFERENCES.name

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_by: Mapped[str | None] = mapped_column(String(128))


# --- public records ---------------------------------------------------------------------


_COLUMNS = (
    "server_id",
    "qualified_name",
    "source",
    "version",
    "package_type",
    "enabled",
    "installed_at",
    "installed_by",
    "tools_hash",
    "slug",
    "title",
    "artifact_digest",
)


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
        needs_sign_in=bool(row.needs_sign_in),
        member_keys=tuple(json.loads(row.member_keys)) if row.member_keys else (),
        sampling=sampling_of(row.sampling),
        env_keys=tuple(EnvKey(e.key, e.secret) for e in sorted(row.env, key=lambda e: e.key)),
    )


# --- helpers shared by the store's parts --------------------------------------------------


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _check_text(name: str, value: object, limit: int) -> None:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidInput(f"{name} must be a non-empty string of at most {limit} characters.")


def _tools_json(tools: Sequence[Mapping[str, Any]] | None) -> str | None:
    if tools is None:
        return None
    try:
        return json.dumps([dict(t) for t in tools], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidInput("tools must be a list of JSON objects.") from None
