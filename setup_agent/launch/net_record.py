"""What a sandboxed server reached or tried on the network, as the proxy saw it.

The test-connect shows it to the person ("During the test it connected to api.notion.com:443")
and offers "only these" (:meth:`NetRecord.reached` → :meth:`NetPolicy.strict`); a refused
destination is handed to ``on_refused`` the first time it is tried (the integration sends it to
the page, ``mcp-setup logs`` and the gateway's log relay, with a one-step way to allow it). One
record per server run; bounded, since a hostile server may try endless names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .net_policy import REASONS, Endpoint, Verdict

__all__ = ["Attempt", "NetRecord"]

logger = logging.getLogger(__name__)

#: Distinct destinations kept per record; past it only a count of the others.
MAX_DESTINATIONS = 256


@dataclass
class Attempt:
    """One destination (``host:port`` as the server asked for it) and what became of it."""

    destination: str
    allowed: bool
    reason: str
    addresses: tuple[str, ...] = ()
    tries: int = 0
    #: True once a connection got through, False when every one failed (allowed but unreachable).
    reached: bool | None = None
    error: str = ""
    first: float = 0.0
    last: float = 0.0

    @property
    def words(self) -> str:
        """One line for a person."""
        if not self.allowed:
            return f"{self.destination}: refused ({REASONS.get(self.reason, self.reason)})"
        if self.reached is False:
            return f"{self.destination}: could not be reached ({self.error or 'no answer'})"
        return f"{self.destination}: connected" + (f" ({REASONS['granted']})" if self.reason == "granted" else "")

    def to_dict(self) -> dict[str, object]:
        return {
            "destination": self.destination,
            "allowed": self.allowed,
            "reason": self.reason,
            "addresses": list(self.addresses),
            "tries": self.tries,
            "reached": self.reached,
            "error": self.error,
        }


@dataclass
class NetRecord:
    """Every destination one server reached or tried, in the order first seen."""

    on_refused: Callable[[Attempt], None] | None = None
    clock: Callable[[], float] = time.time
    limit: int = MAX_DESTINATIONS
    _seen: dict[str, Attempt] = field(default_factory=dict, repr=False)
    _dropped: int = field(default=0, repr=False)

    def note(self, destination: str, verdict: Verdict) -> Attempt | None:
        """The policy's verdict on ``destination`` (as asked, e.g. ``api.x.com:443``); a new
        refusal (not a name that fails to resolve) goes to ``on_refused``. None once the record is full and the destination is new."""
        now = self.clock()
        attempt = self._seen.get(destination)
        if attempt is None:
            if len(self._seen) >= self.limit:
                self._dropped += 1
                return None
            attempt = self._seen[destination] = Attempt(destination, verdict.allowed, verdict.reason, first=now)
        attempt.allowed, attempt.reason = verdict.allowed, verdict.reason
        attempt.addresses = tuple(str(a) for a in verdict.addresses)
        attempt.tries += 1
        attempt.last = now
        if not verdict.allowed and verdict.reason != "unresolved" and attempt.tries == 1 and self.on_refused:
            try:
                self.on_refused(attempt)
            except Exception:  # a listener's bug must not break the server's connection handling
                logger.exception("net record: on_refused failed for %s", destination)
        return attempt

    def outcome(self, attempt: Attempt | None, reached: bool, error: str = "") -> None:
        """Whether an allowed connection got through (once reached, it stays reached)."""
        if attempt is None:
            return
        if reached:
            attempt.reached, attempt.error = True, ""
        elif attempt.reached is not True:
            attempt.reached, attempt.error = False, error

    def attempts(self) -> list[Attempt]:
        return list(self._seen.values())

    @property
    def dropped(self) -> int:
        """New destinations tried after the record was full."""
        return self._dropped

    def reached(self) -> frozenset[Endpoint]:
        """The destinations it connected to: what "only these" would allow."""
        out = set()
        for attempt in self._seen.values():
            if attempt.allowed and attempt.reached:
                out.add(Endpoint.parse(attempt.destination))
        return frozenset(out)

    def refused(self) -> list[Attempt]:
        return [a for a in self._seen.values() if not a.allowed]

    def words(self) -> list[str]:
        """What the page shows after a test: one line a destination."""
        lines = [a.words for a in self._seen.values()]
        if self._dropped:
            lines.append(f"… and {self._dropped} more destinations (not recorded)")
        return lines
