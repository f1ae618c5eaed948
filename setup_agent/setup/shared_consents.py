"""Consents and tool reviews shared through the store, so every process's user channels see them.

:func:`share_consents` ties a process's :class:`~setup_agent.setup.consent.ConsentBroker` to the
store's :class:`~setup_agent.store.PendingApprovals`: each consent it opens is published (its
public JSON: templates and non-secret values, no capability), each one it closes is dropped, and
before the broker reads a decision (and every half second while it waits) the answers given by
another process — ``mcp-setup approve`` in a terminal, another ``serve``'s page — are applied
here, under the principal that gave them (``user:terminal``, ``token:NAME``).

:func:`answer_shared` is that other side: a user channel answering an item it did not open.
"""

from __future__ import annotations

import logging
from typing import Any

from setup_agent.errors import ConsentDenied, ConsentNotFound, InvalidInput
from setup_agent.store import PendingApprovals

from .consent import ConsentBroker, validated_settings
from .consent_request import ConsentRequest
from .shared_items import Published

__all__ = ["answer_shared", "share_consents"]

log = logging.getLogger(__name__)


def share_consents(broker: ConsentBroker, shared: PendingApprovals, *, ttl_seconds: float) -> None:
    """Publish ``broker``'s consents to ``shared`` and apply the answers given elsewhere."""
    published = Published(shared, ttl_seconds=ttl_seconds)

    def on_event(event: dict[str, Any]) -> None:
        cid = str(event.get("consent_id"))
        if event.get("type") == "consent_request" and isinstance(event.get("consent"), dict):
            published.publish(cid, "consent", event["consent"])
        elif event.get("type") == "consent_done":
            published.closed(cid)

    def pull() -> None:
        for item in published.answered():
            by = item.answered_by or "user"
            try:
                if item.status == "approved":
                    settings = (item.decision or {}).get("settings") or {}
                    broker.approve(item.item_id, settings, accept_warnings=True, by=by)
                else:
                    broker.deny(item.item_id, "denied elsewhere", by=by)
            except InvalidInput as exc:  # settings the other side should have refused: not approved
                log.warning("an answer given elsewhere was not applied (%s)", exc.code)
                broker.deny(item.item_id, "its answer could not be applied", by=by)
            except (ConsentNotFound, ConsentDenied):
                pass  # answered here meanwhile

    broker.subscribe(on_event)
    broker.add_pull(pull)


def answer_shared(
    shared: PendingApprovals,
    item_id: str,
    *,
    approve: bool,
    by: str,
    settings: dict[str, str] | None = None,
    accept_warnings: bool = False,
) -> bool:
    """Answer a shared item from a user channel of another process; False when it is no longer open.

    An approval is checked as the owner will check it (destination settings, warnings accepted)
    and raises :class:`InvalidInput` when it would be refused."""
    item = shared.get(item_id)
    if item is None or item.status != "pending":
        return False
    if not approve:
        return shared.answer(item_id, "denied", by=by)
    request = ConsentRequest.from_public(item.request)
    chosen = validated_settings(request, settings or {})
    if request.warnings and accept_warnings is not True:
        raise InvalidInput("Accept the warnings explicitly to approve, or deny.")
    return shared.answer(item_id, "approved", by=by, decision={"settings": chosen})
