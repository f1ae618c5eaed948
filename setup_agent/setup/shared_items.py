"""What this process published to the store's shared list and still waits on (consents, secret
prompts, the guard's locks: see ``shared_consents.py``, ``shared_prompts.py``, ``shared_locks.py``).

:class:`Published` keeps the ids, publishes and closes them, and hands back the ones another
process answered, each once (a team's consent rows are kept, listed nowhere, until their
deadline: other replicas wait on them too, see ``shared_consents.py``). The store failing is
logged by its code and never breaks the local channels, which go on as if nothing were shared.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from setup_agent.errors import SetupError
from setup_agent.store import PendingApproval, PendingApprovals

__all__ = ["Published"]

log = logging.getLogger(__name__)


class Published:
    def __init__(self, shared: PendingApprovals, *, ttl_seconds: float, keep_answered: bool = False) -> None:
        self.shared = shared
        self.ttl_seconds = ttl_seconds
        self.keep_answered = keep_answered
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def publish(
        self,
        item_id: str,
        kind: str,
        request: dict[str, Any],
        *,
        fingerprint: str | None = None,
        requester: str | None = None,
    ) -> bool:
        try:
            self.shared.publish(
                item_id, kind, request, ttl_seconds=self.ttl_seconds, fingerprint=fingerprint, requester=requester
            )
        except SetupError as exc:
            log.warning("a pending %s could not be shared (%s)", kind, exc.code)
            return False
        self.own(item_id)
        return True

    def own(self, item_id: str) -> None:
        """Wait for the answers of ``item_id`` (published here, or taken over from a process gone)."""
        with self._lock:
            self._ids.add(item_id)

    def forget(self, item_id: str) -> None:
        """Stop waiting for ``item_id``'s answers; its row stays (until it is closed or expires)."""
        with self._lock:
            self._ids.discard(item_id)

    def closed(self, item_id: str) -> None:
        """``item_id`` was answered here (or expired): its row goes."""
        with self._lock:
            mine = item_id in self._ids
            self._ids.discard(item_id)
        if mine:
            self.close(item_id)

    def answered(self) -> list[PendingApproval]:
        """The items another process answered since the last call (each once; their rows go)."""
        with self._lock:
            ids = list(self._ids)
        if not ids:
            return []
        items = self.shared.answers(ids)
        with self._lock:
            self._ids.difference_update(item.item_id for item in items)
        if not self.keep_answered:
            for item in items:
                self.close(item.item_id)  # a secret's encrypted value goes as soon as it is read
        return items

    def close(self, item_id: str) -> None:
        try:
            self.shared.close(item_id)
        except SetupError as exc:  # it expires by itself
            log.warning("a shared item could not be closed (%s)", exc.code)
