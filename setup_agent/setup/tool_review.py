"""Changed tool lists go to the user: :class:`ToolReview` opens a consent of action ``tools_change``
for each installed server whose live tools differ from its pin (rules: :mod:`setup_agent.store.pins`),
and applies the user's answer to the store. Nothing the agent can call reaches it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from setup_agent.store import diff_tools

from .consent_request import ConsentRequest, fingerprint

if TYPE_CHECKING:
    from setup_agent.store import InstalledServer

    from .consent import ConsentBroker, PendingConsent

__all__ = ["ToolReview", "tools_change_request"]

log = logging.getLogger(__name__)

_SHOWN_TEXT = 2000


class InstalledList(Protocol):
    """The installed servers (the store's ``servers`` repository)."""

    def list(self) -> list[InstalledServer]: ...


class PinAnswers(Protocol):
    """The user's answer to a changed tool list (the store's ``pins`` repository)."""

    def approve_tools(self, server_id: str, live_hash: str, *, actor: str) -> object: ...

    def reject_tools(self, server_id: str, live_hash: str, *, actor: str) -> object: ...


class PinDecisions(Protocol):
    """The store's side of a review: the installed servers and the user's answer to a change."""

    @property
    def servers(self) -> InstalledList: ...

    @property
    def pins(self) -> PinAnswers: ...


def tools_change_request(server: InstalledServer) -> ConsentRequest:
    """The :class:`~setup_agent.setup.consent_request.ConsentRequest` (action ``tools_change``) for an installed
    server's changed tool list (``server``: a store record)."""
    pinned = {t.get("name"): t for t in server.pinned_tools}
    diff = diff_tools(server.pinned_tools, server.live_tools)
    held = set(diff["added"]) | {c["name"] for c in diff["changed"]}
    tools = []
    for tool in server.live_tools:
        name = tool.get("name")
        if name not in held:
            continue
        old = pinned.get(name) or {}
        tools.append(
            {
                "name": str(name)[:64],
                "change": "changed" if old else "added",
                "description": str(tool.get("description") or "")[:_SHOWN_TEXT],
                "pinned_description": str(old.get("description") or "")[:_SHOWN_TEXT] if old else None,
                "inputSchema": json.dumps(tool.get("inputSchema"), sort_keys=True)[:_SHOWN_TEXT],
            }
        )
    change = {
        "server_id": server.server_id,
        "pinned_hash": server.pinned_hash,
        "live_hash": server.live_hash,
        "diff": diff,
        "tools": tools[:20],
    }
    fp = fingerprint({"tools_change": server.server_id, "live": server.live_hash, "pinned": server.pinned_hash})
    return ConsentRequest(
        server=server.title or server.qualified_name,
        version=server.version,
        action="tools_change",
        package_type=server.package_type,
        package=server.qualified_name,
        runner=None,
        sha256=None,
        transport=str(server.launch_spec.get("transport") or ""),
        command_line=[],
        url=None,
        env={},
        headers={},
        secrets=[],
        destinations=[],
        warnings=[],
        fingerprint=fp,
        tools_change=change,
    )


class ToolReview:
    """Asks the user, out of band, about each server whose live tools differ from its pin.

    ``open_consent(server)`` opens a consent of action ``tools_change`` in the broker (one per
    server and live list); when the user answers it, the store approves or rejects the list
    with the answering face as the actor. The agent has no tool that reaches this.
    """

    def __init__(
        self,
        store: PinDecisions,
        consents: ConsentBroker | None,
        *,
        on_request: Callable[[PendingConsent], None] | None = None,
    ) -> None:
        self.store = store
        self.consents = consents
        self.on_request = on_request
        self._lock = threading.Lock()
        self._open: dict[str, tuple[str, str]] = {}  # consent_id -> (server_id, live_hash)
        self._unsubscribe = consents.subscribe(self._on_event) if consents is not None else (lambda: None)

    def close(self) -> None:
        self._unsubscribe()

    def sync(self) -> list[str]:
        """Open a consent for every server with a change waiting; returns their consent ids."""
        return [cid for s in self.store.servers.list() if s.tools_state == "changed" and (cid := self.ask(s))]

    def ask(self, server: InstalledServer) -> str | None:
        """Open (or find) the consent for ``server``'s waiting change; None without a broker."""
        if self.consents is None or server.tools_state != "changed" or not server.live_hash:
            return None
        request = tools_change_request(server)
        pending = self.consents.open(request)
        with self._lock:
            self._open[pending.consent_id] = (server.server_id, server.live_hash)
        if self.on_request is not None:
            try:
                self.on_request(pending)
            except Exception:  # noqa: BLE001 - a face failing to show it never breaks a connect
                log.exception("showing a tool-list change failed")
        return pending.consent_id

    def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("type") != "consent_done":
            return
        with self._lock:
            entry = self._open.pop(str(event.get("consent_id")), None)
        if entry is None:
            return
        server_id, live_hash = entry
        by = str(event.get("by") or "consent")
        actor = by if ":" in by else "user:" + by  # the principal that answered (user:web, token:NAME)
        try:
            if event.get("status") == "approved":
                self.store.pins.approve_tools(server_id, live_hash, actor=actor)
            elif event.get("status") == "denied":
                self.store.pins.reject_tools(server_id, live_hash, actor=actor)
        except Exception as exc:  # noqa: BLE001 - e.g. the list changed again: a new consent follows
            log.warning(
                "the answer to the tool-list change of %s was not applied (%s)",
                server_id,
                getattr(exc, "code", type(exc).__name__),
            )
