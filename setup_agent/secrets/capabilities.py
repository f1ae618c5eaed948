"""Capabilities: one random, single-use key per pending item and action, instead of a page token.

A page link used to carry the process's page token, which opened every prompt *and* every
consent: a secret-entry link handed to an agent could approve the agent's own launch. Now each
link carries a capability bound to one item id and one action:

* ``"secret"`` — enter (or cancel) the value of one pending secret prompt, nothing else. It may be
  handed to an agent when its client cannot show a page itself: all it can do is type a value.
* ``"consent"`` — answer one pending consent or tool review. It travels only on the user's own
  channels (URL-mode elicitation, a page mcp-setup opens in the user's browser, the terminal);
  no tool result, error, ``details`` field, JSON-RPC answer or log line carries one.

Only a SHA-256 of each key is held; a key lives for ``ttl_seconds`` (the prompt's TTL) and is
spent by :meth:`Capabilities.consume` (the answer), after which it opens nothing. Every key
issued is handed to ``on_issue(key, action)`` first, so a face can register it with the log
filter (and a consent key with the redactor, as a second line behind the structure).
Thread-safe: the page answers from its own thread.

On a team's database ``shared`` (the store's ``SharedCapabilities``) holds the same digests,
so a link issued by one replica opens its item on any other, and is spent once for all of them.
"""

from __future__ import annotations

import hashlib
import secrets as _random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["CAPABILITY_ACTIONS", "Capabilities", "CapabilityAction"]

CapabilityAction = Literal["secret", "consent"]
CAPABILITY_ACTIONS: tuple[str, ...] = ("secret", "consent")
_MAX_KEYS = 10_000


class SharedGrants(Protocol):
    def put(self, digest: str, item_id: str, action: str, *, ttl_seconds: float) -> None: ...
    def get(self, digest: str) -> tuple[str, str, bool, bool] | None: ...  # item, action, spent, expired
    def spend(self, digest: str) -> bool: ...
    def revoke_item(self, item_id: str) -> None: ...


@dataclass(frozen=True)
class _Grant:
    item_id: str
    action: str
    expires_at: float


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class Capabilities:
    """Issues and checks item-bound, single-use keys (see the module docstring)."""

    def __init__(
        self,
        *,
        ttl_seconds: float = 900.0,
        timer: Callable[[], float] = time.monotonic,
        on_issue: Callable[[str, str], object] | None = None,
        shared: SharedGrants | None = None,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self._ttl = float(ttl_seconds)
        self._timer = timer
        self._lock = threading.Lock()
        self._grants: dict[str, _Grant] = {}
        self._spent: dict[str, _Grant] = {}  # digest -> what it opened (bounded): "already answered" pages
        self.on_issue = on_issue
        #: The team's shared digests (a web face sets it once its runtime is built); None: this process only.
        self.shared = shared

    def issue(self, item_id: str, action: CapabilityAction) -> str:
        """A new key that opens ``action`` on ``item_id`` only."""
        if action not in CAPABILITY_ACTIONS:
            raise ValueError(f"unknown capability action {action!r}")
        if not isinstance(item_id, str) or not item_id:
            raise ValueError("item_id must be a non-empty string")
        key = _random.token_urlsafe(32)
        if self.on_issue is not None:
            self.on_issue(key, action)
        with self._lock:
            self._sweep()
            while len(self._grants) >= _MAX_KEYS:
                self._grants.pop(next(iter(self._grants)))
            self._grants[_digest(key)] = _Grant(item_id, action, self._timer() + self._ttl)
        if self.shared is not None:
            self.shared.put(_digest(key), item_id, action, ttl_seconds=self._ttl)
        return key

    def allows(self, key: str | None, item_id: str, action: CapabilityAction) -> bool:
        """Whether ``key`` opens ``action`` on ``item_id`` now (it is not spent)."""
        return self._match(key, item_id, action, spend=False)

    def consume(self, key: str | None, item_id: str, action: CapabilityAction) -> bool:
        """Like :meth:`allows`, and spends the key: it opens nothing afterwards."""
        return self._match(key, item_id, action, spend=True)

    def spent(self, key: str | None, item_id: str, action: CapabilityAction) -> bool:
        """Whether ``key`` once opened ``action`` on ``item_id`` and was spent (the page can say
        "already answered" instead of "refused"). It opens nothing."""
        if not isinstance(key, str) or not key or len(key) > 200:
            return False
        with self._lock:
            grant = self._spent.get(_digest(key))
        if grant is None and self.shared is not None:
            row = self.shared.get(_digest(key))
            return row is not None and row[2] and row[0] == item_id and row[1] == action
        return grant is not None and grant.item_id == item_id and grant.action == action

    def revoke_item(self, item_id: str) -> None:
        """Every key of ``item_id`` opens nothing from now on (the item was answered elsewhere)."""
        with self._lock:
            for digest in [d for d, g in self._grants.items() if g.item_id == item_id]:
                del self._grants[digest]
        if self.shared is not None:
            self.shared.revoke_item(item_id)

    def _match(self, key: str | None, item_id: str, action: str, *, spend: bool) -> bool:
        if not isinstance(key, str) or not key or len(key) > 200:
            return False
        digest = _digest(key)
        if self.shared is not None:
            return self._match_shared(digest, item_id, action, spend=spend)
        with self._lock:
            grant = self._grants.get(digest)
            if grant is None:
                return False
            if grant.expires_at <= self._timer():
                del self._grants[digest]
                return False
            ok = _random.compare_digest(grant.item_id, item_id) and grant.action == action
            if ok and spend:
                self._spent[digest] = self._grants.pop(digest)
                while len(self._spent) > _MAX_KEYS:
                    self._spent.pop(next(iter(self._spent)))
            return ok

    def _match_shared(self, digest: str, item_id: str, action: str, *, spend: bool) -> bool:
        """The team's row decides (spent on another replica: spent here too)."""
        row = self.shared.get(digest) if self.shared is not None else None
        if row is None or row[2] or row[3]:
            with self._lock:
                self._grants.pop(digest, None)
            return False
        ok = _random.compare_digest(row[0], item_id) and row[1] == action
        if ok and spend:
            ok = self.shared.spend(digest)  # type: ignore[union-attr]
            with self._lock:
                grant = self._grants.pop(digest, None) or _Grant(row[0], row[1], self._timer())
                self._spent[digest] = grant
                while len(self._spent) > _MAX_KEYS:
                    self._spent.pop(next(iter(self._spent)))
        return ok

    def _sweep(self) -> None:
        now = self._timer()
        for digest in [d for d, g in self._grants.items() if g.expires_at <= now]:
            del self._grants[digest]
