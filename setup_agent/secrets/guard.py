"""The guessing guard: makes probing the redactor for a secret expensive and visible.

Output that can reflect an agent's input and must still be redacted (tool results proxied
from installed servers) is an oracle: the agent sends a guess, and if the answer comes back
with the guess swapped for a ref, the guess was right. The guard closes it at the input:

* :meth:`GuessGuard.check` walks a tool call's arguments (every nested string, dict keys
  included, and numbers as their JSON text) and refuses the call, with the stable code
  ``arguments_refused`` and a message that echoes nothing, when one holds a value the
  redactor would replace in outbound text (a live ref's value or a stored value in use, or
  one of their encoded forms; item 8's short-value rules: values under 4 characters are not
  matched, values under 8 only as whole tokens; ``strict=True`` matches every length);
* refusals are counted per session; the ``limit``-th locks the session: every later call
  of it is refused with ``session_locked``, and ``on_lockout(session_id)`` is called once, so
  the face can tell the user out of band (web modal, terminal, log line) — never the agent.

The guard knows no values of its own: it asks the :class:`~setup_agent.secrets.redact.Redactor`.
It is thread-safe. The lead wires it in front of gateway (proxied) tool calls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from cachetools import LRUCache

from setup_agent.errors import ArgumentsRefused, SessionLocked

from .redact import Redactor

__all__ = ["DEFAULT_LIMIT", "GuessGuard"]

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 3
_MAX_SESSIONS = 10_000
_DEFAULT_SESSION = "-"

_REFUSED = (
    "The call was refused: its arguments hold a value that mcp-setup protects. Such calls are "
    "counted; after {limit} in one session its tool calls are blocked and the user is told."
)
_LOCKED = (
    "This session's tool calls are blocked: too many calls carried a protected value. The user has "
    "been told; a new session is needed."
)


class GuessGuard:
    """Refuses tool calls whose arguments hold a protected value; locks a session after ``limit``."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        limit: int = DEFAULT_LIMIT,
        on_lockout: Callable[[str], Any] | None = None,
        strict: bool = False,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a whole number of at least 1")
        self.redactor = redactor
        self.limit = limit
        self.on_lockout = on_lockout
        self.strict = strict
        self._lock = threading.Lock()
        self._counts: LRUCache[str, int] = LRUCache(_MAX_SESSIONS)
        self._locked: LRUCache[str, bool] = LRUCache(_MAX_SESSIONS)

    # -- queries ----------------------------------------------------------------------
    def refusals(self, session_id: str | None) -> int:
        with self._lock:
            return self._counts.get(_sid(session_id), 0)

    def is_locked(self, session_id: str | None) -> bool:
        with self._lock:
            return _sid(session_id) in self._locked

    def holds_secret(self, arguments: Any) -> bool:
        """Whether any string inside ``arguments`` holds a protected value (counts nothing)."""
        return any(self.redactor.contains_secret(text, strict=self.strict) for text in _strings(arguments))

    # -- the check --------------------------------------------------------------------
    def check(self, session_id: str | None, arguments: Any) -> None:
        """Let the call through, or raise :class:`SessionLocked` / :class:`ArgumentsRefused`."""
        sid = _sid(session_id)
        with self._lock:
            if sid in self._locked:
                raise SessionLocked(_LOCKED)
        if not self.holds_secret(arguments):
            return
        with self._lock:
            if sid in self._locked:  # locked by a concurrent call meanwhile
                raise SessionLocked(_LOCKED)
            count = self._counts.get(sid, 0) + 1
            self._counts[sid] = count
            locks_now = count >= self.limit
            if locks_now:
                self._locked[sid] = True
        log.warning("guard: refused a tool call carrying a protected value (session %s, %d of %d)", sid, count, self.limit)
        if locks_now:
            self._lockout(sid)
        raise ArgumentsRefused(_REFUSED.format(limit=self.limit))

    def forget(self, session_id: str | None) -> None:
        """Drop a session's count and lock (the session ended)."""
        sid = _sid(session_id)
        with self._lock:
            self._counts.pop(sid, None)
            self._locked.pop(sid, None)

    def _lockout(self, sid: str) -> None:
        log.warning("guard: session %s locked after %d refused calls", sid, self.limit)
        if self.on_lockout is None:
            return
        try:
            self.on_lockout(sid)
        except Exception:  # telling the user must not turn a refusal into a crash
            log.exception("guard: the lockout listener failed")

    def __repr__(self) -> str:
        with self._lock:
            return f"GuessGuard(limit={self.limit}, sessions={len(self._counts)}, locked={len(self._locked)})"


def _sid(session_id: str | None) -> str:
    return session_id if isinstance(session_id, str) and session_id else _DEFAULT_SESSION


def _strings(obj: Any) -> list[str]:
    """Every string inside ``obj`` (dict keys included; numbers as JSON text), without recursion."""
    out: list[str] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            try:
                out.append(str(item))
            except ValueError:  # an int too long to print: no secret is that long
                continue
        elif isinstance(item, dict):
            for key, value in item.items():
                stack.append(key)
                stack.append(value)
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif isinstance(item, (bytes, bytearray)):
            out.append(bytes(item).decode("utf-8", "replace"))
    return out
