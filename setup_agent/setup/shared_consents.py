"""Consents and tool reviews shared through the store, so every process's user channels see them.

A :class:`~setup_agent.setup.consent.ConsentBroker` is built with one
:class:`~setup_agent.setup.consent.ConsentSharing`, chosen once by the runtime:

- :class:`StoreConsents` (every process on one data dir): each consent the broker opens is
  published to the store's :class:`~setup_agent.store.PendingApprovals` (its public JSON:
  templates and non-secret values, no capability), each one it closes is dropped, and before the
  broker reads a decision (and every half second while it waits) the answers given by another
  process (``mcp-setup approve`` in a terminal, another ``serve``'s page) are applied here, under
  the principal that gave them (``user:terminal``, ``token:NAME``).
- :class:`SharedDecisions` (a team's remembered approvals): approvals are kept in the team's
  database (:class:`~setup_agent.store.SharedApprovals`), so any replica uses them without asking
  again.
- :class:`TeamConsents` (a team's replicas on PostgreSQL): both of the above, and one pending
  consent per request and asker among the replicas:

  - **Waiting on another replica's consent.** Behind a round-robin balancer an agent's retry of a
    test or install reaches another replica before the user has answered the consent the first
    one opened. Before opening a consent the broker asks :meth:`TeamConsents.adopt`: it looks in
    ``mcp_pending`` for one still waiting with the same fingerprint (what runs and where the
    secrets go) and the same asker (the SHA-256 of the principal that called, set around the
    consent step with :func:`consent_requester`; never the principal itself). If one is found,
    this replica waits on it under *its* id and publishes nothing: the person sees one consent, on
    every replica's page and in ``mcp-setup approve``. Only tests and installs are shared (a tool
    review is each replica's own); another request, or the same one from another asker, gets its
    own consent.
  - **An answer reaches every replica.** A consent answered on a replica (owned or waited on)
    writes the answer into its row (one conditional ``UPDATE``: the first answer wins), with the
    approved settings and sandbox choice; the row is then kept, listed nowhere, until its
    deadline, so every replica waiting on it applies the answer (at once through
    ``LISTEN/NOTIFY``, else on the next half-second look). An answer given elsewhere
    (:func:`answer_shared`) is applied the same way.
  - **Its owner gone.** A consent whose owner is known to be gone (a process of this host that no
    longer runs) is taken over by the replica that finds it (one conditional ``UPDATE`` of its
    owner: one replica wins); the id stays, so a link or a box already shown still answers it. An
    owner on another host cannot be told apart from a live one: its consent is waited on, and
    stays answerable from any replica's page or terminal (the answer is in its row and remembered
    by fingerprint).
  - It expires with its row: a replica waiting on it counts its age from when it was published.

  Two replicas opening the same consent in the same instant may still both publish one; a retry
  comes after the first call was answered ``consent_required``, so it finds the first one.

:func:`answer_shared` is the other side: a user channel answering an item it did not open.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from setup_agent.errors import ConsentDenied, ConsentNotFound, InvalidInput, SetupError
from setup_agent.store import PendingApproval, PendingApprovals, SharedApprovals, owner_alive

from .consent import ConsentBroker, ConsentDecision, Event
from .consent_choices import validated_choices
from .consent_decision import validated_hidden_tools, validated_settings
from .consent_request import ConsentRequest
from .sandbox_choice import validated_sandbox_choice
from .shared_items import Published

__all__ = [
    "SharedDecisions",
    "StoreConsents",
    "TeamConsents",
    "answer_shared",
    "apply_answer",
    "consent_requester",
    "requester_digest",
]

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
                choices=decision.get("choices"),
            )
        else:
            broker.deny(item.item_id, "denied elsewhere", by=by)
    except InvalidInput as exc:  # settings the other side should have refused: not approved
        log.warning("an answer given elsewhere was not applied (%s)", exc.code)
        broker.deny(item.item_id, "its answer could not be applied", by=by)
    except (ConsentNotFound, ConsentDenied):
        pass  # answered here meanwhile


class StoreConsents:
    """A broker's consents published to the store's shared list, answered by any process on it."""

    polls = True

    def __init__(self, shared: PendingApprovals, *, ttl_seconds: float) -> None:
        self.published = Published(shared, ttl_seconds=ttl_seconds)

    def event(self, broker: ConsentBroker, event: Event) -> None:
        cid = str(event.get("consent_id"))
        if event.get("type") == "consent_request" and isinstance(event.get("consent"), dict):
            self.published.publish(cid, "consent", event["consent"], fingerprint=_fingerprint(broker, cid))
        elif event.get("type") == "consent_done":
            self.published.closed(cid)

    def pull(self, broker: ConsentBroker) -> None:
        for item in self.published.answered():
            apply_answer(broker, item)

    def adopt(self, request: ConsentRequest) -> tuple[str, float] | None:
        return None  # one process's consents: none of another's is waited on

    def recall(self, request: ConsentRequest) -> ConsentDecision | None:
        return None

    def remember(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None:
        pass

    def forget(self, server: str) -> None:
        pass


def _fingerprint(broker: ConsentBroker, consent_id: str) -> str | None:
    try:
        return broker.get(consent_id).request.fingerprint
    except (ConsentNotFound, ConsentDenied):
        return None


class TeamConsents:
    """The consents of one replica that other replicas may wait on, those it waits on, and the
    approvals remembered in the team's database (see the module doc)."""

    polls = True

    def __init__(self, shared: PendingApprovals, remembered: SharedApprovals, *, ttl_seconds: float) -> None:
        self.shared = shared
        self.published = Published(shared, ttl_seconds=ttl_seconds, keep_answered=True)
        self.decisions = SharedDecisions(remembered, ttl_seconds=ttl_seconds, answered=self.approved_here)
        self._lock = threading.Lock()
        self._known: dict[str, str] = {}  # consent id -> fingerprint: published here, or waited on
        self._mirrors: set[str] = set()  # the ids of other replicas' consents waited on here
        self._approved: dict[str, str] = {}  # approved here, its answer still to record: id -> fingerprint

    def event(self, broker: ConsentBroker, event: Event) -> None:
        cid = str(event.get("consent_id"))
        if event.get("type") == "consent_request" and isinstance(event.get("consent"), dict):
            fingerprint = _fingerprint(broker, cid)
            requester = current_requester()  # the opener's context: its caller
            if self.published.publish(cid, "consent", event["consent"], fingerprint=fingerprint, requester=requester):
                self.published_here(cid, fingerprint)
        elif event.get("type") == "consent_done":
            self.done(cid, str(event.get("status")), event.get("by"))

    def recall(self, request: ConsentRequest) -> ConsentDecision | None:
        return self.decisions.recall(request)

    def remember(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None:
        self.decisions.remember(request, decision, by)

    def forget(self, server: str) -> None:
        self.decisions.forget(server)

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

    def pull(self, broker: ConsentBroker) -> None:
        """Apply in ``broker`` the answers given elsewhere: to the consents published here, and to
        those waited on here (recorded in their rows by any replica)."""
        for item in self.published.answered():
            apply_answer(broker, item)
        with self._lock:
            ids = list(self._mirrors)
        if not ids:
            return
        for item in self.shared.answers(ids):
            with self._lock:
                self._mirrors.discard(item.item_id)
            apply_answer(broker, item)

    def _record(self, consent_id: str, status: str, by: str | None, decision: dict[str, Any] | None = None) -> None:
        try:  # False: answered first elsewhere (that answer is the one applied everywhere)
            self.shared.answer(consent_id, status, by=by or "user", decision=decision)
        except SetupError as exc:
            log.warning("an answer could not be shared with the other replicas (%s)", exc.code)


def answer_shared(
    shared: PendingApprovals,
    item_id: str,
    *,
    approve: bool,
    by: str,
    settings: dict[str, str] | None = None,
    accept_warnings: bool = False,
    sandbox: dict[str, Any] | None = None,
    hidden_tools: Any = None,
    choices: Any = None,
    remembered: SharedApprovals | None = None,
    ttl_seconds: float = 900.0,
) -> bool:
    """Answer a shared item from a user channel of another process; False when it is no longer open.

    An approval is checked as the owner will check it (destination settings, warnings accepted)
    and raises :class:`InvalidInput` when it would be refused. With ``remembered`` (a team's
    database) it is remembered there too: any replica uses it, even once the owner is gone."""
    item = shared.get(item_id)
    if item is None or item.status != "pending":
        return False
    if not approve:
        return shared.answer(item_id, "denied", by=by)
    request = ConsentRequest.from_public(item.request)
    chosen = validated_settings(request, settings or {})
    if request.warnings and accept_warnings is not True:
        raise InvalidInput("Accept the warnings explicitly to approve, or deny.")
    widening = validated_sandbox_choice(request.widenable, sandbox, request.only_these, request.home_files)
    picked = validated_choices(request, choices)
    decision = ConsentDecision(chosen, widening, validated_hidden_tools(request, hidden_tools), picked).public()
    if not shared.answer(item_id, "approved", by=by, decision=decision):
        return False
    if remembered is not None and item.fingerprint:
        try:
            remembered.remember(item.fingerprint, request.server, decision, by=by, ttl_seconds=ttl_seconds)
        except SetupError as exc:  # the owner still applies the answer
            log.warning("an approval could not be shared (%s)", exc.code)
    return True


class SharedDecisions:
    """A broker's approvals remembered in a team's database, nothing else shared (a
    :class:`~setup_agent.setup.consent.ConsentSharing`; :class:`TeamConsents` holds one).
    The store failing is logged and never breaks a consent: it is then asked here again."""

    polls = False

    def __init__(
        self,
        remembered: SharedApprovals,
        *,
        ttl_seconds: float,
        answered: Callable[[ConsentRequest, ConsentDecision, str | None], None] | None = None,
    ) -> None:
        self.remembered = remembered
        self.ttl_seconds = ttl_seconds
        self.answered = answered  # also told of each approval (TeamConsents records it in its rows)

    def event(self, broker: ConsentBroker, event: Event) -> None:
        pass

    def pull(self, broker: ConsentBroker) -> None:
        pass

    def adopt(self, request: ConsentRequest) -> tuple[str, float] | None:
        return None

    def recall(self, request: ConsentRequest) -> ConsentDecision | None:
        try:
            found = self.remembered.decision(request.fingerprint)
            if found is None:
                return None
            sandbox = validated_sandbox_choice(
                request.widenable, found.get("sandbox") or None, request.only_these, request.home_files
            )
            hidden = validated_hidden_tools(request, found.get("hidden_tools"))
            picked = validated_choices(request, found.get("choices"))
            return ConsentDecision(validated_settings(request, found.get("settings") or {}), sandbox, hidden, picked)
        except (SetupError, InvalidInput) as exc:
            log.warning("a shared approval could not be read (%s)", exc.code)
            return None

    def remember(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None:
        try:
            self.remembered.remember(
                request.fingerprint, request.server, decision.public(), by=by, ttl_seconds=self.ttl_seconds
            )
        except SetupError as exc:
            log.warning("an approval could not be shared (%s)", exc.code)
        if self.answered is not None:
            self.answered(request, decision, by)

    def forget(self, server: str) -> None:
        try:
            self.remembered.forget(server)
        except SetupError as exc:
            log.warning("shared approvals could not be forgotten (%s)", exc.code)
