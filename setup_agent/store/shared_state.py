"""A team's setup state in its PostgreSQL database, so any ``serve`` replica serves any step.

Three repositories over the tables of ``shared_rows.py``, each a seam the core's in-memory parts
take as a constructor argument (none is used on SQLite, where refs stay in one process's memory):

- :class:`SharedRefs` for :class:`~setup_agent.secrets.SharedRefStore`: a ref is kept as its
  SHA-256 with its key, the prompt that reserved it, the value encrypted with the data key and its
  deadline; one install claims it with one conditional ``UPDATE … WHERE claimed_by IS NULL``
  (``RETURNING`` the rows it took), so two replicas never use one ref twice;
- :class:`SharedCapabilities` for :class:`~setup_agent.secrets.Capabilities`: a link key's
  SHA-256, its item and action; spending it is one conditional ``UPDATE``;
- :class:`SharedApprovals` for the consent broker: approvals remembered by request fingerprint;
- :class:`SharedGuardCounts` for :class:`~setup_agent.secrets.GuessGuard`: refused calls counted per
  principal by one ``INSERT … ON CONFLICT DO UPDATE … RETURNING``, so guesses spread over the
  replicas add up.

Expired rows are removed by whichever replica writes next. The clock is the store's (an argument).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import sessionmaker

from setup_agent.secrets import SecretValue, Vault

from .database import Store
from .engine import translated
from .models import Clock, utcnow
from .shared_rows import ApprovalRow, CapabilityRow, GuardCountRow, SecretRefRow

__all__ = ["SharedApprovals", "SharedCapabilities", "SharedGuardCounts", "SharedRefs", "ref_digest"]

#: Rows past their deadline are kept this long (a late reader is told "expired", not "unknown").
_GRACE = timedelta(hours=1)


def ref_digest(ref: str) -> str:
    return hashlib.sha256(ref.encode("utf-8", "surrogatepass")).hexdigest()


class _Taken(Exception):
    pass


class _Repo:
    def __init__(self, store: Store, *, clock: Clock = utcnow) -> None:
        self._sessions = sessionmaker(store.database.engine, expire_on_commit=False)
        self._clock = clock
        self._dialect = store.database.engine.dialect.name


class SharedRefs(_Repo):
    """``mcp_secret_refs``: refs every replica can resolve, claim and consume."""

    def __init__(self, store: Store, vault: Vault, *, clock: Clock = utcnow) -> None:
        super().__init__(store, clock=clock)
        self._vault = vault

    def put(
        self, ref: str, key_name: str, value: SecretValue | None, *, ttl_seconds: float, prompt_id: str | None = None
    ) -> None:
        now = self._clock()
        row = SecretRefRow(
            ref_hash=ref_digest(ref),
            key_name=key_name,
            prompt_id=prompt_id,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds),
            value_encrypted=self._vault.encrypt(value.reveal()) if value is not None else None,
        )
        with translated("record a secret ref"), self._sessions() as s, s.begin():
            s.execute(delete(SecretRefRow).where(SecretRefRow.expires_at <= now - _GRACE))  # any replica sweeps
            s.add(row)

    def fill(self, ref: str, value: SecretValue, *, ttl_seconds: float) -> bool:
        """Give a reserved ref its value (once: never over a value or a consumed ref)."""
        return self._fill(SecretRefRow.ref_hash == ref_digest(ref), value, ttl_seconds)

    def fill_prompt(self, prompt_id: str, value: SecretValue, *, ttl_seconds: float) -> bool:
        """Answer the prompt ``prompt_id`` (opened on any replica): its ref gets the value."""
        return self._fill(SecretRefRow.prompt_id == prompt_id, value, ttl_seconds)

    def _fill(self, where: Any, value: SecretValue, ttl_seconds: float) -> bool:
        now = self._clock()
        query = (
            update(SecretRefRow)
            .where(where, SecretRefRow.value_encrypted.is_(None), SecretRefRow.expires_at > now)
            .values(
                value_encrypted=self._vault.encrypt(value.reveal()), expires_at=now + timedelta(seconds=ttl_seconds)
            )
        )
        with translated("answer a secret ref"), self._sessions() as s, s.begin():
            return bool(s.execute(query).rowcount)

    def get(self, ref: str) -> tuple[str, SecretValue | None, bool, str | None] | None:
        """``(key_name, value or None while pending, expired, claimed_by)``, or None when unknown."""
        with translated("read a secret ref"), self._sessions() as s:
            row = s.get(SecretRefRow, ref_digest(ref))
            if row is None:
                return None
            value = self._vault.decrypt(row.value_encrypted) if row.value_encrypted is not None else None
            return row.key_name, value, row.expires_at <= self._clock(), row.claimed_by

    def claim(self, refs: Iterable[str], claim_id: str) -> bool:
        """Claim every ref in ``refs`` for one install, or none of them (one was claimed already)."""
        digests = sorted({ref_digest(r) for r in refs})
        if not digests:
            return True
        query = (
            update(SecretRefRow)
            .where(SecretRefRow.ref_hash.in_(digests), SecretRefRow.claimed_by.is_(None))
            .values(claimed_by=claim_id)
            .returning(SecretRefRow.ref_hash)
        )
        try:
            with translated("claim secret refs"), self._sessions() as s, s.begin():
                taken = set(s.scalars(query).all())
                known = set(s.scalars(select(SecretRefRow.ref_hash).where(SecretRefRow.ref_hash.in_(digests))).all())
                if taken != known:  # another install holds one of them: this transaction takes none
                    raise _Taken
        except _Taken:
            return False
        return True

    def release(self, claim_id: str) -> None:
        with translated("release secret refs"), self._sessions() as s, s.begin():
            s.execute(update(SecretRefRow).where(SecretRefRow.claimed_by == claim_id).values(claimed_by=None))

    def delete(self, refs: Iterable[str]) -> None:
        digests = [ref_digest(r) for r in refs]
        if digests:
            with translated("consume secret refs"), self._sessions() as s, s.begin():
                s.execute(delete(SecretRefRow).where(SecretRefRow.ref_hash.in_(digests)))


class SharedCapabilities(_Repo):
    """``mcp_capabilities``: link keys (their SHA-256 only) any replica can check and spend."""

    def put(self, digest: str, item_id: str, action: str, *, ttl_seconds: float) -> None:
        now = self._clock()
        row = CapabilityRow(
            digest=digest,
            item_id=item_id[:128],
            action=action,
            expires_at=now + timedelta(seconds=ttl_seconds),
            spent=False,
        )
        with translated("record a link key"), self._sessions() as s, s.begin():
            s.execute(delete(CapabilityRow).where(CapabilityRow.expires_at <= now - _GRACE))
            s.add(row)

    def get(self, digest: str) -> tuple[str, str, bool, bool] | None:
        """``(item_id, action, spent, expired)`` or None."""
        with translated("read a link key"), self._sessions() as s:
            row = s.get(CapabilityRow, digest)
            return None if row is None else (row.item_id, row.action, row.spent, row.expires_at <= self._clock())

    def spend(self, digest: str) -> bool:
        """Spend the key (once, on any replica); False when it was spent or expired."""
        query = (
            update(CapabilityRow)
            .where(
                CapabilityRow.digest == digest, CapabilityRow.spent.is_(False), CapabilityRow.expires_at > self._clock()
            )
            .values(spent=True)
        )
        with translated("spend a link key"), self._sessions() as s, s.begin():
            return bool(s.execute(query).rowcount)

    def revoke_item(self, item_id: str) -> None:
        with translated("revoke link keys"), self._sessions() as s, s.begin():
            s.execute(update(CapabilityRow).where(CapabilityRow.item_id == item_id).values(spent=True))


class SharedApprovals(_Repo):
    """``mcp_consent_approvals``: the user's approvals, remembered by fingerprint for every replica."""

    def remember(
        self, fingerprint: str, server: str, decision: dict[str, Any], *, by: str | None, ttl_seconds: float
    ) -> None:
        now = self._clock()
        row = ApprovalRow(
            fingerprint=fingerprint,
            server=server[:256],
            decision_json=json.dumps(decision, sort_keys=True),
            approved_by=(by or "")[:128] or None,
            expires_at=now + timedelta(seconds=ttl_seconds),
        )
        with translated("remember an approval"), self._sessions() as s, s.begin():
            s.execute(delete(ApprovalRow).where(ApprovalRow.expires_at <= now))
            s.merge(row)

    def decision(self, fingerprint: str) -> dict[str, Any] | None:
        with translated("read a remembered approval"), self._sessions() as s:
            row = s.get(ApprovalRow, fingerprint)
            if row is None or row.expires_at <= self._clock():
                return None
            return json.loads(row.decision_json)

    def forget(self, server: str) -> None:
        with translated("forget approvals"), self._sessions() as s, s.begin():
            s.execute(delete(ApprovalRow).where(ApprovalRow.server == server[:256]))


class SharedGuardCounts(_Repo):
    """``mcp_guard_counts``: the guard's refused calls and locks, kept in the database: added up
    over every replica of a team (PostgreSQL), and over every session of a client on one machine
    (SQLite), so neither a restart nor a new session gives a client its allowance back."""

    def add(self, principal: str, *, limit: int) -> tuple[int, bool]:
        """One more refused call of ``principal``: ``(refusals, locked)`` after it."""
        if self._dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert

        now = self._clock()
        query = (
            insert(GuardCountRow)
            .values(principal=principal[:256], refusals=1, locked=limit <= 1, updated_at=now)
            .on_conflict_do_update(
                index_elements=[GuardCountRow.principal],
                set_={
                    "refusals": GuardCountRow.refusals + 1,
                    "updated_at": now,
                    "locked": GuardCountRow.locked | (GuardCountRow.refusals + 1 >= limit),
                },
            )
            .returning(GuardCountRow.refusals, GuardCountRow.locked)
        )
        with translated("count a refused call"), self._sessions() as s, s.begin():
            refusals, locked = s.execute(query).one()
            return int(refusals), bool(locked)

    def get(self, principal: str) -> tuple[int, bool] | None:
        with translated("read the refused calls"), self._sessions() as s:
            row = s.get(GuardCountRow, principal[:256])
            return None if row is None else (row.refusals, row.locked)

    def clear(self, principal: str) -> None:
        with translated("unblock a principal"), self._sessions() as s, s.begin():
            s.execute(delete(GuardCountRow).where(GuardCountRow.principal == principal[:256]))
