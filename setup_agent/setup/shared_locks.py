"""The guessing guard's incidents and locks, told to the user on every channel, and unlocked by them.

The agent never legitimately holds a stored secret, so a refused call is already an incident and
the second locks that principal (:class:`~setup_agent.secrets.GuessGuard`). :func:`share_guard`
publishes both to the store's :class:`~setup_agent.store.PendingApprovals` (the principal's
label and the count, never what was sent): ``mcp-setup approve`` lists them in any terminal, and
the user's "unblock" there (an ``approved`` answer to the lock) is applied by the owning process
the next time the locked principal calls. Only the user unblocks: the agent has no channel to it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from setup_agent.secrets import GuessGuard
from setup_agent.store import PendingApprovals

from .shared_items import Published

__all__ = ["LOCK_TTL_SECONDS", "share_guard"]

log = logging.getLogger(__name__)

#: A lock waits this long for the user in the shared list (the lock itself lasts until unblocked).
LOCK_TTL_SECONDS = 30 * 24 * 3600.0


def _item_id(kind: str, owner: str, principal: str) -> str:
    return f"{kind}-" + hashlib.sha256(f"{owner}\0{principal}".encode("utf-8", "surrogatepass")).hexdigest()[:40]


def share_guard(guard: GuessGuard, shared: PendingApprovals) -> tuple[Callable[[str], None], Callable[[str], None]]:
    """Returns ``(on_incident, on_lockout)`` listeners that publish to ``shared``, and makes
    ``guard`` apply the unlocks given elsewhere."""
    published = Published(shared, ttl_seconds=LOCK_TTL_SECONDS)

    def publish(kind: str, principal: str) -> None:
        request: dict[str, Any] = {"principal": principal, "refusals": guard.refusals(principal), "limit": guard.limit}
        published.publish(_item_id(kind, shared.owner, principal), kind, request)

    def pull() -> None:
        for item in published.answered():
            if item.kind == "lock" and item.status == "approved":
                guard.unlock(str(item.request.get("principal")))
                log.warning("guard: %s unblocked by %s", item.request.get("principal"), item.answered_by or "the user")

    guard.add_pull(pull)
    return (lambda principal: publish("incident", principal)), (lambda principal: publish("lock", principal))
