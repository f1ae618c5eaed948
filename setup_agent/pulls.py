"""Pulls: what another process answered, brought in before a local read.

A secret typed in ``mcp-setup approve``, a consent approved on another ``serve``'s page, an
unblock given in a terminal: each waits in the store until the process that asked reads it.
That process's refs, consents and guard keep a :class:`Pulls` and run it before they read; a
pull that fails (the database unreachable) is logged by its cause and never breaks the read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["Pulls"]


class Pulls:
    def __init__(self, what: str, logger: logging.Logger) -> None:
        self.what = what
        self.log = logger
        self._pulls: list[Callable[[], None]] = []

    def add(self, pull: Callable[[], None]) -> None:
        self._pulls.append(pull)

    def __bool__(self) -> bool:
        return bool(self._pulls)

    def run(self) -> None:
        for pull in list(self._pulls):
            try:
                pull()
            except Exception as exc:  # noqa: BLE001 - an answer from elsewhere failing never breaks a local read
                self.log.warning("reading %s failed (%s)", self.what, getattr(exc, "code", type(exc).__name__))
