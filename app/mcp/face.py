"""``mcp-setup mcp``: the stdio MCP server face exposing the ``mcp_setup_*`` tools.

It is also the gateway: after its own seven tools it lists every tool of every installed and
enabled server as ``<slug>__<tool>`` (see :mod:`setup_agent.store.catalog`), read from the store so a
client sees them at once, and forwards calls to that server, started on its first call. When
the list changes (an install, a removal, enable/disable, in this process or any other on the
data dir) every client is told: ``notifications/tools/list_changed`` on 2025-era sessions, a
``subscriptions/listen`` event on 2026-07-28 ones.

Conventions (shared with the seed MCP server): logs go to stderr only; ``initialize``
advertises tools, prompts and resources (``listChanged: true``), completions and logging
(installed servers' prompts, resources and completions pass through: ``offered.py``); what it installs is audited under the
principal of the credential (:func:`request_principal`: ``client:stdio``, or over ``/mcp`` the
named token ``token:NAME``), with the client's ``clientInfo.name`` only as a hint beside it; the
agents' prompt assets are resources ``mcp-setup://prompts/agents/<id>``; secret prompts use
URL-mode elicitation to a one-time local page when the client supports it.

The stdio plumbing (:func:`~app.mcp.stdio.run_stdio`) is in ``stdio.py``; ``/mcp`` of ``serve`` is in ``app/web/app.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import weakref
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)

from setup_agent.errors import (
    JSONRPC_INTERNAL_ERROR,
    JSONRPC_INVALID_PARAMS,
    OAuthDenied,
    PromptCancelled,
    PromptFailed,
)
from setup_agent.principals import SCOPE_KEY, Principal, client_hint
from setup_agent.setup import TOOL_NAMES
from setup_agent.store import Catalog

from .gateway_tools import call_installed, face_listing, install_hint, used_tool
from .listening import Listen
from .mrtr import Mrtr
from .offered import PROMPT_URI_PREFIX, Offered
from .paging import DEFAULT_PAGE_SIZE, page
from .passing import LIST_ENVELOPE, NOTIFICATIONS, ClientCaller, FaceServer, progress_forwarder, stage_progress
from .user_channel import has_browser, open_in_browser

if TYPE_CHECKING:
    from app.runtime import Runtime
    from setup_agent.secrets import PendingPrompt

__all__ = ["PROMPT_URI_PREFIX", "McpFace", "provenance_label", "request_principal"]

logger = logging.getLogger(__name__)


def _connection(ctx: Any) -> Any:
    """The client connection behind a request (the SDK makes a new session object per request;
    its ``_connection`` is the one they share), or None."""
    return getattr(getattr(ctx, "session", None), "_connection", None)


def request_principal(ctx: Any) -> Principal:
    """Who sent this request, from the credential: over ``/mcp`` the web guard's principal (a
    client token is that client, a named token its member; the page link's key never gets here,
    and were it to, it would count as an unnamed HTTP client, never the user), over stdio the
    local client. What the client calls itself is only the hint beside it."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None) if params is not None else None
    hint = client_hint(getattr(info, "name", None))
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    principal = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(principal, Principal):
        return Principal.client("stdio", hint)
    if principal.kind == "user":
        return Principal.client("http", hint)
    return principal.with_hint(hint)


def provenance_label(client_name: str | None) -> str:
    """A stdio client's provenance: ``Claude Desktop`` → ``mcp:claude-desktop``; none → ``mcp``."""
    return Principal.client("stdio", client_hint(client_name)).provenance


class McpFace:
    """Builds the low-level SDK server; the :class:`Runtime` may arrive after it started serving."""

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        version: str = "0.1.0",
        early_catalog: Callable[[], Catalog | None] | None = None,
        page_url: Callable[[str], str] | None = None,
        consent_url: Callable[[str], str] | None = None,
        gateway_tools: str | None = None,
        tools_budget: int | None = None,
        tools_page_size: int | None = None,
        early_recent: Callable[[], Sequence[str]] | None = None,
        early_budget: Callable[[], int] | None = None,
    ) -> None:
        self.gateway_tools = gateway_tools  # all | discover; None: the runtime's MCP_SETUP_GATEWAY_TOOLS
        #: Tokens, set for this face (MCP_SETUP_TOOLS_BUDGET in its environment); None: the
        #: gateway's (the page's saved budget, else the default), before the core the store's file.
        self.tools_budget = tools_budget
        self._listed: frozenset[str] | None = None  # the tools the last tools/list showed
        #: Whether the budget left installed tools out of the last tools/list (only then can a call
        #: change what is listed).
        self._left_out = False
        self._early_recent = early_recent  # before the core: the tools used, from the store's file
        self._early_budget = early_budget
        #: Tools per tools/list page (paging.py); None: the runtime's MCP_SETUP_TOOLS_PAGE_SIZE.
        self.tools_page_size = tools_page_size
        self._runtime: asyncio.Future[Runtime] = asyncio.get_running_loop().create_future()
        #: Set by the first request that needs the core (see app/mcp/stdio.py: run_stdio).
        self.core_wanted = asyncio.Event()
        self._early_catalog = early_catalog
        self._page_url_for = page_url
        self._consent_url_for = consent_url
        # The latest session of each connection (the SDK makes one per request; a finished
        # request's session still reaches its connection's standalone channel), kept as long
        # as the connection lives.
        self._sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._bus = InMemorySubscriptionBus()
        self._page: Any = None
        self.offered = Offered(self, request_principal, self._bus.publish)  # prompts, resources, completions
        self.mrtr = Mrtr()  # secret prompts on 2026-07-28 sessions (mrtr.py)
        self.server: Server[Any] = FaceServer(
            "mcp-setup",
            version=version,
            instructions=(
                "Use these tools to find, configure, test and install MCP servers. Ask for secrets only "
                "with mcp_setup_request_secret; you will get refs, never values."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self.offered.list_resources,
            on_list_resource_templates=self.offered.list_resource_templates,
            on_read_resource=self.offered.read_resource,
            on_subscribe_resource=self.offered.subscribe,
            on_unsubscribe_resource=self.offered.unsubscribe,
            on_list_prompts=self.offered.list_prompts,
            on_get_prompt=self.offered.get_prompt,
            on_completion=self.offered.complete,
            on_level=self._set_level,
            on_subscriptions_listen=Listen(self._bus, self.offered),  # resource URIs too (listening.py)
        )
        self.server.middleware.append(self._track_session)
        if runtime is not None:
            self.provide(runtime)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(NOTIFICATIONS)

    def provide(self, runtime: Runtime) -> None:
        """Hand over the runtime once it is built; waiting tool calls go on."""
        self._runtime.set_result(runtime)
        self.gateway_tools = self.gateway_tools or getattr(runtime.settings, "gateway_tools", None)
        self.tools_page_size = self.tools_page_size or getattr(runtime.settings, "tools_page_size", None)
        runtime.gateway.add_listener(lambda: self.tools_changed(runtime.gateway.last_changes))
        runtime.gateway.connections.server_log.listeners.append(self.server.server_log)  # type: ignore[attr-defined]
        runtime.gateway.connections.resource_updated.listeners.append(self.offered.updated)

    async def _set_level(self, level: str) -> None:
        """A client's ``logging/setLevel``: the gateway forwards it (once the runtime is provided)."""
        if self._runtime.done() and not self._runtime.exception():
            await self._runtime.result().gateway.set_logging_level(level)

    async def _track_session(self, ctx: Any, call_next: Any) -> Any:
        connection = _connection(ctx)
        if connection is not None:
            self._sessions[connection] = ctx.session
        return await call_next(ctx)

    async def tools_changed(self, kinds: Collection[str] = ("tools", "prompts", "resources")) -> None:
        """Tell every client, once, which of its lists changed (``tools``, ``prompts``,
        ``resources``), in both protocol eras."""
        events = {"tools": ToolsListChanged(), "prompts": PromptsListChanged(), "resources": ResourcesListChanged()}
        for kind in kinds:
            await self._bus.publish(events[kind])  # 2026-07-28: subscriptions/listen streams
        for connection, session in list(self._sessions.items()):  # 2025-11-25 (dropped on modern ones)
            try:
                if "tools" in kinds:
                    await session.send_tool_list_changed()
                if "prompts" in kinds:
                    await session.send_prompt_list_changed()
                if "resources" in kinds:
                    await session.send_resource_list_changed()
            except Exception as exc:  # a client that went away
                logger.debug("list_changed not delivered: %s", type(exc).__name__)
                self._sessions.pop(connection, None)

    def failed_to_start(self, exc: BaseException) -> None:
        self._runtime.set_exception(exc)

    async def runtime(self) -> Runtime:
        self.core_wanted.set()
        try:
            return await asyncio.shield(self._runtime)
        except Exception as exc:
            raise MCPError(JSONRPC_INTERNAL_ERROR, "mcp-setup could not start; its log (stderr) says why.") from exc

    # -- tools ------------------------------------------------------------------------
    async def catalog(self) -> Catalog:
        """The installed tools: the gateway's once the core is up; before that, the store's file."""
        if self._runtime.done() and not self._runtime.exception():
            return await self._runtime.result().gateway.ready()
        early = self._early_catalog() if self._early_catalog is not None else None
        if early is not None:
            return early
        return await (await self.runtime()).gateway.ready()

    async def _list_tools(self, ctx: Any, params: Any) -> dict[str, Any]:
        """One page of the tools that fit the budget (paging.py: an invalid cursor is ``-32602``)."""
        cursor = getattr(params, "cursor", None) if params is not None else None
        tools = self._listing(await self.catalog())
        self._listed = frozenset(t["name"] for t in tools)
        shown, after = page(tools, cursor, self.tools_page_size or DEFAULT_PAGE_SIZE)
        return {**LIST_ENVELOPE, "tools": shown, **({"nextCursor": after} if after else {})}

    def _ready(self) -> bool:
        return self._runtime.done() and not self._runtime.exception()

    def budget(self) -> int:
        """The tokens ``tools/list`` may take now (0: no budget)."""
        if self.tools_budget is not None:
            return self.tools_budget
        if self._ready():
            return int(self._runtime.result().gateway.budget.current.tokens)
        return self._early_budget() if self._early_budget is not None else 0

    def _listing(self, catalog: Catalog) -> list[dict[str, Any]]:
        if self._ready():
            recent: Sequence[str] = self._runtime.result().gateway.recent.newest_first()
        else:
            recent = self._early_recent() if self._early_recent is not None else ()
        tools, self._left_out = face_listing(self.gateway_tools, catalog, budget=self.budget(), recent=recent)
        return tools

    async def _listing_moved(self, used: str | None) -> None:
        """A call changed which tools fit the budget (a tool used now is listed first): clients
        re-list once. Nothing is computed when nothing can move: no listing yet, none left out by
        the budget (every tool is listed, whatever was used), or the tool used was listed already
        (moving a listed tool to the front, from among the recent ones or the ones filling the room
        after them, keeps every other choice: each one listed still fits, each one left out still
        does not, since the note is counted at its longest)."""
        if self._listed is None or not self._left_out or used is None or used in self._listed:
            return
        now = frozenset(t["name"] for t in self._listing(await self.catalog()))
        if now != self._listed:
            self._listed = now
            await self.tools_changed(("tools",))

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        arguments = params.arguments or {}
        if not isinstance(arguments, dict):
            raise MCPError(JSONRPC_INVALID_PARAMS, "Tool arguments must be an object.")
        if params.name not in TOOL_NAMES:  # an installed tool, or mcp_setup_find_tools / _call_tool
            return await self._call_installed(ctx, params.name, arguments, params)
        from setup_agent.setup import CallContext

        runtime = await self.runtime()
        # A 2026-07-28 retry after an input-required answer (mrtr.py): a secret prompt's result, or
        # a consent's wait (then the call runs again: the broker remembers the approval).
        resumed = await self.mrtr.resume(ctx, params, runtime)
        if resumed is not None:
            return self._tool_result(resumed)
        asked: dict[str, Any] = {}  # a consent to ask through an input-required answer
        call_ctx = CallContext(
            installed_by=request_principal(ctx).provenance,  # mcp:<client>; the principal goes in the audit
            audited_as=request_principal(ctx).display,
            on_progress=stage_progress(progress_forwarder(ctx)),
            principal=request_principal(ctx).guard_key,  # the guard counts setup and gateway calls together
            present_prompt=lambda p: self._present(ctx, runtime, p),
            present_consent=lambda p: self._present_consent(ctx, runtime, p, asked),
            present_authorization=lambda info: self._present_sign_in(ctx, info, asked),
        )
        result = await runtime.service.call(params.name, arguments, call_ctx)
        if params.name == "mcp_setup_install_and_connect":
            result = install_hint(result)
        if asked.get("shown") and result.get("status") == "authorized":
            await self.mrtr.completed(ctx, asked["shown"])
        needed = self.mrtr.input_required(
            ctx, result, str(arguments.get("key_name", "secret")), asked.get("consent"), asked.get("sign_in")
        )
        if needed is not None:
            return needed  # the client shows the page; the model sees no link
        return self._tool_result(result)

    @staticmethod
    def _tool_result(result: dict[str, Any]) -> Any:
        text = json.dumps(result, ensure_ascii=False)
        is_error = result.get("ok") is False
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=result, is_error=is_error
        )

    async def _call_installed(
        self, ctx: Any, name: str, arguments: dict[str, Any], params: types.CallToolRequestParams | None = None
    ) -> dict[str, Any]:
        from setup_agent.errors import RequestStateInvalid
        from setup_agent.gateway import UnknownTool

        runtime = await self.runtime()
        # The guard counts per principal: a new session of the same credential goes on counting.
        who, progress = request_principal(ctx).guard_key, progress_forwarder(ctx)
        caller = ClientCaller.of(ctx, who, params)
        try:
            result = await call_installed(runtime, name, arguments, session=who, progress=progress, caller=caller)
        except UnknownTool:
            raise MCPError(
                JSONRPC_INVALID_PARAMS, "Unknown tool: no setup tool or installed server has that name."
            ) from None
        except RequestStateInvalid as exc:
            raise MCPError(JSONRPC_INVALID_PARAMS, exc.message) from None
        await self._listing_moved(used_tool(name, arguments))
        # 2026-07-28 wants resultType (a 2025-era server sends none; older sessions drop it).
        return {"resultType": "complete", **result}

    def _page_url(self, runtime: Runtime, pending: PendingPrompt) -> str:
        if self._page_url_for is not None:  # served by the web app itself (mcp-setup serve's /mcp)
            return self._page_url_for(pending.prompt_id)
        return self._page_server(runtime).url_for(pending)

    def _page_server(self, runtime: Runtime) -> Any:
        if self._page is None:
            from app.pages import SecretPageServer

            page = SecretPageServer(
                runtime.broker, port=0, consents=runtime.consents, ttl_seconds=runtime.settings.secret_ttl_seconds
            )
            page.start()
            self._page = page
        return self._page

    async def _present(self, ctx: Any, runtime: Runtime, pending: PendingPrompt) -> dict[str, Any]:
        url = self._page_url(runtime, pending)
        where = f" for {pending.server}" if pending.server else ""
        # At 2026-07-28 a server sends no requests of its own (no back-channel): the result
        # carries the page's URL, as for a client without URL elicitation.
        if _url_elicitation(ctx):
            try:
                result = await ctx.session.elicit_url(
                    f"mcp-setup needs your {pending.key_name}{where}. Open the page to enter it; "
                    "it stays on this computer and is never shown to the assistant.",
                    url,
                    pending.prompt_id,
                    related_request_id=ctx.request_id,
                )
            except Exception as exc:  # the client's error may quote the URL: only its type is logged
                logger.warning("URL elicitation failed (%s); the secret prompt is cancelled", type(exc).__name__)
                with contextlib.suppress(Exception):
                    runtime.broker.cancel(pending.prompt_id, "the client could not show the secret page")
                raise PromptFailed(
                    "The client could not show the secret page (URL elicitation failed). Ask again with "
                    "mcp_setup_request_secret, or have the user enter it in mcp-setup's web page.",
                ) from None
            if result.action != "accept":
                runtime.broker.cancel(pending.prompt_id, "declined by the user")
                raise PromptCancelled(f"The user declined to enter {pending.key_name}.", key=pending.key_name)
            try:
                await runtime.broker.wait(pending.prompt_id, timeout=runtime.settings.secret_prompt_timeout_seconds)
            except TimeoutError:
                return {"status": "pending", "url": url, "message": "The user has not entered it yet."}
            await self.mrtr.completed(ctx, pending.prompt_id)  # notifications/elicitation/complete (2025-11-25)
            return {"status": "answered"}
        return {
            "status": "pending",
            "url": url,
            "message": (  # names nothing the agent gave
                "Ask the user to open this link to enter the secret. The ref works once they "
                "have submitted it; the value is never shown to you."
            ),
        }

    async def _present_consent(self, ctx: Any, runtime: Runtime, pending: Any, asked: dict[str, Any]) -> dict[str, Any]:
        """Ask the user to approve a launch on the one-time page (URL elicitation; on a 2026-07-28
        session an input-required answer, mrtr.py); never via the agent."""
        if self.mrtr.can_ask(ctx):
            page = self._consent_url_for or self._page_server(runtime).consent_url
            asked["consent"] = (pending.consent_id, page(pending.consent_id), pending.request.server)
            return {"status": "pending"}
        if not _url_elicitation(ctx):
            # No out-of-band channel through the client: a link handed to the agent would let the
            # agent approve its own request, so the agent gets none. The page opens in the user's
            # browser instead (when there is one), and `mcp-setup approve` answers it in a terminal.
            if has_browser():
                open_in_browser(self._page_server(runtime).consent_url(pending.consent_id))
            return {"status": "pending"}
        if self._consent_url_for is not None:  # serve's /mcp: its own /secrets/consents/ page
            url = self._consent_url_for(pending.consent_id)
        else:
            url = self._page_server(runtime).consent_url(pending.consent_id)
        result = await ctx.session.elicit_url(
            f"mcp-setup needs your approval to run {pending.request.server}: open the page to see what will run "
            "and where your secrets go.",
            url,
            pending.consent_id,
            related_request_id=ctx.request_id,
        )
        if result.action != "accept":
            from setup_agent.errors import SetupError

            try:
                runtime.consents.deny(pending.consent_id, "declined by the user")
            except SetupError:
                pass  # already answered on the page
            return {}
        try:
            await runtime.consents.wait(pending.consent_id, timeout=runtime.settings.secret_prompt_timeout_seconds)
        except TimeoutError:
            return {"status": "pending"}
        await self.mrtr.completed(ctx, pending.consent_id)
        return {}

    async def _present_sign_in(self, ctx: Any, info: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
        """An OAuth sign-in: URL-mode elicitation to the sign-in page when the client supports it.

        A 2026-07-28 session takes no server requests: it gets an input-required answer (mrtr.py).
        A client without URL elicitation, or whose elicitation fails, gets the link in the result."""
        if self.mrtr.can_ask(ctx):
            asked["sign_in"] = info
            return {"status": "pending"}
        if _url_elicitation(ctx):
            try:
                eid = asked["shown"] = "oauth-" + secrets.token_hex(8)  # completed once signed in (_call_tool)
                result = await ctx.session.elicit_url(
                    info["message"], info["url"], eid, related_request_id=ctx.request_id
                )
            except Exception as exc:  # the client's error may quote the URL: only its type is logged
                logger.warning(
                    "URL elicitation of a sign-in failed (%s); the link goes in the result", type(exc).__name__
                )
                return {"status": "pending", "url": info["url"]}
            if result.action != "accept":
                raise OAuthDenied(f"The user declined to sign in to {info['server']}.")
            return {"status": "shown"}
        return {"status": "pending", "url": info["url"]}

    def close(self) -> None:
        if self._page is not None:
            self._page.stop()
            self._page = None


def _url_elicitation(ctx: Any) -> bool:
    """Whether this request's client can be sent a URL-mode elicitation: it declared it, and its
    session is not 2026-07-28 (a server sends no requests of its own there: the result carries
    the page's URL instead, as for a client without URL elicitation)."""
    if str(getattr(ctx, "protocol_version", "")) >= "2026":
        return False
    caps = ctx.session.client_capabilities
    elicitation = getattr(caps, "elicitation", None) if caps is not None else None
    return elicitation is not None and getattr(elicitation, "url", None) is not None
