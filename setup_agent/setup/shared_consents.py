"""Consents and tool reviews shared through the store, so every process's user channels see them.

:func:`share_consents` ties a process's :class:`~setup_agent.setup.consent.ConsentBroker` to the
store's :class:`~setup_agent.store.PendingApprovals`: each consent it opens is published (its
public JSON: templates and non-secret values, no capability), each one it closes is dropped, and
before the broker reads a decision (and every half second while it waits) the answers given by
another process — ``mcp-setup approve`` in a terminal, another ``serve``'s page — are applied
here, under the principal that gave them (``user:terminal``, ``token:NAME``).

:func:`answer_shared` is that other side: a user channel answering an item it did not open.

On a team's PostgreSQL (``remembered``: its :class:`~setup_agent.store.SharedApprovals`) the
approvals are remembered there too, and a test or install retried on another replica waits on the
consent already pending instead of opening a second one (``team_consents.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from setup_agent.errors import ConsentDenied, ConsentNotFound, InvalidInput, SetupError
from setup_agent.store import PendingApprovals, SharedApprovals

from .consent import ConsentBroker
from .consent_decision import ConsentDecision, validated_hidden_tools, validated_settings
from .consent_request import ConsentRequest
from .sandbox_choice import validated_sandbox_choice
from .shared_items import Published
from .team_consents import TeamConsents, apply_answer, current_requester

__all__ = ["SharedDecisions", "answer_shared", "share_consents"]

log = logging.getLogger(__name__)


def share_consents(
    broker: ConsentBroker, shared: PendingApprovals, *, ttl_seconds: float, remembered: SharedApprovals | None = None
) -> TeamConsents | None:
    """Publish ``broker``'s consents to ``shared`` and apply the answers given elsewhere; with
    ``remembered`` (a team's database) share the approvals and the pending consents among replicas."""
    published = Published(shared, ttl_seconds=ttl_seconds, keep_answered=remembered is not None)
    team = TeamConsents(broker, shared, published) if remembered is not None else None

    def on_event(event: dict[str, Any]) -> None:
        cid = str(event.get("consent_id"))
        if event.get("type") == "consent_request" and isinstance(event.get("consent"), dict):
            try:
                fingerprint: str | None = broker.get(cid).request.fingerprint
            except (ConsentNotFound, ConsentDenied):
                fingerprint = None
            requester = current_requester() if team is not None else None  # the opener's context: its caller
            if published.publish(cid, "consent", event["consent"], fingerprint=fingerprint, requester=requester):
                if team is not None:
                    team.published_here(cid, fingerprint)
        elif event.get("type") == "consent_done":
            if team is not None:
                team.done(cid, str(event.get("status")), event.get("by"))
            else:
                published.closed(cid)

    def pull() -> None:
        for item in published.answered():
            apply_answer(broker, item)
        if team is not None:
            team.pull()

    broker.subscribe(on_event)
    broker.add_pull(pull)
    if team is not None and remembered is not None:
        broker.share_decisions(SharedDecisions(remembered, ttl_seconds=ttl_seconds, answered=team.approved_here))
        broker.adopt = team.adopt
    return team


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
    widening = validated_sandbox_choice(request.widenable, sandbox, request.only_these)
    decision = ConsentDecision(chosen, widening, validated_hidden_tools(request, hidden_tools)).public()
    if not shared.answer(item_id, "approved", by=by, decision=decision):
        return False
    if remembered is not None and item.fingerprint:
        try:
            remembered.remember(item.fingerprint, request.server, decision, by=by, ttl_seconds=ttl_seconds)
        except SetupError as exc:  # the owner still applies the answer
            log.warning("an approval could not be shared (%s)", exc.code)
    return True


class SharedDecisions:
    """A :class:`ConsentBroker`'s remembered approvals in a team's database (``broker.share_decisions``).
    The store failing is logged and never breaks a consent: it is then asked here again."""

    def __init__(
        self,
        remembered: SharedApprovals,
        *,
        ttl_seconds: float,
        answered: Callable[[ConsentRequest, ConsentDecision, str | None], None] | None = None,
    ) -> None:
        self.remembered = remembered
        self.ttl_seconds = ttl_seconds
        self.answered = answered  # also told of each approval (team_consents.py records it in its rows)

    def recall(self, request: ConsentRequest) -> ConsentDecision | None:
        try:
            found = self.remembered.decision(request.fingerprint)
            if found is None:
                return None
            sandbox = validated_sandbox_choice(request.widenable, found.get("sandbox") or None, request.only_these)
            hidden = validated_hidden_tools(request, found.get("hidden_tools"))
            return ConsentDecision(validated_settings(request, found.get("settings") or {}), sandbox, hidden)
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
