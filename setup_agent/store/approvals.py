"""Approvals waiting for the user, shared by every process on a data dir (or a team's database).

A consent or tool review opened by one process (a stdio face with no browser, say) must reach
the user's channels of every other: ``serve``'s page, ``mcp-setup approve`` in a terminal. Its
owner publishes it here (table ``mcp_pending``, model :class:`~setup_agent.store.models.PendingRow`):
the request as shown — templates and non-secret values only, never a secret value and never a
capability — and its deadline. A secret prompt (kind ``secret``) is published the same way; its
answer is the value encrypted with the data key, held only until its owner picks it up. A user channel of any process answers it with :meth:`answer`
(one conditional ``UPDATE … WHERE status = 'pending'``: the first answer wins); the owner reads the
answers of its own items with :meth:`answers` and applies them, then :meth:`close` drops the row.
On a team's database a consent row also keeps its asker (a SHA-256) and, once answered, stays
(listed nowhere) until its deadline: a replica that got the same request from the same asker
waits on it (:meth:`waiting_like`) or takes over one whose owner is gone (:meth:`take_over`).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import sessionmaker

from .change_feed import PENDING_CHANNEL, notify
from .database import Store
from .engine import translated
from .models import Clock, PendingRow, utcnow

__all__ = ["PendingApproval", "PendingApprovals", "owner_alive", "process_owner"]

#: Final answers: a consent's (approved | denied) and a secret prompt's (answered | cancelled).
_STATUSES = ("approved", "denied", "answered", "cancelled")


def process_owner() -> str:
    """This process, as the owner of what it publishes: ``host:pid``."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether ``owner`` (a :func:`process_owner`) still runs; True when it is on another host."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname()[:40] or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class PendingApproval:
    """One waiting item as a user channel shows it (``request``: the consent's public JSON)."""

    item_id: str
    kind: str
    owner: str
    request: dict[str, Any]
    status: str
    decision: dict[str, Any] | None = None
    answered_by: str | None = None
    fingerprint: str | None = None  # a consent's: an answer elsewhere is remembered under it
    requester: str | None = None  # a consent's asker, hashed: one pending consent per request and asker
    age_seconds: float = 0.0  # since it was published (a replica waiting on it expires it in step)


class PendingApprovals:
    """The ``mcp_pending`` repository over a :class:`Store`'s database; ``owner`` names this process."""

    def __init__(self, store: Store, *, owner: str, clock: Clock = utcnow) -> None:
        self._sessions = sessionmaker(store.database.engine, expire_on_commit=False)
        self.owner = owner[:64]
        self._clock = clock

    def publish(
        self,
        item_id: str,
        kind: str,
        request: dict[str, Any],
        *,
        ttl_seconds: float,
        fingerprint: str | None = None,
        requester: str | None = None,
    ) -> None:
        now = self._clock()
        row = PendingRow(
            item_id=item_id,
            kind=kind,
            owner=self.owner,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds),
            request_json=json.dumps(request, sort_keys=True),
            status="pending",
            fingerprint=fingerprint,
            requester=requester,
        )
        with translated("record a pending approval"), self._sessions() as s, s.begin():
            s.execute(delete(PendingRow).where(PendingRow.expires_at <= now))  # any process sweeps
            s.merge(row)
            notify(s, PENDING_CHANNEL)  # PostgreSQL: other replicas' pages show it at once

    def pending(self) -> list[PendingApproval]:
        """Every item still waiting (not expired), oldest first. A member's prompt for their own key
        (kind ``member_secret``) is never the user's to answer: it is left out."""
        query = (
            select(PendingRow)
            .where(
                PendingRow.status == "pending",
                PendingRow.expires_at > self._clock(),
                PendingRow.kind != "member_secret",
            )
            .order_by(PendingRow.created_at)
        )
        with translated("list the pending approvals"), self._sessions() as s:
            return [_record(r, self._clock()) for r in s.scalars(query).all()]

    def waiting_like(self, kind: str, fingerprint: str, requester: str) -> list[PendingApproval]:
        """The items of another owner still waiting for the same request (``fingerprint``) of the
        same asker (``requester``), oldest first: a team's replica waits on one of them."""
        query = (
            select(PendingRow)
            .where(
                PendingRow.kind == kind,
                PendingRow.fingerprint == fingerprint,
                PendingRow.requester == requester,
                PendingRow.status == "pending",
                PendingRow.expires_at > self._clock(),
                PendingRow.owner != self.owner,
            )
            .order_by(PendingRow.created_at)
        )
        with translated("look for a pending approval"), self._sessions() as s:
            return [_record(r, self._clock()) for r in s.scalars(query).all()]

    def take_over(self, item_id: str, owner: str) -> bool:
        """Become the owner of ``owner``'s item still waiting (its process is gone); False when another
        process took it over first or it was answered meanwhile."""
        query = (
            update(PendingRow)
            .where(PendingRow.item_id == item_id, PendingRow.owner == owner, PendingRow.status == "pending")
            .values(owner=self.owner)
        )
        with translated("take over a pending approval"), self._sessions() as s, s.begin():
            return bool(s.execute(query).rowcount)

    def get(self, item_id: str) -> PendingApproval | None:
        with translated("read a pending approval"), self._sessions() as s:
            row = s.get(PendingRow, item_id)
            return _record(row, self._clock()) if row is not None else None

    def answer(self, item_id: str, status: str, *, by: str, decision: dict[str, Any] | None = None) -> bool:
        """The user's answer from any process; False when it was answered, closed or expired already."""
        if status not in _STATUSES:
            raise ValueError(f"status must be one of {_STATUSES}")
        query = (
            update(PendingRow)
            .where(PendingRow.item_id == item_id, PendingRow.status == "pending", PendingRow.expires_at > self._clock())
            .values(status=status, answered_by=by[:128], decision_json=json.dumps(decision or {}, sort_keys=True))
        )
        with translated("record an answer"), self._sessions() as s, s.begin():
            done = bool(s.execute(query).rowcount)
            if done:
                notify(s, PENDING_CHANNEL)  # the owner applies it at once
            return done

    def answers(self, item_ids: Iterable[str]) -> list[PendingApproval]:
        """The answered items among ``item_ids`` (this owner's), for it to apply."""
        ids = list(item_ids)
        if not ids:
            return []
        query = select(PendingRow).where(PendingRow.item_id.in_(ids), PendingRow.status.in_(_STATUSES))
        with translated("read the answers"), self._sessions() as s:
            return [_record(r, self._clock()) for r in s.scalars(query).all()]

    def close(self, item_id: str) -> None:
        """The owner is done with ``item_id`` (answered, applied, expired): its row goes."""
        with translated("close a pending approval"), self._sessions() as s, s.begin():
            s.execute(delete(PendingRow).where(PendingRow.item_id == item_id))


def _record(row: PendingRow, now: datetime) -> PendingApproval:
    return PendingApproval(
        row.item_id,
        row.kind,
        row.owner,
        json.loads(row.request_json),
        row.status,
        json.loads(row.decision_json) if row.decision_json else None,
        row.answered_by,
        row.fingerprint,
        row.requester,
        max(0.0, (now - row.created_at).total_seconds()),
    )
