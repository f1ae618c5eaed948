"""Secret refs: the only handle the agent ever holds for a secret value.

A ref is ``secret://`` followed by 32 hex characters (128 random bits). It is bound to the
key name it was minted for, lives in a process-local TTL map (never persisted, so no ref
survives a restart), and resolves to a :class:`SecretValue`, which masks itself in
``repr``/``str`` so that a stray log line or traceback cannot print it.

A ref can also be *reserved* before its value exists (a secret prompt the user has not
answered yet): resolving it then raises :class:`~setup_agent.errors.SecretPending`.

An install *claims* its refs when it starts (:meth:`SecretRefStore.claim`, atomic): a second
install given one of them gets :class:`~setup_agent.errors.SecretInUse`, so two concurrent
installs never use one ref twice. The claim ends with :meth:`~SecretRefStore.consume` (the
install succeeded) or :meth:`~SecretRefStore.release` (it failed: the refs stay usable).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets as _random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NoReturn

from cachetools import LRUCache, TTLCache

from setup_agent.errors import (
    InvalidInput,
    SecretExpired,
    SecretInUse,
    SecretMissing,
    SecretPending,
    SecretWrongKey,
)
from setup_agent.pulls import Pulls

__all__ = ["REF_PATTERN", "SecretRefStore", "SecretValue", "is_ref"]

log = logging.getLogger(__name__)

REF_PREFIX = "secret://"
REF_PATTERN = re.compile(r"secret://[0-9a-f]{32,}")
_MASK = "**********"


def is_ref(value: object) -> bool:
    return isinstance(value, str) and REF_PATTERN.fullmatch(value) is not None


class SecretValue:
    """A secret string that masks itself (as starlette's ``Secret``). ``reveal()`` reads it."""

    __slots__ = ("_value",)
    _value: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("SecretValue wraps a str")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        return self._value

    def is_blank(self) -> bool:
        """Is it empty or only whitespace (an answer that is no value)?"""
        return not self._value.strip()

    def keyed_digest(self, key: bytes) -> str:
        """HMAC-SHA256 of the value under ``key``: compares two values (a test's and its
        install's) without holding either in clear."""
        return hmac.new(key, self._value.encode("utf-8"), hashlib.sha256).hexdigest()

    def __repr__(self) -> str:
        return f"SecretValue('{_MASK}')"

    def __str__(self) -> str:
        return _MASK

    def __format__(self, spec: str) -> str:
        return _MASK

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SecretValue):
            return _random.compare_digest(self._value.encode(), other._value.encode())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("SecretValue", self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("SecretValue is immutable")

    def __reduce__(self) -> NoReturn:  # never pickled into a file or a message by accident
        raise TypeError("SecretValue cannot be pickled")


@dataclass(frozen=True)
class _Entry:
    key_name: str
    value: SecretValue | None  # None while the prompt is unanswered
    created_at: float


class SecretRefStore:
    """Process-local, lock-guarded map of refs to secret values, with a TTL.

    ``timer`` is the clock (inject one in tests). ``on_change`` is called after any value
    is added or removed, so the redactor can rebuild its patterns.
    """

    def __init__(
        self,
        *,
        ttl_seconds: float = 900.0,
        maxsize: int = 10_000,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self._ttl = ttl_seconds
        self._timer = timer
        self._cache: TTLCache[str, _Entry] = TTLCache(maxsize=maxsize, ttl=ttl_seconds, timer=timer)
        self._expired: LRUCache[str, str] = LRUCache(maxsize=maxsize)  # ref -> key name
        self._lock = threading.RLock()
        self._claims: dict[str, str] = {}  # ref -> claim id of the install using it
        self._listeners: list[Callable[[], None]] = []
        self._pulls = Pulls("secrets entered elsewhere", log)

    @property
    def ttl_seconds(self) -> float:
        return self._ttl

    def add_listener(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in list(self._listeners):
            fn()

    def _sweep(self) -> None:
        expired = self._cache.expire()
        for ref, entry in expired:
            self._expired[ref] = entry.key_name
        if expired:
            self._changed()

    @staticmethod
    def _new_ref() -> str:
        return REF_PREFIX + _random.token_hex(16)

    def mint(self, key_name: str, value: str | SecretValue) -> str:
        """Store ``value`` for ``key_name`` and return a fresh ref."""
        _check_key(key_name)
        secret = value if isinstance(value, SecretValue) else SecretValue(value)
        if not secret:
            raise InvalidInput(f"An empty value cannot be stored for {key_name}.", key=key_name)
        ref = self._new_ref()
        with self._lock:
            self._sweep()
            self._cache[ref] = _Entry(key_name, secret, self._timer())
        self._changed()
        return ref

    def reserve(self, key_name: str, *, prompt_id: str | None = None) -> str:
        """Return a ref for ``key_name`` whose value will arrive later (:meth:`fulfil`).
        ``prompt_id``: the prompt it is for (a team's shared store keeps it, ``shared_refs.py``)."""
        _check_key(key_name)
        ref = self._new_ref()
        with self._lock:
            self._sweep()
            self._cache[ref] = _Entry(key_name, None, self._timer())
        return ref

    def fulfil(self, ref: str, value: str | SecretValue) -> None:
        """Give a reserved ref its value. The TTL starts again from now."""
        secret = value if isinstance(value, SecretValue) else SecretValue(value)
        with self._lock:
            entry = self._lookup(ref, None, allow_pending=True)
            if not secret:
                raise InvalidInput(f"An empty value cannot be stored for {entry.key_name}.", key=entry.key_name)
            self._cache[ref] = _Entry(entry.key_name, secret, self._timer())
        self._changed()

    def discard(self, ref: str) -> None:
        with self._lock:
            removed = self._cache.pop(ref, None)
            self._claims.pop(ref, None)
        if removed is not None:
            self._changed()

    def key_of(self, ref: str) -> str:
        """The key name ``ref`` was minted for (pending refs included)."""
        with self._lock:
            return self._lookup(ref, None, allow_pending=True).key_name

    def add_pull(self, pull: Callable[[], None]) -> None:
        """Run ``pull`` before a ref is read: it fills refs answered elsewhere (another process)."""
        self._pulls.add(pull)

    def _pull(self) -> None:
        self._pulls.run()

    pull = _pull  # a team's feed heard an answer: take it in now (the prompt's waiters wake)

    def is_ready(self, ref: str) -> bool:
        self._pull()
        with self._lock:
            entry = self._cache.get(ref)
            return entry is not None and entry.value is not None

    def _lookup(self, ref: str, key_name: str | None, *, allow_pending: bool = False) -> _Entry:
        self._sweep()
        label = key_name or "this key"
        if not is_ref(ref):
            raise SecretMissing(
                f"The value given for {label} is not a secret ref (secret://…). "
                "Ask the user for it with mcp_setup_request_secret.",
                key=key_name,
            )
        entry = self._cache.get(ref)
        if entry is None:
            expired_key = self._expired.get(ref)
            if expired_key is not None:
                raise SecretExpired(
                    f"The secret ref for {expired_key} has expired. Ask the user for {expired_key} again "
                    "with mcp_setup_request_secret.",
                    key=expired_key,
                )
            raise SecretMissing(
                f"The secret ref given for {label} is unknown (already used, or from before a restart). "
                f"Ask the user for {label} again with mcp_setup_request_secret.",
                key=key_name,
            )
        if key_name is not None and entry.key_name != key_name:
            raise SecretWrongKey(
                f"The secret ref given for {key_name} was made for {entry.key_name}; a ref only works for "
                f"the key it was requested for. Request a secret for {key_name}.",
                key=key_name,
            )
        if entry.value is None and not allow_pending:
            raise SecretPending(
                f"The user has not entered {entry.key_name} yet. Wait for them to answer the secret prompt, "
                "then try again.",
                key=entry.key_name,
            )
        return entry

    def unanswered(self, env_refs: Mapping[str, str]) -> set[str]:
        """The keys of ``env_refs`` whose ref is live and bound to it, its prompt not answered yet
        (a consent may be asked before them). Other problems are left for :meth:`resolve`."""
        self._pull()
        out = set()
        with self._lock:
            self._sweep()
            for key, ref in env_refs.items():
                entry = self._cache.get(ref) if is_ref(ref) else None
                if entry is not None and entry.value is None and entry.key_name == key:
                    out.add(key)
        return out

    def resolve(self, env_refs: Mapping[str, str]) -> dict[str, SecretValue]:
        """Map ``{KEY: ref}`` to ``{KEY: SecretValue}``; every ref must be live and bound to its key."""
        self._pull()
        with self._lock:
            out: dict[str, SecretValue] = {}
            for key, ref in env_refs.items():
                entry = self._lookup(ref, key)
                assert entry.value is not None
                out[key] = entry.value
            return out

    def claim(self, env_refs: Mapping[str, str]) -> str:
        """Reserve the known refs among ``env_refs`` for one install; returns the claim id.

        Atomic: if any of them is claimed already, nothing is claimed and
        :class:`SecretInUse` is raised. Unknown or malformed refs are left for
        :meth:`resolve` to report.
        """
        claim_id = "claim_" + _random.token_hex(8)
        with self._lock:
            self._sweep()
            refs = [r for r in env_refs.values() if isinstance(r, str) and r in self._cache]
            for key, ref in env_refs.items():
                if ref in refs and ref in self._claims:
                    label = key if isinstance(key, str) and _KEY_RE.fullmatch(key) else "this key"
                    raise SecretInUse(
                        f"The secret ref given for {label} is being used by another install that is still "
                        "running; a ref serves one install. Wait for it, or request the secret again.",
                        key=label if label != "this key" else None,
                    )
            for ref in refs:
                self._claims[ref] = claim_id
        return claim_id

    def release(self, claim_id: str) -> None:
        """End a claim without using its refs (the install failed): they stay usable."""
        with self._lock:
            for ref in [r for r, c in self._claims.items() if c == claim_id]:
                del self._claims[ref]

    def consume(self, env_refs: Mapping[str, str]) -> None:
        """Forget the refs (after a successful install); they cannot be used again."""
        with self._lock:
            for ref in env_refs.values():
                self._cache.pop(ref, None)
                self._claims.pop(ref, None)
        self._changed()

    def live_values(self) -> Iterator[tuple[str, str]]:
        """``(ref, value)`` for every live answered ref: what the redactor must hide."""
        with self._lock:
            items = [(ref, e.value.reveal()) for ref, e in self._cache.items() if e.value is not None]
        return iter(items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def __repr__(self) -> str:
        return f"SecretRefStore(refs={len(self)}, ttl={self._ttl})"


_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")


def _check_key(key_name: str) -> None:
    if not isinstance(key_name, str) or not _KEY_RE.fullmatch(key_name):
        raise InvalidInput(
            "key_name must be a variable name such as API_KEY (letters, digits, _ . -; up to 128 characters)."
        )
