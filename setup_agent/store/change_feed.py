"""Changes fanned out at once on a team's PostgreSQL database: ``LISTEN/NOTIFY``.

Every write that bumps the change counter also sends ``NOTIFY mcp_setup_changes`` in the same
transaction (PostgreSQL delivers it at commit); publishing or answering an item that waits for
the user (a consent, a tool review, a secret prompt) sends ``mcp_setup_pending``. A
:class:`ChangeFeed` listens on its own connection in a thread and calls the listeners of each
channel, so another replica's gateway reloads (and its clients get ``tools/list_changed``) and
its page shows a consent without waiting for the next poll. The polling stays: on SQLite it is
the only way, and here it is the fallback while the feed reconnects (a lost connection is logged
by its cause and retried with a growing pause).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

__all__ = ["CHANGES_CHANNEL", "PENDING_CHANNEL", "ChangeFeed", "notify"]

log = logging.getLogger(__name__)

CHANGES_CHANNEL = "mcp_setup_changes"
PENDING_CHANNEL = "mcp_setup_pending"
_CHANNELS = (CHANGES_CHANNEL, PENDING_CHANNEL)


def notify(s: Session, channel: str) -> None:
    """``NOTIFY channel`` in ``s``'s transaction (sent at its commit); nothing on SQLite."""
    if channel in _CHANNELS and s.get_bind().dialect.name == "postgresql":
        s.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


class ChangeFeed:
    """Listens on ``engine``'s database (PostgreSQL only) and calls each channel's listeners."""

    def __init__(self, engine: Engine, *, max_pause: float = 5.0) -> None:
        self._engine = engine
        self._listeners: dict[str, list[Callable[[], None]]] = {c: [] for c in _CHANNELS}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._max_pause = max_pause
        self.listening = threading.Event()  # set while LISTEN is in effect (tests, the bench)

    @property
    def available(self) -> bool:
        return self._engine.dialect.name == "postgresql"

    def add_listener(self, channel: str, listener: Callable[[], None]) -> None:
        """``listener()`` (in the feed's thread) after each notification on ``channel``."""
        self._listeners[channel].append(listener)

    def start(self) -> None:
        if not self.available or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="mcp-setup-change-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        pause = 0.1
        while not self._stop.is_set():
            try:
                self._listen()
                pause = 0.1
            except Exception as exc:  # noqa: BLE001 - the polling goes on meanwhile
                self.listening.clear()
                log.warning("change feed: listening failed (%s); polling until it is back", type(exc).__name__)
                self._stop.wait(pause)
                pause = min(pause * 2, self._max_pause)

    def _listen(self) -> None:
        with self._engine.connect() as conn:
            raw = conn.connection.driver_connection  # psycopg's own connection: notifies()
            raw.autocommit = True
            for channel in _CHANNELS:
                raw.execute(f"LISTEN {channel}")
            self.listening.set()
            self._fire(CHANGES_CHANNEL)  # anything missed while not listening: look once
            while not self._stop.is_set():
                for note in raw.notifies(timeout=0.5, stop_after=64):
                    self._fire(note.channel)
            for channel in _CHANNELS:
                raw.execute(f"UNLISTEN {channel}")

    def _fire(self, channel: str) -> None:
        for listener in list(self._listeners.get(channel, ())):
            try:
                listener()
            except Exception:  # noqa: BLE001 - one listener never stops the feed
                log.exception("change feed listener failed")
