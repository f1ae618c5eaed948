"""A starting server's stderr, line by line, for the person watching a test.

:class:`StderrLines` is a ``ProcessWatch.on_stderr`` hook: it cuts the chunks into lines,
redacts each whole line (before it is shortened, so no part of a secret survives a cut), and
hands them to an async ``emit``. The first ``first`` lines go out as they come; after that at
most one line per ``every`` seconds, always the latest, so a chatty server cannot flood the
page. The redacted line still passes the progress event's own redaction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["StderrLines"]

logger = logging.getLogger(__name__)

MAX_LINE_CHARS = 300
MAX_PARTIAL_BYTES = 16_384  # a line without an end is cut here (and redacted like any other)


class StderrLines:
    def __init__(
        self,
        emit: Callable[[str], Awaitable[None]],
        redact: Callable[[str], str],
        *,
        first: int = 20,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit, self.redact, self.first, self.every, self.clock = emit, redact, first, every, clock
        self._partial = b""
        self._sent = 0
        self._last_sent = float("-inf")
        self._latest: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def __call__(self, chunk: bytes) -> None:
        if self._closed:
            return
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > MAX_PARTIAL_BYTES:
            lines.append(self._partial)
            self._partial = b""
        for raw in lines:
            text = raw.decode("utf-8", "replace").strip()
            if text:
                self._latest = self.redact(text)[:MAX_LINE_CHARS]
                self._offer()

    def close(self) -> None:
        """No more lines (the probe is over); a pending throttled line is dropped."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _offer(self) -> None:
        wait = self._last_sent + self.every - self.clock()
        if self._sent < self.first or wait <= 0:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        line, self._latest = self._latest, None
        if line is None or self._closed:
            return
        self._sent += 1
        self._last_sent = self.clock()
        task = asyncio.get_running_loop().create_task(self._send(line))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, line: str) -> None:
        try:
            await self.emit(line)
        except Exception:  # a progress listener never breaks a probe
            logger.exception("stderr progress listener failed")
