"""Prompts, resources, resource templates and completions in the MCP face.

The face's own resources are the agents' prompt assets (``mcp-setup://prompts/agents/<id>``);
after them come the installed servers' resources and templates, and their approved prompts
as ``<slug>__<prompt>`` (setup_agent/gateway/offers.py: URI collisions, routing, pins). A read
of any other URI goes to the server that listed it or whose tool result named it. Every answer
of a server comes back redacted; its own errors come back with their code, redacted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.subscriptions import ResourceUpdated

from setup_agent.agent import load_archetypes
from setup_agent.errors import JSONRPC_INVALID_PARAMS, RequestStateInvalid, SetupError

from .gateway_tools import read_installed
from .passing import LIST_ENVELOPE, ClientCaller

__all__ = ["Offered", "PROMPT_URI_PREFIX"]

PROMPT_URI_PREFIX = "mcp-setup://prompts/agents/"
#: A listen stream's subscription of one URI: (server id, URI at the server), its token, the URI it named.
Hold = tuple[tuple[str, str], object, str]
_COMPLETE = {"resultType": "complete"}

logger = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def _server_errors(gateway: Any, unknown: str) -> AsyncIterator[None]:
    """The gateway's refusals as JSON-RPC errors: an unknown name, a guard's refusal, the
    server's own error (redacted)."""
    from setup_agent.gateway import UnknownPrompt, UnknownResource

    try:
        yield
    except (UnknownPrompt, UnknownResource):
        raise MCPError(JSONRPC_INVALID_PARAMS, unknown) from None
    except RequestStateInvalid as exc:
        raise MCPError(JSONRPC_INVALID_PARAMS, exc.message) from None
    except SetupError as exc:
        raise MCPError(JSONRPC_INVALID_PARAMS, gateway.redactor.redact(exc.message)) from None
    except MCPError as exc:
        raise MCPError(exc.error.code, gateway.redactor.redact(exc.error.message)) from None


class Offered:
    """The face's handlers for prompts, resources and completions."""

    def __init__(
        self, face: Any, principal: Callable[[Any], Any], publish: Callable[[Any], Awaitable[None]] | None = None
    ) -> None:
        self.face = face  # the McpFace (face.py): its catalog and runtime
        self.principal = principal  # request -> its Principal (face.request_principal)
        #: (server id, URI at the server) -> {client connection: (its session, the URI it subscribed to)}
        self.subscribers: dict[tuple[str, str], dict[Any, tuple[Any, str]]] = {}
        #: ``await publish(event)``: an event to the 2026-07-28 listen streams (listening.py).
        self.publish = publish
        #: (server id, URI at the server) -> {a listen stream's hold: the URI it named}
        self.listened: dict[tuple[str, str], dict[object, str]] = {}

    async def _gateway(self) -> Any:
        """The gateway, or None while no enabled server is installed (no core started for it)."""
        catalog = await self.face.catalog()
        if not any(s.enabled for s in catalog.servers):
            return None
        return (await self.face.runtime()).gateway

    async def list_prompts(self, ctx: Any, params: Any) -> dict[str, Any]:
        gateway = await self._gateway()
        return {**LIST_ENVELOPE, "prompts": await gateway.list_prompts() if gateway is not None else []}

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> dict[str, Any]:
        gateway = await self._gateway()
        if gateway is None:
            raise MCPError(JSONRPC_INVALID_PARAMS, "Unknown prompt: prompts/list lists them.")
        who = self.principal(ctx).guard_key
        async with _server_errors(gateway, "Unknown prompt: prompts/list lists them."):
            result = await gateway.get_prompt(
                params.name, dict(params.arguments or {}), session=who, caller=ClientCaller.of(ctx, who, params)
            )
        return {**_COMPLETE, **result}

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> dict[str, Any]:
        gateway = await self._gateway()
        empty = {**_COMPLETE, "completion": {"values": [], "hasMore": False}}
        if gateway is None:
            return empty
        ref = params.ref.model_dump(mode="json", by_alias=True, exclude_none=True)
        argument = params.argument.model_dump(mode="json", by_alias=True, exclude_none=True)
        context = params.context.arguments if params.context is not None else None
        async with _server_errors(gateway, "Unknown prompt or resource template: the lists name them."):
            result = await gateway.complete(ref, argument, dict(context) if context else None)
        return {**_COMPLETE, **result}

    async def subscribe(self, ctx: Any, params: Any) -> dict[str, Any]:
        """``resources/subscribe`` of an installed server's resource: its updates reach this client."""
        await self._subscription(ctx, str(params.uri), True)
        return {}

    async def unsubscribe(self, ctx: Any, params: Any) -> dict[str, Any]:
        await self._subscription(ctx, str(params.uri), False)
        return {}

    async def _subscription(self, ctx: Any, uri: str, on: bool) -> None:
        """A URI no server has (or whose server takes no subscriptions) is accepted and never
        updated: the face declares ``subscribe`` also with nothing installed."""
        gateway = await self._gateway()
        if gateway is None:
            return
        try:
            async with _server_errors(gateway, "unknown"):
                key = await gateway.subscribe(uri, on)
        except MCPError as exc:
            if exc.error.message == "unknown":
                return
            raise
        connection = getattr(ctx.session, "_connection", ctx.session)
        if on:
            self.subscribers.setdefault(key, {})[connection] = (ctx.session, uri)
        else:
            self.subscribers.get(key, {}).pop(connection, None)

    async def updated(self, server_id: str, uri: str) -> None:
        """A subscribed resource changed at its server: each subscribed client hears it, by the
        URI it subscribed to (2025-11-25: a notification; 2026-07-28: an event on its stream)."""
        for connection, (session, listed) in list(self.subscribers.get((server_id, uri), {}).items()):
            try:
                await session.send_resource_updated(listed)
            except Exception:  # noqa: BLE001 - a client that went away
                self.subscribers[(server_id, uri)].pop(connection, None)
        if self.publish is not None:
            for listed in sorted(set(self.listened.get((server_id, uri), {}).values())):
                await self.publish(ResourceUpdated(uri=listed))

    async def listen_to(self, uris: list[str]) -> list[Hold]:
        """A 2026-07-28 stream names ``uris``: each is subscribed at the server that has it (one
        no server has, or whose server takes no subscriptions, is never updated). Returns the
        holds to give :meth:`stop_listening` when the stream ends."""
        gateway = await self._gateway() if uris else None
        holds: list[Hold] = []
        for uri in uris if gateway is not None else ():
            try:
                async with _server_errors(gateway, "unknown"):
                    key = await gateway.subscribe(uri, True)
            except MCPError as exc:
                if exc.error.message != "unknown":
                    logger.info("subscribing %s for a listen stream failed: %s", uri, exc.error.message)
                continue
            hold = object()
            self.listened.setdefault(key, {})[hold] = uri
            holds.append((key, hold, uri))
        return holds

    async def stop_listening(self, holds: list[Hold]) -> None:
        """A stream ended: its URIs are unsubscribed at their servers, unless another client still
        follows them."""
        gateway = await self._gateway() if holds else None
        for key, hold, uri in holds:
            followers = self.listened.get(key, {})
            followers.pop(hold, None)
            if not followers:
                self.listened.pop(key, None)
            if followers or self.subscribers.get(key) or gateway is None:
                continue
            try:
                await gateway.subscribe(uri, False)
            except Exception as exc:  # noqa: BLE001 - a server gone meanwhile: nothing to undo
                logger.debug("unsubscribing after a listen stream failed: %s", type(exc).__name__)

    async def list_resources(self, ctx: Any, params: Any) -> dict[str, Any]:
        own = [
            {
                "uri": f"{PROMPT_URI_PREFIX}{a.id}",
                "name": f"{a.id} prompt",
                "description": a.description,
                "mimeType": "text/markdown",
            }
            for a in load_archetypes().agents.values()
        ]
        gateway = await self._gateway()
        return {**LIST_ENVELOPE, "resources": own + (await gateway.list_resources() if gateway is not None else [])}

    async def list_resource_templates(self, ctx: Any, params: Any) -> dict[str, Any]:
        gateway = await self._gateway()
        templates = await gateway.list_resource_templates() if gateway is not None else []
        return {**LIST_ENVELOPE, "resourceTemplates": templates}

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        if not uri.startswith(PROMPT_URI_PREFIX):  # an installed server's, listed or linked
            return await read_installed(await self.face.runtime(), uri)
        agent_id = uri.removeprefix(PROMPT_URI_PREFIX)
        registry = load_archetypes()
        if agent_id not in registry.agents:
            raise MCPError(JSONRPC_INVALID_PARAMS, "Unknown resource: resources/list lists them.")
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type="text/markdown", text=registry.agents[agent_id].prompt)
            ]
        )
