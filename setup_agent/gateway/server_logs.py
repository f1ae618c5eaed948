"""Each installed server's recent stderr, redacted, in a small rolling file per server.

The connection manager keeps a stderr tail in memory for its own error reports; a person's
``mcp-setup logs NAME`` runs in another process, so the manager also appends each complete
stderr line, redacted in strict mode (every stored and live secret of every server, short
ones as whole tokens), to ``<logs_dir>/<server_id>.log``. When the file passes
:data:`MAX_LOG_BYTES` it is renamed to ``<server_id>.log.1`` (one old generation kept) and a
new one is started. A partial line (no newline yet) is held in memory, at most
:data:`MAX_LINE_BYTES`, so a secret is never split across two redaction passes.

Reading (:func:`read_log`) needs only the standard library and the path.

A removed server's log goes (:func:`delete_log`) and stays gone: the connection calls
:meth:`ServerLog.discard` before it stops the process, so the lines a stopping server still
prints (``stdin closed``) do not recreate the file.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from setup_agent.secrets import Redactor

__all__ = ["MAX_LOG_BYTES", "MAX_LINE_BYTES", "ServerLog", "delete_log", "log_path", "read_log"]

logger = logging.getLogger(__name__)

MAX_LOG_BYTES = 256 * 1024
MAX_LINE_BYTES = 8192


def log_path(logs_dir: Path, server_id: str) -> Path:
    return Path(logs_dir) / f"{server_id}.log"


def delete_log(logs_dir: Path, server_id: str) -> None:
    """Delete the server's log, both generations (missing is fine)."""
    path = log_path(logs_dir, server_id)
    for p in (path, path.with_name(path.name + ".1")):
        p.unlink(missing_ok=True)


class ServerLog:
    """Appends one server's stderr to its log file, line by line, redacted."""

    def __init__(self, logs_dir: Path, server_id: str, redactor: Redactor) -> None:
        self.path = log_path(logs_dir, server_id)
        self.redactor = redactor
        self._partial = b""
        self._broken = False

    def feed(self, chunk: bytes) -> None:
        if self._broken:
            return
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE_BYTES:  # an endless line: write it as one, cut
            lines.append(self._partial[:MAX_LINE_BYTES])
            self._partial = b""
        if lines:
            self._write(lines)

    def close(self) -> None:
        if self._partial and not self._broken:
            self._write([self._partial])
        self._partial = b""

    def discard(self) -> None:
        """The server is removed: write nothing more, not even the held partial line."""
        self._partial = b""
        self._broken = True

    def _write(self, lines: list[bytes]) -> None:
        text = "".join(self.redactor.redact(line.decode("utf-8", "replace"), strict=True) + "\n" for line in lines)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self.path.exists() and self.path.stat().st_size > MAX_LOG_BYTES:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:  # a full disk must not stop a server
            logger.warning("cannot write the server log %s: %s", self.path, exc.strerror)
            self._broken = True


def read_log(logs_dir: Path, server_id: str, lines: int = 50) -> list[str]:
    """The last ``lines`` lines of the server's log (the older generation included when needed)."""
    path = log_path(logs_dir, server_id)
    out: list[str] = []
    for p in (path, path.with_name(path.name + ".1")):
        if len(out) >= lines:
            break
        try:
            text = p.read_text("utf-8", "replace")
        except OSError:
            continue
        out = text.splitlines()[-(lines - len(out)) :] + out
    return out[-lines:] if lines else []
