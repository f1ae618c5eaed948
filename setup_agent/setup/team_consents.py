"""One pending consent per request and asker on a team's gateway.

Behind a round-robin balancer an agent's retry of a test or install reaches another replica
before the user has answered the consent the first one opened. Without this, that replica opens
a second consent for the same action: two boxes, two list entries. On PostgreSQL
(:func:`~setup_agent.setup.shared_consents.share_consents` with ``remembered``) a
:class:`TeamConsents` keeps it one:

- **Waiting on another replica's consent.** :meth:`TeamConsents.adopt` is the
  :class:`~setup_agent.setup.consent.ConsentBroker`'s ``adopt`` hook: before opening a consent it
  looks in ``mcp_pending`` for one still waiting with the same fingerprint (what runs and where the
  secrets go) and the same asker (the SHA-256 of the principal that called, set around the consent
  step with :func:`consent_requester`; never the principal itself). If one is found, this replica
  waits on it under *its* id and publishes nothing: the person sees one consent, on every replica's
  page and in ``mcp-setup approve``. Only tests and installs are shared (a tool review is each
  replica's own); another request, or the same one from another asker, gets its own consent.
- **An answer reaches every replica.** A consent answered on a replica (owned or waited on) writes
  the answer into its row (one conditional ``UPDATE``: the first answer wins), with the approved
  settings and sandbox choice; the row is then kept, listed nowhere, until its deadline, so every
  replica waiting on it applies the answer (at once through ``LISTEN/NOTIFY``, else on the next
  half-second look). An answer given elsewhere (``answer_shared``) is applied the same way.
- **Its owner gone.** A consent whose owner is known to be gone (a process of this host that no
  longer runs) is taken over by the replica that finds it (one conditional ``UPDATE`` of its owner:
  one replica wins); the id stays, so a link or a box already shown still answers it. An owner on
  another host cannot be told apart from a live one: its consent is waited on, and stays answerable
  from any replica's page or terminal (the answer is in its row and remembered by fingerprint).
- It expires with its row: a replica waiting on it counts its age from when it was published.

Two replicas opening the same consent in the same instant may still both publish one; a retry
comes after the first call was answered ``consent_required``, so it finds the first one.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from setup_agent.errors import ConsentDenied, ConsentNotFound, InvalidInput, SetupError
from setup_agent.store import PendingApproval, PendingApprovals, owner_alive

from .consent import ConsentBroker, ConsentDecision
from .consent_request import ConsentRequest
from .shared_items import Published

__all__ = ["TeamConsents", "apply_answer", "consent_requester", "requester_digest"]

log = logging.getLogger(__name__)

#: Who asks for the consent being opened (a principal's label), set by the consent step.
_REQUESTER: ContextVar[str | None] = ContextVar("mcp_setup_consent_requester", default=None)
#: The actions a retry may reach another replica with; a tool review stays each replica's own.
_SHARED_ACTIONS = ("test", "install")


@contextmanager
def consent_requester(principal: str | None) -> Iterator[None]:
    """The consents opened inside are asked for by ``principal`` (``token:NAME``, a client's label)."""
    token = _REQUESTER.set(principal or None)
    try:
        yield
    finally:
        _REQUESTER.reset(token)


def requester_digest(principal: str) -> str:
    """What a row keeps of the asker: a SHA-256, never the principal."""
    return hashlib.sha256(f"mcp-setup consent requester\0{principal}".encode("utf-8", "surrogatepass")).hexdigest()


def current_requester() -> str | None:
    principal = _REQUESTER.get()
    return requester_digest(principal) if principal else None


def apply_answer(broker: ConsentBroker, item: PendingApproval) -> None:
    """Apply in ``broker`` the answer recorded in ``item``'s row, under the principal that gave it."""
    by = item.answered_by or "user"
    try:
        if item.status == "approved":
            decision = item.decision or {}
            broker.approve(
                item.item_id,
                decision.get("settings") or {},
                accept_warnings=True,
                by=by,
                sandbox=decision.get("sandbox") or None,
                hidden_tools=decision.get("hidden_tools"),
            )
        else:
            broker.deny(item.item_id, "denied elsewhere", by=by)
    except InvalidInput as exc:  # settings the other side should have refused: not approved
        log.warning("an answer given elsewhere was not applied (%s)", exc.code)
        broker.deny(item.item_id, "its answer could not be applied", by=by)
    except (ConsentNotFound, ConsentDenied):
        pass  # answered here meanwhile


class TeamConsents:
    """The consents of one replica that other replicas may wait on, and those it waits on."""

    def __init__(self, broker: ConsentBroker, shared: PendingApprovals, published: Published) -> None:
        self.broker = broker
        self.shared = shared
        self.published = published
        self._lock = threading.Lock()
        self._known: dict[str, str] = {}  # consent id -> fingerprint: published here, or waited on
        self._mirrors: set[str] = set()  # the ids of other replicas' consents waited on here
        self._approved: dict[str, str] = {}  # approved here, its answer still to record: id -> fingerprint

    def published_here(self, consent_id: str, fingerprint: str | None) -> None:
        if fingerprint:
            with self._lock:
                self._known[consent_id] = fingerprint

    def adopt(self, request: ConsentRequest) -> tuple[str, float] | None:
        """The broker's hook: ``(id, age in seconds)`` of another replica's consent to wait on, or None."""
        requester = current_requester()
        if requester is None or request.action not in _SHARED_ACTIONS or not request.fingerprint:
            return None
        try:
            for item in self.shared.waiting_like("consent", request.fingerprint, requester):
                if owner_alive(item.owner):
                    with self._lock:
                        self._known[item.item_id] = request.fingerprint
                        self._mirrors.add(item.item_id)
                    log.info("Consent for %s waits on the one another replica opened", request.server)
                    return item.item_id, item.age_seconds
                if self.shared.take_over(item.item_id, item.owner):  # its replica is gone: this one owns it
                    self.published.own(item.item_id)
                    self.published_here(item.item_id, request.fingerprint)
                    log.info("Consent for %s taken over from a replica that is gone", request.server)
                    return item.item_id, item.age_seconds
        except SetupError as exc:  # the database failing: a consent of this replica's own, as before
            log.warning("could not look for a consent pending on another replica (%s)", exc.code)
        return None

    def done(self, consent_id: str, status: str, by: str | None) -> None:
        """``consent_id`` was closed here: an answer goes into its row (an approval once
        :meth:`approved_here` has its decision); an expired one of this replica's own is dropped."""
        with self._lock:
            fingerprint = self._known.pop(consent_id, None)
            mirror = consent_id in self._mirrors
            self._mirrors.discard(consent_id)
            if fingerprint is not None and status == "approved":
                self._approved[consent_id] = fingerprint
        if fingerprint is None:  # not shared among the replicas: its row goes, as on one machine
            self.published.closed(consent_id)
            return
        self.published.forget(consent_id)
        if status == "denied":
            self._record(consent_id, "denied", by)
        elif status != "approved" and not mirror:
            self.published.close(consent_id)

    def approved_here(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None:
        """An approval of ``request`` was given or applied here: its rows get the decision."""
        with self._lock:
            ids = [cid for cid, fp in self._approved.items() if fp == request.fingerprint]
            for cid in ids:
                del self._approved[cid]
        answer = decision.public()  # with the tools the user unticked
        for cid in ids:
            self._record(cid, "approved", by, answer)

    def pull(self) -> None:
        """Apply the answers of the consents waited on here (recorded in their rows by any replica)."""
        with self._lock:
            ids = list(self._mirrors)
        if not ids:
            return
        for item in self.shared.answers(ids):
            with self._lock:
                self._mirrors.discard(item.item_id)
            apply_answer(self.broker, item)

    def _record(self, consent_id: str, status: str, by: str | None, decision: dict[str, Any] | None = None) -> None:
        try:  # False: answered first elsewhere (that answer is the one applied everywhere)
            self.shared.answer(consent_id, status, by=by or "user", decision=decision)
        except SetupError as exc:
            log.warning("an answer could not be shared with the other replicas (%s)", exc.code)
