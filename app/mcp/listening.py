"""``subscriptions/listen`` (2026-07-28) in the MCP face: list changes, and installed servers'
resource updates, on one stream per request.

The SDK's own handler (``mcp.server.subscriptions.ListenHandler``) acknowledges the resource
URIs a client names and never hears of them: the gateway must subscribe to each at the server
that has it, as ``resources/subscribe`` does on 2025-11-25 (offered.py). :class:`Listen`
serves the stream as the SDK's does (the acknowledgement first, every frame stamped with the
subscription id, only what was asked), and in that order: it hears the face's events first,
then acknowledges, then subscribes the URIs at their servers (an update a server sends at once
is not lost), and unsubscribes them when the stream ends.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, InMemorySubscriptionBus, ServerEvent
from mcp.shared.subscriptions import event_matches, event_to_notification
from mcp_types import (
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)

from setup_agent.errors import JSONRPC_INTERNAL_ERROR

__all__ = ["Listen"]

logger = logging.getLogger(__name__)

#: Events one stream may have waiting before it is ended (its client re-listens and reads again).
MAX_BUFFERED = 1024
#: How long the end of a stream waits for its servers to take the unsubscriptions.
UNSUBSCRIBE_SECONDS = 5.0


class Listen:
    """The face's ``on_subscriptions_listen``: ``offered`` (offered.py) subscribes the resource
    URIs at their servers and publishes their updates on ``bus``."""

    def __init__(self, bus: InMemorySubscriptionBus, offered: Any) -> None:
        self._bus = bus
        self._offered = offered

    async def __call__(self, ctx: Any, params: SubscriptionsListenRequestParams) -> SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(JSONRPC_INTERNAL_ERROR, "subscriptions/listen needs a request id")
        asked = params.notifications
        uris = list(dict.fromkeys(asked.resource_subscriptions or ()))
        honored = SubscriptionFilter(
            tools_list_changed=True if asked.tools_list_changed else None,
            prompts_list_changed=True if asked.prompts_list_changed else None,
            resources_list_changed=True if asked.resources_list_changed else None,
            resource_subscriptions=uris or None,
        )
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, receive = anyio.create_memory_object_stream[ServerEvent](MAX_BUFFERED)

        def deliver(event: ServerEvent) -> None:
            if event_matches(honored, frozenset(uris), event):
                try:
                    send.send_nowait(event)
                except (anyio.WouldBlock, anyio.ClosedResourceError):
                    send.close()  # a client that stopped reading: the stream ends

        unsubscribe = self._bus.subscribe(deliver)
        held: list[Any] = []
        try:
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=subscription_id,
            )
            held = await self._offered.listen_to(uris)
            async for event in receive:
                await ctx.session.send_notification(
                    event_to_notification(event, meta), related_request_id=subscription_id
                )
        finally:
            unsubscribe()
            send.close()
            receive.close()
            with anyio.move_on_after(UNSUBSCRIBE_SECONDS, shield=True):
                await self._offered.stop_listening(held)
        return SubscriptionsListenResult(_meta=meta)
