"""Secret refs shared by a team's replicas: :class:`SharedRefStore`.

On PostgreSQL several ``serve`` replicas share one database, and a ref minted (or a prompt
answered) on one must resolve on any other. :class:`SharedRefStore` is a
:class:`~setup_agent.secrets.SecretRefStore` whose truth is a :class:`SharedRefBackend` (the
store's ``SharedRefs``: the ref's hash, its key, the value encrypted with the data key, its
deadline, its claim); the process-local map stays as a cache and as the redactor's source of
live values. A ref is read from the backend before every use, so one consumed, discarded or
expired on another replica is gone here too; a claim is one conditional ``UPDATE`` in the
backend after the local one, so two replicas never install with one ref. On SQLite this class is
not used: refs live in one process's memory, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from setup_agent.errors import SecretInUse, SetupError

from .refs import SecretRefStore, SecretValue, _Entry, is_ref

__all__ = ["SharedRefBackend", "SharedRefStore"]

log = logging.getLogger(__name__)


class SharedRefBackend(Protocol):
    def put(
        self, ref: str, key_name: str, value: SecretValue | None, *, ttl_seconds: float, prompt_id: str | None = None
    ) -> None: ...
    def fill(self, ref: str, value: SecretValue, *, ttl_seconds: float) -> bool: ...
    def get(self, ref: str) -> tuple[str, SecretValue | None, bool, str | None] | None: ...
    def claim(self, refs: Iterable[str], claim_id: str) -> bool: ...
    def release(self, claim_id: str) -> None: ...
    def delete(self, refs: Iterable[str]) -> None: ...


class SharedRefStore(SecretRefStore):
    """Refs in the team's database (``shared``), with this process's map as a cache."""

    def __init__(self, shared: SharedRefBackend, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shared = shared
        self._unreleased: set[str] = set()

    def mint(self, key_name: str, value: str | SecretValue) -> str:
        ref = super().mint(key_name, value)
        try:
            self.shared.put(ref, key_name, self._local_value(ref), ttl_seconds=self.ttl_seconds)
        except BaseException:
            super().discard(ref)
            raise
        return ref

    def reserve(self, key_name: str, *, prompt_id: str | None = None) -> str:
        ref = super().reserve(key_name)
        try:
            self.shared.put(ref, key_name, None, ttl_seconds=self.ttl_seconds, prompt_id=prompt_id)
        except BaseException:
            super().discard(ref)
            raise
        return ref

    def fulfil(self, ref: str, value: str | SecretValue) -> None:
        super().fulfil(ref, value)
        secret = self._local_value(ref)
        if secret is not None and not self.shared.fill(ref, secret, ttl_seconds=self.ttl_seconds):
            self._sync(ref)  # answered on another replica already (its value wins), or consumed there: gone here

    def discard(self, ref: str) -> None:
        super().discard(ref)
        if is_ref(ref):
            self.shared.delete([ref])

    def key_of(self, ref: str) -> str:
        self._sync(ref)
        return super().key_of(ref)

    def is_ready(self, ref: str) -> bool:
        self._pull()
        self._sync(ref)
        return super().is_ready(ref)

    def unanswered(self, env_refs: Mapping[str, str]) -> set[str]:
        for ref in env_refs.values():
            self._sync(ref)
        return super().unanswered(env_refs)

    def resolve(self, env_refs: Mapping[str, str]) -> dict[str, SecretValue]:
        self._pull()
        for ref in env_refs.values():
            self._sync(ref)
        return super().resolve(env_refs)

    def claim(self, env_refs: Mapping[str, str]) -> str:
        self._release_pending()
        for ref in env_refs.values():
            self._sync(ref)
        claim_id = super().claim(env_refs)
        with self._lock:
            mine = [r for r, c in self._claims.items() if c == claim_id]
        if not self.shared.claim(mine, claim_id):
            super().release(claim_id)
            raise SecretInUse(
                "A secret ref given is being used by another install that is still running (on this or another "
                "mcp-setup of the team); a ref serves one install. Wait for it, or request the secret again."
            )
        return claim_id

    def release(self, claim_id: str) -> None:
        super().release(claim_id)
        self._unreleased.add(claim_id)
        self._release_pending()

    def _release_pending(self) -> None:
        """Release the claims a failed install left (again, when the database was away then)."""
        for claim_id in list(self._unreleased):
            try:
                self.shared.release(claim_id)
            except SetupError as exc:  # a failed install's cleanup goes on; released at the next claim
                log.warning("a claim on shared secret refs could not be released yet (%s)", exc.code)
                return
            self._unreleased.discard(claim_id)

    def consume(self, env_refs: Mapping[str, str]) -> None:
        super().consume(env_refs)
        self.shared.delete([r for r in env_refs.values() if is_ref(r)])

    # -- the cache ---------------------------------------------------------------------
    def _local_value(self, ref: str) -> SecretValue | None:
        with self._lock:
            entry = self._cache.get(ref)
            return entry.value if entry is not None else None

    def _sync(self, ref: object) -> None:
        """This process's entry for ``ref`` made to match the database's row."""
        if not isinstance(ref, str) or not is_ref(ref):
            return
        try:
            row = self.shared.get(ref)
        except SetupError as exc:  # the database is away: this process's own entry answers meanwhile
            log.warning("a shared secret ref could not be read (%s); using this process's copy", exc.code)
            return
        changed = False
        with self._lock:
            local = self._cache.get(ref)
            if row is None or row[2]:  # consumed or discarded elsewhere, or expired
                if local is not None:
                    self._cache.pop(ref, None)
                    self._claims.pop(ref, None)
                    changed = True
                if row is not None:
                    self._expired[ref] = row[0]
            else:
                key_name, value, _expired, _claimed = row
                if (
                    local is None
                    or local.key_name != key_name
                    or (local.value is None) != (value is None)
                    or (value is not None and local.value != value)
                ):
                    self._cache[ref] = _Entry(key_name, value, self._timer())
                    changed = True
        if changed:
            self._changed()
