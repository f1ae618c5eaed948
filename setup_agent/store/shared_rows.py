"""The tables of a team's shared setup state (migration ``0008_shared_state``).

Used only on PostgreSQL, where several ``serve`` replicas share one database (on SQLite the tables
exist but stay empty: refs live in one process's memory, as before):

- ``mcp_secret_refs``: a secret ref (only its SHA-256), the key it is bound to, the prompt that
  reserved it, the value encrypted with the data key (NULL until answered), its deadline, and the
  install claiming it (``claimed_by``, set by one conditional ``UPDATE``);
- ``mcp_capabilities``: a link key's SHA-256, the item and action it opens, its deadline, spent;
- ``mcp_consent_approvals``: an approval remembered for the ref TTL (the request's fingerprint, the
  server, the user's destination settings and sandbox widening: no secret values);
- ``mcp_guard_counts``: the guessing guard's refused calls per principal and its lock (a label and
  counts, never what was sent);
- ``mcp_sign_ins`` (migration ``0012_shared_sign_ins``): an OAuth sign-in in progress, its state's
  SHA-256, the replica waiting, the redirect's answer (code, or error) encrypted with the data key;
  since ``0013_sign_in_exchange`` also what the token exchange needs (``exchange_encrypted``), so
  the replica receiving the redirect finishes the sign-in.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from . import schema
from .models import Base, UTCDateTime

__all__ = ["ApprovalRow", "CapabilityRow", "GuardCountRow", "SecretRefRow", "SignInRow"]


class SecretRefRow(Base):
    __tablename__ = schema.SECRET_REFS.name

    ref_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_name: Mapped[str] = mapped_column(String(128))
    prompt_id: Mapped[str | None] = mapped_column(String(64), index=True)
    value_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    claimed_by: Mapped[str | None] = mapped_column(String(64))


class CapabilityRow(Base):
    __tablename__ = schema.CAPABILITIES.name

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    item_id: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(16))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    spent: Mapped[bool] = mapped_column(default=False)


class ApprovalRow(Base):
    __tablename__ = schema.CONSENT_APPROVALS.name

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    server: Mapped[str] = mapped_column(String(256), index=True)
    decision_json: Mapped[str] = mapped_column(Text)
    approved_by: Mapped[str | None] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class GuardCountRow(Base):
    __tablename__ = schema.GUARD_COUNTS.name

    principal: Mapped[str] = mapped_column(String(256), primary_key=True)
    refusals: Mapped[int] = mapped_column(Integer)
    locked: Mapped[bool] = mapped_column(default=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class SignInRow(Base):
    """An OAuth sign-in in progress: its ``state`` (SHA-256 only), the replica waiting for it,
    and the authorization response once it arrived on any replica (encrypted with the data key)."""

    __tablename__ = schema.SIGN_INS.name

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))
    answer_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    exchange_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary)
