"""What the MCP face passes to its client as it comes: the ``initialize`` answer's
``listChanged`` on every transport (:class:`FaceServer`), the envelope of a plain-JSON
``tools/list``, and progress (an installed server's, or a setup tool's stages) sent under the
client's own ``progressToken``, and the client of a call as the gateway's relay of an installed
server's requests sees it (:class:`ClientCaller`).
"""

from __future__ import annotations

import logging
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions

__all__ = ["LIST_ENVELOPE", "NOTIFICATIONS", "ClientCaller", "FaceServer", "progress_forwarder", "stage_progress"]

logger = logging.getLogger(__name__)

Forward = Callable[[float, float | None, str | None], Any]

#: What a ``tools/list`` answer carries besides its tools (the SDK model's defaults: no cache,
#: a complete result); the older protocol versions drop them again.
LIST_ENVELOPE: dict[str, Any] = {"ttlMs": 0, "cacheScope": "private", "resultType": "complete"}

#: The change notifications the face sends (tools from installs, prompts and resources of
#: installed servers): said in every ``initialize`` answer, whichever transport asks.
NOTIFICATIONS = NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)


class FaceServer(Server[Any]):
    """The SDK server whose ``initialize`` answer says ``listChanged`` on every transport: the
    streamable-HTTP manager (``/mcp``) builds it from ``create_initialization_options()``
    without arguments, which would say ``false``. It declares ``logging``: a
    client's ``logging/setLevel`` goes to :attr:`on_level` (the gateway forwards it), and that
    client then hears installed servers' log messages sent outside calls (:meth:`server_log`)."""

    def __init__(self, *args: Any, on_level: Callable[[str], Any] | None = None, **kwargs: Any) -> None:
        with warnings.catch_warnings():  # deprecated at 2026-07-28 only; 2025-era clients use it
            warnings.filterwarnings("ignore", message="The logging capability is deprecated")
            super().__init__(*args, on_set_logging_level=self._set_level, **kwargs)
        self.on_level = on_level
        #: The clients that asked for logs (``logging/setLevel``): connection -> its latest session.
        self.log_sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    async def _set_level(self, ctx: Any, params: Any) -> dict[str, Any]:
        connection = getattr(getattr(ctx, "session", None), "_connection", None)
        if connection is not None:
            self.log_sessions[connection] = ctx.session
        if self.on_level is not None:
            await self.on_level(str(params.level))
        return {}

    async def server_log(self, server: Any, params: dict[str, Any]) -> None:
        """An installed server's log message sent outside any call (redacted, bounded by the
        gateway): to every client that asked for logs, under the server's slug as logger."""
        for connection, session in list(self.log_sessions.items()):
            try:
                with warnings.catch_warnings():  # deprecated at 2026-07-28 only; 2025-era clients use it
                    warnings.filterwarnings("ignore", message="The logging capability is deprecated")
                    await session.send_log_message(
                        params.get("level", "info"), params.get("data"), params.get("logger") or server.slug
                    )
            except Exception as exc:  # a client that went away
                logger.debug("log message not delivered: %s", type(exc).__name__)
                self.log_sessions.pop(connection, None)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        return super().create_initialization_options(
            notification_options or NOTIFICATIONS, experimental_capabilities, extensions
        )


def _progress_token(ctx: Any) -> Any:
    """The client's ``_meta.progressToken`` of this request, or None."""
    meta = getattr(ctx, "meta", None)
    if isinstance(meta, dict):
        return meta.get("progress_token", meta.get("progressToken"))
    return getattr(meta, "progress_token", None) if meta is not None else None


def progress_forwarder(ctx: Any) -> Forward | None:
    """Sends ``notifications/progress`` to this request's client under its own token (None when
    it asked for no progress): an installed server's progress, or a setup tool's stages."""
    if _progress_token(ctx) is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.session.report_progress(progress, total, message)
        except Exception as exc:  # a client that went away must not break the call
            logger.debug("progress not delivered: %s", type(exc).__name__)

    return forward


def stage_progress(forward: Forward | None) -> Any:
    """The core's stage events of a test or install (already redacted, see
    setup_agent/setup/call_context.py) as progress notifications: one step each, a message
    such as ``installing io.x/y: starting (started)``."""
    if forward is None:
        return None
    steps = 0

    async def on_event(event: dict[str, Any]) -> None:
        nonlocal steps
        steps += 1
        what = " ".join(str(event[k]) for k in ("action", "server") if event.get(k))
        text = f"{what}: {event.get('stage')} ({event.get('status')})"
        if event.get("message"):
            text += f": {event['message']}"
        await forward(float(steps), None, text)

    return on_event


class ClientCaller:
    """The client of one request, as the gateway's relay sees it (setup_agent/gateway/relay.py):
    what it declared, and the requests and log messages an installed server sends during the
    call, sent to it as related to this request. ``principal`` is who the client is (the
    guard counts a protected value in its answers to a server against it)."""

    def __init__(self, ctx: Any, principal: str | None = None, retry: Any = None) -> None:
        self.ctx, self.principal = ctx, principal
        #: The call's ``inputResponses`` and ``requestState`` when it retries an input-required
        #: answer (``InputRetry``, setup_agent/gateway/input_required.py), else None.
        self.retry = retry
        # The client's connection (the SDK makes a session object per request; they share it):
        # its calls are one client's (relay.py).
        session = ctx.session
        self.client = getattr(session, "_connection", None) or session

    @classmethod
    def of(cls, ctx: Any, principal: str | None, params: Any) -> ClientCaller:
        """The client of the request ``params`` (a ``tools/call`` or ``prompts/get``), with its
        ``inputResponses`` and ``requestState`` when it retries an input-required answer."""
        from setup_agent.gateway import InputRetry

        responses = getattr(params, "input_responses", None) or {}
        state = getattr(params, "request_state", None)
        if not responses and state is None:
            return cls(ctx, principal)
        dumped = {
            key: value.model_dump(mode="json", by_alias=True, exclude_none=True)
            if hasattr(value, "model_dump")
            else value
            for key, value in responses.items()
        }
        return cls(ctx, principal, InputRetry(dumped, state))

    @property
    def modern(self) -> bool:
        """Whether this request is 2026-07-28 or later: no server requests, input-required results."""
        return str(getattr(self.ctx, "protocol_version", "")) >= "2026"

    def can(self, capability: str) -> bool:
        """Whether a server's request needing ``capability`` may be sent to it during the call."""
        return not self.modern and self.declares(capability)

    def declares(self, capability: str) -> bool:
        """Whether the client declared ``capability`` (whatever its era)."""
        caps = getattr(self.ctx.session, "client_capabilities", None)
        if caps is None:
            return False
        if capability in ("sampling", "roots"):
            return getattr(caps, capability, None) is not None
        elicitation = getattr(caps, "elicitation", None)
        if elicitation is None:
            return False
        if capability == "elicitation.url":
            return elicitation.url is not None
        return elicitation.form is not None or elicitation.url is None  # `elicitation: {}` means form

    def capabilities(self) -> dict[str, Any]:
        """What the client declared that an installed server may use through the gateway
        (sampling, elicitation, roots), as the wire says it: what the server is told."""
        caps = getattr(self.ctx.session, "client_capabilities", None)
        if caps is None:
            return {}
        dumped = caps.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {k: v for k, v in dumped.items() if k in ("sampling", "elicitation", "roots")}

    def when_gone(self, callback: Callable[[], None]) -> bool:
        """``callback()`` once this client's connection closes (its session ended); False when
        that cannot be known (then it is never called)."""
        stack = getattr(self.client, "exit_stack", None)
        if stack is None:
            return False
        stack.callback(callback)
        return True

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        import mcp_types as types
        from mcp.shared.message import ServerMessageMetadata
        from pydantic import TypeAdapter

        meta = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        session = self.ctx.session
        if method == "sampling/createMessage":
            request: Any = types.CreateMessageRequest(params=types.CreateMessageRequestParams.model_validate(params))
            return await session.send_request(request, types.CreateMessageResult, metadata=meta)
        if method == "elicitation/create":
            typed = TypeAdapter(types.ElicitRequestParams).validate_python(params)
            return await session.send_request(types.ElicitRequest(params=typed), types.ElicitResult, metadata=meta)
        assert method == "roots/list"
        return await session.send_request(types.ListRootsRequest(), types.ListRootsResult, metadata=meta)

    async def log(self, params: dict[str, Any]) -> None:
        with warnings.catch_warnings():  # deprecated at 2026-07-28 only, where it is sent on the request's stream
            warnings.filterwarnings("ignore", message="The logging capability is deprecated")
            await self.ctx.session.send_log_message(
                params.get("level", "info"),
                params.get("data"),
                params.get("logger"),
                related_request_id=self.ctx.request_id,
            )
