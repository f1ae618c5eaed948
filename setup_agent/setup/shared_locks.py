"""The guessing guard's incidents and locks, told to the user on every channel, and unlocked by them.

The agent never legitimately holds a stored secret, so a refused call is already an incident and
the second locks that principal (:class:`~setup_agent.secrets.GuessGuard`). :class:`PublishedLocks`
publishes both to the store's :class:`~setup_agent.store.PendingApprovals` (the principal's
label and the count, never what was sent): ``mcp-setup approve`` lists them in any terminal, and
the user's "unblock" there (an ``approved`` answer to the lock) is applied by the owning process
the next time the locked principal calls. Only the user unblocks: the agent has no channel to it.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from setup_agent.secrets import GuessGuard
from setup_agent.store import PendingApprovals

from .shared_items import Published

__all__ = ["LOCK_TTL_SECONDS", "PublishedLocks"]

log = logging.getLogger(__name__)

#: A lock waits this long for the user in the shared list (the lock itself lasts until unblocked).
LOCK_TTL_SECONDS = 30 * 24 * 3600.0


def _item_id(kind: str, owner: str, principal: str) -> str:
    return f"{kind}-" + hashlib.sha256(f"{owner}\0{principal}".encode("utf-8", "surrogatepass")).hexdigest()[:40]


class PublishedLocks:
    """``incident(principal)`` and ``lockout(principal)`` publish to ``shared`` (the guard's
    listeners); ``guard`` applies the unlocks given elsewhere (pulled before a locked principal
    is refused)."""

    def __init__(self, guard: GuessGuard, shared: PendingApprovals) -> None:
        self.guard = guard
        self.shared = shared
        self.published = Published(shared, ttl_seconds=LOCK_TTL_SECONDS)
        guard.add_pull(self._pull)

    def incident(self, principal: str) -> None:
        self._publish("incident", principal)

    def lockout(self, principal: str) -> None:
        self._publish("lock", principal)

    def _publish(self, kind: str, principal: str) -> None:
        guard = self.guard
        request: dict[str, Any] = {"principal": principal, "refusals": guard.refusals(principal), "limit": guard.limit}
        self.published.publish(_item_id(kind, self.shared.owner, principal), kind, request)

    def _pull(self) -> None:
        for item in self.published.answered():
            if item.kind == "lock" and item.status == "approved":
                self.guard.unlock(str(item.request.get("principal")))
                log.warning("guard: %s unblocked by %s", item.request.get("principal"), item.answered_by or "the user")
