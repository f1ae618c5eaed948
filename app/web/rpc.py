"""JSON-RPC 2.0 at ``POST /rpc`` (the web face).

Methods:

* every ``mcp_setup_*`` tool (params = the tool's arguments object; result = the tool's JSON).
  Provenance of installs: ``ui``. A test or install reports its stages as ``progress`` events
  (the core's, see :mod:`app.web.ws`) to the browser session named in ``X-MCP-Setup-Session``, else
  to every open tab. A direct ``mcp_setup_request_secret`` does not wait: the prompt opens in
  that session (else every open tab) and the result carries ``{ref, prompt_id, status:
  "pending", url}`` (``url``: the one-time secret page; its key enters that one value and
  nothing else). A test or install the user has not yet approved fails with ``consent_required``:
  the consent modal opens in that session (else every open tab) and the error says where the
  user approves (the page, or ``mcp-setup approve``), with no link, id or key: a caller is a
  client and never approves; once the user has approved, call again with the same params.
* ``spawn_subagent`` — params ``{archetype_id?: "mcp_setup", goal, driver?}``; result
  ``{status, server_id?, tools?, summary, transcript}``. Its questions and secret prompts go over
  the websocket of the session named in ``X-MCP-Setup-Session`` (else every open tab) and are
  answered there (``answer`` message; ``POST /api/secrets/{prompt_id}``). Provenance: ``agent``;
* ``servers.list`` (``{}`` → ``{servers: [...]}``, as ``mcp_setup_list_servers``, each with
  ``installed_by_words`` for its card),
  ``servers.remove`` (``{server_id}`` → ``{removed: true}``), ``servers.reconnect``
  (``{server_id}`` → ``{server_id, status}``; the outcome arrives as ``server_status`` events),
  ``servers.enable`` / ``servers.disable`` (``{server_id}`` → ``{server_id, enabled}``: a disabled
  server keeps its settings, stops, and its tools leave every face's list),
  ``servers.keep_running`` (``{server_id, keep_running}`` → ``{server_id, keep_running}``: never
  stopped when idle, or stopped after the idle time again),
  ``servers.sampling`` (``{server_id, sampling: "no" | "text" | "tools"}`` → ``{server_id,
  sampling}``: whether the server may ask your AI to write text; the person only, audited under
  their principal), ``servers.tool_shown`` (``{server_id, tool, shown}`` → ``{server_id,
  left_out_by_user}``: the card's box beside each tool; one left out is neither listed nor
  callable; the person only, audited), ``servers.network`` (``{server_id, only_tested}`` →
  ``{server_id, network}``: true holds the server to the destinations its test connected to
  ("only these"), false lets it reach the public internet again; a running server restarts under
  it; the person only, audited; ``network`` as in ``servers.list``), ``servers.try_tool`` (``{name: "<slug>__<tool>", arguments}`` → the tool's
  result: the person runs a tool from the page, which is its client; a form or page the server
  asks for during the call is shown in this tab, framed as the server's, see :mod:`app.web.relayed`).
* ``tools_budget.get`` (``{}`` → where the context budget stands, in numbers and words) and
  ``tools_budget.set`` (``{tokens}`` → the same; the person only): see :mod:`app.web.budget_rpc`.
* ``tool_registry_list`` (``{}`` → ``{tools: [...]}``), ``tool_registry_get`` (``{tool_id}`` →
  ``{tool}``; an unknown id is ``-32000`` with ``data.code: "not_found"``) and
  ``tool_registry_diagnostics`` (``{}`` → counts, write surface, policy surfaces, providers):
  the read-only tool registry (setup_agent/agent/tool_registry.py).

Errors — one rule: a tool's error result ``{"ok": false, "error": {code, message, ...}}`` is
**always** returned as a JSON-RPC error, built by :func:`setup_agent.errors.jsonrpc_error`:
``invalid_input`` → ``-32602``, any other core code → ``-32000``; ``error.data`` is the core's
error object (``data.code`` is the stable code). Protocol errors: ``-32700`` parse error,
``-32600`` invalid request (also: not JSON content type, body over 1 MiB, empty batch),
``-32601`` unknown method, ``-32602`` bad params (``data.code: "invalid_input"``), ``-32603``
internal (no details); ``-32000`` with ``data.code: "shutting_down"`` for a call still running
when mcp-setup stops (Ctrl-C). Batches run concurrently and answer in request order; notifications
(no ``id``) get no answer (a request made only of them gets HTTP 204). JSON-RPC answers are
HTTP 200 (415/413 for a wrong content type or an oversized body). Every result passes the
redactor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.clients import installed_by_words
from setup_agent.errors import (
    JSONRPC_INVALID_PARAMS,
    JSONRPC_METHOD_NOT_FOUND,
    NotFound,
    SetupError,
    jsonrpc_error,
)
from setup_agent.setup import TOOL_NAMES, CallContext

from .budget_rpc import BUDGET_METHODS, budget_call
from .client_rpc import CLIENT_METHODS, call_clients
from .member_rpc import MEMBER_METHODS, member_call
from .relayed import try_tool
from .security import current_principal, require_user
from .server_details import DETAIL_METHODS, server_details
from .ws import WebHub

__all__ = ["METHODS", "RpcDispatcher", "error_from_result"]

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MAX_BODY = 1 << 20
METHODS = (
    *TOOL_NAMES,
    "spawn_subagent",
    "servers.list",
    "servers.remove",
    "servers.reconnect",
    "servers.enable",
    "servers.disable",
    "servers.keep_running",
    "servers.sampling",
    "servers.tool_shown",
    "servers.network",
    "servers.try_tool",
    "tool_registry_list",
    "tool_registry_get",
    "tool_registry_diagnostics",
    *MEMBER_METHODS,
    *CLIENT_METHODS,
    *DETAIL_METHODS,
    *BUDGET_METHODS,
)


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def _bad_params(message: str) -> RpcError:
    return RpcError(JSONRPC_INVALID_PARAMS, message, {"code": "invalid_input", "message": message})


def _setup_error_class(code: str) -> type[SetupError] | None:
    stack: list[type[SetupError]] = [SetupError]
    while stack:
        cls = stack.pop()
        if cls.code == code:
            return cls
        stack.extend(cls.__subclasses__())
    return None


def error_from_result(error: dict[str, Any]) -> SetupError:
    """The :class:`SetupError` for a tool's ``error`` object (so ``jsonrpc_error`` maps it)."""
    code = str(error.get("code") or "internal")
    message = str(error.get("message") or "The call failed.")
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    key = error.get("key") if isinstance(error.get("key"), str) else None
    cls = _setup_error_class(code)
    exc = (cls or SetupError)(message, key=key, details=details)
    if cls is None:
        exc.code = code  # a code without a class of its own (e.g. tool_not_allowed)
    extra = {k: v for k, v in error.items() if k not in ("code", "message", "details", "key")}
    if extra:
        exc.details.update(extra)
    return exc


def _response(body: Any, status: int = 200) -> Response:
    return JSONResponse(body, status_code=status)


def _error_response(code: int, message: str, *, status: int = 200, req_id: Any = None) -> Response:
    return _response({"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}, status)


#: Parameter names the agent gives are echoed only when they look like one.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_METHOD_NOT_FOUND = (
    "Method not found. The methods are the mcp_setup_* tools, spawn_subagent, servers.* and tool_registry_*."
)

_STOPPED = "mcp-setup is shutting down; the call was stopped."
_SHUTTING_DOWN = {"code": -32000, "message": _STOPPED, "data": {"code": "shutting_down", "message": _STOPPED}}


def _shutting_down() -> Response:
    return _response({"jsonrpc": "2.0", "id": None, "error": _SHUTTING_DOWN}, 503)


def _provenance() -> str:
    """``token:NAME`` for a team's named token, else ``ui`` (this run's token: the page or its user)."""
    principal = current_principal()
    return principal.label if principal is not None and principal.kind != "user" else "ui"


class RpcDispatcher:
    """Answers ``POST /rpc``; talks to browser sessions through ``hub``; ``page_url(prompt_id)``
    is the one-time secret page of a prompt."""

    def __init__(
        self,
        runtime: Any,
        hub: WebHub,
        *,
        page_url: Callable[[str], str],
        mcp_url: str,
    ) -> None:
        self.runtime = runtime
        self.hub = hub
        self.page_url = page_url
        self.mcp_url = mcp_url  # this serve's /mcp: where a client connected over HTTP reaches it
        self.closing = False
        self._inflight: set[asyncio.Task[Any]] = set()

    def close(self) -> None:
        """Shutting down: every in-flight call ends with a ``shutting_down`` error."""
        self.closing = True
        for task in list(self._inflight):
            task.cancel()

    async def handle(self, request: Request, *, session_id: str | None = None) -> Response:
        task = asyncio.current_task()
        if self.closing or task is None:
            return _shutting_down()
        self._inflight.add(task)
        try:
            return await self._handle(request, session_id)
        except asyncio.CancelledError:
            if not self.closing:
                raise
            task.uncancel()
            return _shutting_down()
        finally:
            self._inflight.discard(task)

    async def _handle(self, request: Request, session_id: str | None) -> Response:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return _error_response(INVALID_REQUEST, "Send JSON-RPC 2.0 as application/json.", status=415)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return _error_response(INVALID_REQUEST, "The request is too large (at most 1 MiB).", status=413)
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return _error_response(PARSE_ERROR, "Parse error: the body is not valid JSON.")
        if session_id is not None and session_id not in self.hub.sessions:
            session_id = None
        if isinstance(payload, list):
            if not payload:
                return _error_response(INVALID_REQUEST, "Invalid request: an empty batch.")
            answers = await asyncio.gather(*(self._one(item, session_id) for item in payload))
            out = [a for a in answers if a is not None]
            return _response(out) if out else Response(status_code=204)
        answer = await self._one(payload, session_id)
        return _response(answer) if answer is not None else Response(status_code=204)

    async def _one(self, req: Any, session_id: str | None) -> dict[str, Any] | None:
        if not isinstance(req, dict):
            return self._invalid(None, "Invalid request: expected a JSON-RPC 2.0 request object.")
        req_id = req.get("id")
        valid_id = req_id is None or (isinstance(req_id, (str, int, float)) and not isinstance(req_id, bool))
        if not valid_id:
            return self._invalid(None, "Invalid request: id must be a string, a number or null.")
        if req.get("jsonrpc") != "2.0":
            return self._invalid(req_id, 'Invalid request: "jsonrpc" must be "2.0".')
        method = req.get("method")
        if not isinstance(method, str) or not method:
            return self._invalid(req_id, "Invalid request: method must be a non-empty string.")
        notification = "id" not in req
        try:
            if method not in METHODS:
                raise RpcError(JSONRPC_METHOD_NOT_FOUND, _METHOD_NOT_FOUND)
            params = req.get("params", {})
            if params is None:
                params = {}
            if not isinstance(params, dict):
                raise _bad_params("params must be an object of named arguments.")
            result = await self._call(method, params, session_id)
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "result": result}
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self.closing or task is None:
                raise
            task.uncancel()
            answer = {"jsonrpc": "2.0", "id": req_id, "error": _SHUTTING_DOWN}
        except RpcError as exc:
            answer = {"jsonrpc": "2.0", "id": req_id, "error": exc.to_dict()}
        except SetupError as exc:
            answer = {"jsonrpc": "2.0", "id": req_id, "error": jsonrpc_error(exc)}
        except Exception as exc:
            log.exception("JSON-RPC %s failed", method if method in METHODS else "(unknown method)")
            answer = {"jsonrpc": "2.0", "id": req_id, "error": jsonrpc_error(exc)}
        if notification:
            return None
        clean = self.runtime.redactor.redact_obj(answer)
        clean["id"] = req_id  # the caller's own id, verbatim: redacting it would answer a guess
        return clean

    @staticmethod
    def _invalid(req_id: Any, message: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": req_id, "error": {"code": INVALID_REQUEST, "message": message}}

    async def _call(self, method: str, params: dict[str, Any], session_id: str | None) -> Any:
        log.info("JSON-RPC %s", method)
        if method in TOOL_NAMES:
            return await self._tool(method, params, session_id)
        if method == "spawn_subagent":
            return await self._spawn(params, session_id)
        if method == "servers.list":
            _only(params, {"wait_seconds"})
            listed = await self._page_list(params)
            # the cards say who installed each one in words; the stored label stays beside them
            servers = [
                {**s, "installed_by_words": installed_by_words(s.get("installed_by"))} for s in listed["servers"]
            ]
            return {**listed, "servers": servers}
        if method == "servers.remove":
            _only(params, {"server_id"})
            return await self._tool("mcp_setup_remove", params, session_id)
        if method == "servers.reconnect":
            _only(params, {"server_id"})
            return await self._reconnect(params)
        if method in ("servers.enable", "servers.disable"):
            require_user("turns a server on or off")  # the person's choice: never a client's or a member's
            _only(params, {"server_id"})
            return await self.runtime.service.set_enabled(
                _server_id(params), method == "servers.enable", actor=_provenance()
            )
        if method == "servers.keep_running":
            require_user("chooses whether a server keeps running")  # the person's choice, as enable is
            _only(params, {"server_id", "keep_running"})
            keep = params.get("keep_running")
            if not isinstance(keep, bool):
                raise _bad_params("keep_running is required and must be true or false.")
            return await self.runtime.service.set_keep_running(_server_id(params), keep, actor=_provenance())
        if method == "servers.sampling":
            require_user("chooses what a server may ask your AI")  # the person's choice only
            _only(params, {"server_id", "sampling"})
            principal = current_principal()
            by = principal.label if principal is not None else "user:web"
            return await self._sampling(_server_id(params), params.get("sampling"), by)
        if method == "servers.tool_shown":
            require_user("chooses which tools of a server your assistant gets")  # the person's choice only
            _only(params, {"server_id", "tool", "shown"})
            principal = current_principal()
            by = principal.label if principal is not None else "user:web"
            return await self._tool_shown(_server_id(params), params.get("tool"), params.get("shown"), by)
        if method == "servers.network":
            require_user("chooses where a server may connect")  # the person's choice only, as sampling is
            _only(params, {"server_id", "only_tested"})
            only = params.get("only_tested")
            if not isinstance(only, bool):
                raise _bad_params("only_tested is required and must be true or false.")
            principal = current_principal()
            by = principal.label if principal is not None else "user:web"
            return await self._network(_server_id(params), only, by)
        if method == "servers.try_tool":  # the page is the client: a server's request is shown in this tab
            require_user("runs a tool from the page")
            _only(params, {"name", "arguments"})
            principal = current_principal()
            by = principal.label if principal is not None else "user:web"
            return await try_tool(self.runtime, self.hub, params, session_id, by)
        if method.startswith("tool_registry_"):
            return await self._registry(method, params)
        if method in MEMBER_METHODS:  # a member's own keys
            return await member_call(self.runtime, method, params)
        if method in CLIENT_METHODS:
            return await call_clients(self.runtime, method, params, mcp_url=self.mcp_url)
        if method in BUDGET_METHODS:  # where the context budget stands; the person's own value
            return await budget_call(self.runtime, method, params)
        if method in DETAIL_METHODS:
            return await server_details(self.runtime, method, params, self._presenter(session_id), self.hub, session_id)
        raise RpcError(JSONRPC_METHOD_NOT_FOUND, _METHOD_NOT_FOUND)

    async def _page_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """The page's cards: every server with its tools' descriptions (an agent's list is smaller)."""
        from pydantic import ValidationError

        from setup_agent.setup import ListRequest
        from setup_agent.translation import translate

        try:
            request = ListRequest.model_validate(params)
        except ValidationError as exc:
            raise translate(exc) from None  # invalid_input, in the tools' words
        listed = await self.runtime.service.list_servers(request, CallContext(installed_by="ui"), full=True)
        return self.runtime.redactor.redact_obj({"ok": True, **listed})

    async def _tool(self, name: str, params: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        ctx = CallContext(
            installed_by=_provenance(),  # token:<name> with a team's named token
            present_prompt=self._presenter(session_id),
            on_progress=self.hub.progress_to(session_id),
            present_consent=self._consent_presenter(session_id),
            present_authorization=self._sign_in_presenter(session_id),
        )
        result = await self.runtime.service.call(name, params, ctx)
        if isinstance(result, dict) and result.get("ok") is False:
            raise error_from_result(result.get("error") or {})
        return result

    def _presenter(self, audience: str | None) -> Callable[[Any], Awaitable[dict[str, Any]]]:
        """How a direct ``mcp_setup_request_secret`` shows its prompt (it does not wait)."""

        async def present(pending: Any) -> dict[str, Any]:
            self.hub.announce_prompt(pending, audience=audience)
            return {
                "status": "pending",
                "url": self.page_url(pending.prompt_id),
                "message": (  # names nothing the agent gave
                    "The user can enter the secret in the open mcp-setup page, or at this link. The ref "
                    "works once they have submitted it; the value is never shown to you."
                ),
            }

        return present

    def _consent_presenter(self, audience: str | None) -> Callable[[Any], Awaitable[dict[str, Any]]]:
        """A direct test or install: the consent modal opens in the tab, the call does not wait."""

        async def present(pending: Any) -> dict[str, Any]:
            self.hub.announce_consent(pending, audience=audience)
            return {"status": "pending"}  # never a link: the caller is a client, the user approves on the page

        return present

    def _sign_in_presenter(self, audience: str | None) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        """How a direct ``mcp_setup_authorize`` shows the sign-in (the page's box; it does not wait)."""

        async def present(info: dict[str, Any]) -> dict[str, Any]:
            self.hub.announce_authorization(info, audience=audience)
            return {"status": "pending", "url": info["url"]}

        return present

    async def _spawn(self, params: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        _only(params, {"archetype_id", "goal", "driver"})
        goal = params.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            raise _bad_params("goal is required: a non-empty sentence such as 'set up the Notion MCP server'.")
        archetype_id = params.get("archetype_id", "mcp_setup")
        if not isinstance(archetype_id, str) or not archetype_id:
            raise _bad_params("archetype_id must be a non-empty string.")
        driver = params.get("driver")
        if driver is not None and not isinstance(driver, str):
            raise _bad_params("driver must be a string (guided or openai).")
        try:
            from setup_agent.agent import spawn_subagent  # noqa: F401 - is the harness there?
        except ImportError:
            raise RpcError(-32000, "The setup agent is not available.", {"code": "agent_unavailable"}) from None
        run = self.hub.agents.spawn(goal.strip(), archetype_id=archetype_id, driver=driver, audience=session_id)
        assert run.task is not None
        try:
            return await asyncio.shield(run.task)
        except KeyError:  # an unknown archetype or driver: its text is the agent's, never echoed
            raise _bad_params(
                "archetype_id or driver names no known agent (archetype mcp_setup; driver guided or openai)."
            ) from None
        except ValueError:
            raise _bad_params(
                "goal is required: a non-empty sentence such as 'set up the Notion MCP server'."
            ) from None

    async def _registry(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The read-only tool registry (setup_agent/agent/tool_registry.py); changes nothing."""
        registry = self.runtime.tool_registry
        if method == "tool_registry_get":
            _only(params, {"tool_id"})
            tool_id = params.get("tool_id")
            if not isinstance(tool_id, str) or not tool_id.strip():
                raise _bad_params("tool_id is required: a tool_id from tool_registry_list.")
            return {"tool": await registry.get(tool_id.strip())}
        _only(params, set())
        if method == "tool_registry_list":
            return {"tools": await registry.list()}
        return await registry.diagnostics()

    async def _sampling(self, server_id: str, sampling: Any, by: str) -> dict[str, Any]:
        """The card's "May ask your AI to write text": stored, audited under ``by``; every gateway
        judges the server's next sampling request by it."""
        from setup_agent.store import SAMPLING

        if sampling not in SAMPLING:
            raise _bad_params(f"sampling must be one of: {', '.join(SAMPLING)}.")
        server = await asyncio.to_thread(self.runtime.store.servers.set_sampling, server_id, sampling, actor=by)
        return {"server_id": server_id, "sampling": server.sampling}

    async def _network(self, server_id: str, only: bool, by: str) -> dict[str, Any]:
        """The card's Network part ("Allow only these", or the public internet again), as
        ``mcp-setup allow NAME --only-tested`` / ``--public-internet``: stored and audited under
        ``by``; every gateway restarts a running server under it (its launch changed)."""
        from setup_agent.launch import holding_to_tested, network_state

        store = self.runtime.store
        server = await asyncio.to_thread(store.servers.get, server_id)
        if server is None:
            raise NotFound("No installed server has this server_id. servers.list lists them.")
        policy = holding_to_tested(server.launch_spec, only, server.title or server.qualified_name)
        changed = await asyncio.to_thread(store.servers.set_network, server_id, policy, actor=by)
        mechanism = await asyncio.to_thread(self.runtime.service.network_mechanism)
        state = network_state(changed.launch_spec, mechanism)
        return {"server_id": server_id, "network": state.public() if state is not None else None}

    async def _tool_shown(self, server_id: str, tool: Any, shown: Any, by: str) -> dict[str, Any]:
        """The card's box beside a tool (``mcp-setup enable/disable NAME --tool TOOL``): a tool left
        out is neither listed nor callable through any gateway; audited under ``by``."""
        if not isinstance(tool, str) or not isinstance(shown, bool):
            raise _bad_params("tool (a tool's name) and shown (true or false) are required.")
        store = self.runtime.store
        server = await asyncio.to_thread(store.servers.get, server_id)
        if server is None:
            raise NotFound("No installed server has this server_id. servers.list lists them.")
        if tool not in {str(t.get("name")) for t in (*server.tools, *server.live_tools)}:
            raise _bad_params(f"{server.title or server.qualified_name} has no tool named {tool}.")
        offers = (await asyncio.to_thread(store.pins.offers)).get(server_id)
        hidden = set(offers.hidden_tools if offers is not None else ())
        hidden = hidden - {tool} if shown else hidden | {tool}
        await asyncio.to_thread(store.pins.set_hidden_tools, server_id, sorted(hidden), actor=by)
        return {"server_id": server_id, "left_out_by_user": sorted(hidden)}

    async def _reconnect(self, params: dict[str, Any]) -> dict[str, Any]:
        server_id = _server_id(params)
        server = await asyncio.to_thread(self.runtime.store.servers.get, server_id)
        if server is None:
            raise NotFound("No installed server has this server_id. servers.list lists them.")
        status = await self.runtime.connections.connect(server, wait=False)
        return {"server_id": server_id, "status": status.status}


def _server_id(params: dict[str, Any]) -> str:
    server_id = params.get("server_id")
    if not isinstance(server_id, str) or not server_id.strip():
        raise _bad_params("server_id is required and must be a non-empty string.")
    return server_id.strip()


def _only(params: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(params) - allowed)
    if extra:
        named = [p for p in extra if _NAME.fullmatch(p)]
        if len(named) < len(extra):
            named.append(
                "an invalid name" if len(extra) - len(named) == 1 else f"{len(extra) - len(named)} invalid names"
            )
        raise _bad_params(f"Unknown parameter(s): {', '.join(named)}; allowed: {', '.join(sorted(allowed))}.")
