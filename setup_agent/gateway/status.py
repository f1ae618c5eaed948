"""A live server's status as the faces show it (:class:`ServerStatus`): a plain record, light to
import (``mcp-setup tools`` builds its registry with it, without the connection layer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ServerStatus", "Status"]

Status = Literal["connecting", "connected", "failed", "stopped", "needs_sign_in"]


@dataclass
class ServerStatus:
    server_id: str
    status: Status = "connecting"
    reason: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    #: The stable error code of the last failure (``exited``, ``timeout``, ``rejected``, …).
    code: str | None = None

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "tools": self.tools}
        if self.reason:
            out["reason"] = self.reason
        return out
