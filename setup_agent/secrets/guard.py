"""The guessing guard: makes probing the redactor for a secret expensive and visible.

Output that can reflect an agent's input and must still be redacted (a proxied tool result,
a server's tool list or stderr after a test with agent-chosen settings) is an oracle: the
agent sends a guess, and if the answer comes back with the guess swapped for a ref, the guess
was right. The guard closes it at the input, for every call an agent makes: the setup tools'
arguments (``env``, URL variables, package arguments, a query) and gateway calls alike:

* :meth:`GuessGuard.check` refuses the call, with ``arguments_refused`` and a message that
  echoes nothing, when an argument holds a value the redactor would hide, in any form it
  knows (:mod:`.forms`), checked on each string (dict keys included), on the concatenation
  of the string values in order and of each two and three neighbours (a guess
  split over two arguments, or a short one over two URL variables), on the
  decoded text of escapes, and on every notation of a number (``4.821e3`` is 4821); values
  of 8 characters or more also case-folded and with separators ignored. Short values follow
  the redactor's rules (under 4 characters not matched, under 8 only as whole tokens;
  ``strict=True`` matches every length);
* the agent never legitimately holds a stored secret, so the **first** refusal of a
  principal is already an incident: it is logged and ``on_incident(principal)`` is called
  (the faces tell the user out of band);
* the ``limit``-th refusal (default 2) locks the principal: every later call it makes
  through the guard is refused with ``session_locked`` (the same answer whatever it
  carries, so the refusal is no answer), and ``on_lockout(principal)`` is called once,
  until the user unlocks it (:meth:`GuessGuard.unlock`; :meth:`GuessGuard.incidents` lists
  what happened, for ``mcp-setup approve``).

Counting is keyed by one opaque string, the *principal* (a session id, ``token:NAME``,
``user:terminal``, a stdio client's key…); ``None`` or ``""`` count as one shared key. The
guard knows no values of its own: it asks the :class:`~setup_agent.secrets.redact.Redactor`.
It is thread-safe and holds its counts in memory (a restart forgets them); on a team's database
``counts`` (the store's ``SharedGuardCounts``) adds them up over every replica, so guesses
spread over a round-robin balancer lock the principal as on one process.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from cachetools import LRUCache

from setup_agent.errors import ArgumentsRefused, SessionLocked, SetupError
from setup_agent.pulls import Pulls

from .redact import Redactor

__all__ = ["DEFAULT_LIMIT", "GuardCounts", "GuardIncident", "GuessGuard"]

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 2
_MAX_PRINCIPALS = 10_000
_DEFAULT_PRINCIPAL = "-"
_MAX_RUNS = 1_000  # values whose neighbours are joined in twos and threes

_REFUSED = (
    "The call was refused: its arguments hold a value that mcp-setup protects, and the user has been "
    "told. An agent never needs such a value: pass secrets as refs (mcp_setup_request_secret). "
    "After {limit} such calls this agent's tool calls are blocked until the user unblocks them."
)
_LOCKED = (
    "This agent's tool calls are blocked: its calls carried values that mcp-setup protects. The user "
    "has been told and can unblock it (mcp-setup approve)."
)


class GuardCounts(Protocol):
    """Refused calls counted where every replica of a team sees them (the store's
    ``SharedGuardCounts``); without one, each process counts its own."""

    def add(self, principal: str, *, limit: int) -> tuple[int, bool]:
        """One more refused call of ``principal``: ``(refusals, locked)`` after it."""

    def get(self, principal: str) -> tuple[int, bool] | None:
        """``(refusals, locked)`` of ``principal``; None when it has none."""

    def clear(self, principal: str) -> None:
        """The user unblocked ``principal``: its count starts again."""


@dataclass(frozen=True)
class GuardIncident:
    """What the guard saw of one principal: never a value or an argument."""

    principal: str
    refusals: int
    locked: bool
    first_at: float  # epoch seconds of the first refusal
    last_at: float
    last_where: str  # "gateway" or "setup": where the last refused call went

    def public(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "refusals": self.refusals,
            "locked": self.locked,
            "first_at": self.first_at,
            "last_at": self.last_at,
            "last_where": self.last_where,
        }


class GuessGuard:
    """Refuses calls whose arguments hold a protected value; locks a principal after ``limit``."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        limit: int = DEFAULT_LIMIT,
        on_lockout: Callable[[str], object] | None = None,
        on_incident: Callable[[str], object] | None = None,
        strict: bool = False,
        clock: Callable[[], float] = time.time,
        counts: GuardCounts | None = None,
        sync: Literal["every call", "first call"] = "every call",
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a whole number of at least 1")
        self.redactor = redactor
        self.limit = limit
        self.on_lockout = on_lockout
        self.on_incident = on_incident
        self.strict = strict
        self.clock = clock
        self._lock = threading.Lock()
        self._incidents: LRUCache[str, GuardIncident] = LRUCache(_MAX_PRINCIPALS)
        self._pulls = Pulls("unblocks given elsewhere", log)
        self.counts = counts
        #: When a principal's lock is read from ``counts``: on ``every call`` (replicas that lock and
        #: unlock each other), or on its ``first call`` here and while it is locked (sessions one
        #: after another: a lock left by an earlier session holds, and is told on this one's channel).
        self.sync = sync
        self._synced: LRUCache[str, bool] = LRUCache(_MAX_PRINCIPALS)

    def add_pull(self, pull: Callable[[], None]) -> None:
        """Run ``pull`` before a locked principal is refused: it applies the user's unlock given
        elsewhere (``mcp-setup approve`` in another process, see setup/shared_locks.py)."""
        self._pulls.add(pull)

    # -- queries ----------------------------------------------------------------------
    def refusals(self, principal: str | None) -> int:
        with self._lock:
            incident = self._incidents.get(_key(principal))
            return incident.refusals if incident else 0

    def is_locked(self, principal: str | None) -> bool:
        with self._lock:
            incident = self._incidents.get(_key(principal))
            return bool(incident and incident.locked)

    def locked(self) -> list[str]:
        """The principals locked now, oldest incident first."""
        return [i.principal for i in self.incidents() if i.locked]

    def incidents(self) -> list[GuardIncident]:
        """Every principal with a refused call since it was last unlocked, oldest first."""
        with self._lock:
            return sorted(self._incidents.values(), key=lambda i: i.first_at)

    def holds_secret(self, arguments: Any) -> bool:
        """Whether ``arguments`` hold a protected value in any form (counts nothing)."""
        texts: list[str] = []
        values: list[str] = []
        for text, joined in _texts(arguments):
            texts.append(text)
            if joined:
                values.append(text)
        if self.redactor.contains_any(texts, strict=self.strict):
            return True
        if len(values) < 2:
            return False
        # all the values joined in order; a short value split over neighbours ({a}{b} in a URL)
        # is a whole token only on its own, so every two and three neighbours joined too
        ends = min(len(values), _MAX_RUNS)
        joins = ["".join(values), *("".join(values[i : i + n]) for n in (2, 3) for i in range(ends - n + 1))]
        return self.redactor.contains_any(joins, strict=self.strict)

    # -- the check --------------------------------------------------------------------
    def ensure_unlocked(self, principal: str | None) -> None:
        """Raise :class:`SessionLocked` if ``principal`` is locked (before any other check, so a
        locked principal gets one answer whatever it sends)."""
        if self._pulls and self.is_locked(principal):
            self._pulls.run()  # the store failing keeps the lock, never a crash
        key = _key(principal)
        if self.counts is not None and (self.sync == "every call" or key not in self._synced or self.is_locked(key)):
            self._synced[key] = True
            self._sync(key)
        with self._lock:
            if (incident := self._incidents.get(_key(principal))) is not None and incident.locked:
                raise SessionLocked(_LOCKED)

    def check(self, principal: str | None, arguments: Any, *, where: str = "gateway") -> None:
        """Let the call through, or raise :class:`SessionLocked` / :class:`ArgumentsRefused`.

        ``where``: ``"gateway"`` (a call to an installed server) or ``"setup"`` (a setup tool);
        both count alike, and a locked principal is refused in both."""
        key = _key(principal)
        self.ensure_unlocked(key)
        if not self.holds_secret(arguments):
            return
        now = self.clock()
        shared = self._count_shared(key)
        with self._lock:
            incident = self._incidents.get(key)
            if incident is not None and incident.locked:  # locked by a concurrent call meanwhile
                raise SessionLocked(_LOCKED)
            count = shared[0] if shared else (incident.refusals if incident else 0) + 1
            locks_now = shared[1] if shared else count >= self.limit
            self._incidents[key] = GuardIncident(
                key, count, locks_now, incident.first_at if incident else now, now, where
            )
        log.warning(
            "guard: refused a %s call carrying a protected value (principal %s, %d of %d before it is blocked)",
            where,
            key,
            count,
            self.limit,
        )
        if count == 1:
            self._tell(self.on_incident, key, "incident")
        if locks_now:
            log.warning("guard: principal %s blocked after %d refused calls, until the user unblocks it", key, count)
            self._tell(self.on_lockout, key, "lockout")
        raise ArgumentsRefused(_REFUSED.format(limit=self.limit))

    def unlock(self, principal: str | None) -> bool:
        """The user unblocks ``principal``: its count starts again. True if it was locked."""
        key = _key(principal)
        with self._lock:
            incident = self._incidents.pop(key, None)
        if self.counts is not None:
            try:
                self.counts.clear(key)
            except SetupError as exc:
                log.warning("guard: the team's count could not be cleared (%s)", exc.code)
        if incident is not None:
            log.warning("guard: principal %s unblocked by the user", key)
        return bool(incident and incident.locked)

    def forget(self, principal: str | None) -> None:
        """Drop a principal that will never call again (an ended session); a lock is kept, so a
        locked principal is forgotten only by :meth:`unlock`."""
        key = _key(principal)
        with self._lock:
            incident = self._incidents.get(key)
            if incident is not None and not incident.locked:
                del self._incidents[key]

    def _count_shared(self, key: str) -> tuple[int, bool] | None:
        """One more refusal in the team's count: ``(refusals, locked)``; None without one (or unreachable)."""
        if self.counts is None:
            return None
        try:
            return self.counts.add(key, limit=self.limit)
        except SetupError as exc:
            log.warning("guard: the team's count could not be read (%s); counting here", exc.code)
            return None

    def _sync(self, key: str) -> None:
        """A lock given on another replica holds here; one the user lifted there is lifted here."""
        try:
            row = self.counts.get(key) if self.counts is not None else None
        except SetupError:
            return
        now = self.clock()
        loaded = False
        with self._lock:
            incident = self._incidents.get(key)
            if row is not None and row[1] and not (incident and incident.locked):
                self._incidents[key] = GuardIncident(
                    key,
                    row[0],
                    True,
                    incident.first_at if incident else now,
                    now,
                    incident.last_where if incident else "gateway",
                )
                loaded = True
            elif row is None and incident is not None and incident.locked:
                del self._incidents[key]
        if loaded and self.sync == "first call":  # an earlier session's lock: told on this one's channel
            log.warning("guard: principal %s is still blocked from an earlier session, until the user unblocks it", key)
            self._tell(self.on_lockout, key, "lockout")

    def _tell(self, listener: Callable[[str], object] | None, key: str, what: str) -> None:
        if listener is None:
            return
        try:
            listener(key)
        except Exception:  # telling the user must not turn a refusal into a crash
            log.exception("guard: the %s listener failed", what)

    def __repr__(self) -> str:
        with self._lock:
            locked = sum(1 for i in self._incidents.values() if i.locked)
            return f"GuessGuard(limit={self.limit}, principals={len(self._incidents)}, locked={locked})"


def _key(principal: str | None) -> str:
    return principal if isinstance(principal, str) and principal else _DEFAULT_PRINCIPAL


_NUMBER = re.compile(r"[+-]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?0[xXoObB][0-9a-fA-F_]+")


def _notations(number: int | float) -> list[str]:
    """``number`` as the texts it could be a guess of: ``4.821e3`` → ``4821``, ``4821.0``."""
    out = []
    if isinstance(number, float):
        if not math.isfinite(number):
            return []
        out.append(repr(number))
        if number.is_integer() and abs(number) < 1e21:
            out.append(str(int(number)))
        return out
    try:
        out.append(str(number))
    except ValueError:  # an int too long to print: no secret is that long
        pass
    return out


def _number_texts(text: str) -> list[str]:
    """A string that is a number in another notation, as that number's plain forms."""
    candidate = text.strip()
    if len(candidate) > 64 or not _NUMBER.fullmatch(candidate):
        return []
    try:
        number: int | float = int(candidate, 0) if candidate.lstrip("+-")[1:2].isalpha() else float(candidate)
    except ValueError:
        return []
    return [n for n in _notations(number) if n != candidate]


def _texts(obj: Any) -> Iterator[tuple[str, bool]]:
    """Every text inside ``obj`` in order, as ``(text, joined)``: string values (joined with their
    neighbours), dict keys and numbers in their notations (checked alone); iterative."""
    stack: list[Iterator[Any]] = [iter((obj,))]
    while stack:
        try:
            item = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if isinstance(item, _Key):
            yield item.text, False
            continue
        if isinstance(item, str):
            yield item, True
            for text in _number_texts(item):
                yield text, False
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):  # checked alone, never joined (coordinates 48, 21 are no PIN)
            for text in _notations(item):
                yield text, False
        elif isinstance(item, dict):
            stack.append(_dict_items(item))
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.append(iter(item))
        elif isinstance(item, (bytes, bytearray)):
            yield bytes(item).decode("utf-8", "replace"), True


class _Key:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _dict_items(d: dict[Any, Any]) -> Iterator[Any]:
    for key, value in d.items():
        yield _Key(key) if isinstance(key, str) else key
        yield value
