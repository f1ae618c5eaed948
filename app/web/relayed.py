"""The page as the client of a tool call it started (``servers.try_tool``): an installed server's
elicitation during that call is shown in the tab that started it, framed as the server's own
request, never in mcp-setup's voice.

:class:`PageCaller` is the relay's :class:`~setup_agent.gateway.Caller` for such a call
(setup_agent/gateway/relay.py): the relay has matched the request to this call, screened it
(relay_rules.py: no credential form, no look-alike of mcp-setup's pages) and redacted it. The
caller sends the tab a ``relayed_request`` event (who asks: the server's title, slug and icon;
the form's fields or the page it asks to open) and waits for the person's answer, posted to
``POST /api/relayed/{request_id}`` (:meth:`RelayedRequests.answer`), at most
:data:`WAIT_SECONDS` (then "cancel"); the answer goes back through the relay's guard and redactor. The page takes no sampling or roots requests: it has no
AI of its own and shares no folders, so those are refused as for any client that did not
declare them.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from typing import Any

import mcp_types as types

from setup_agent.errors import InvalidInput
from setup_agent.gateway import ORIGIN_KEY

__all__ = ["PageCaller", "RelayedRequests"]

log = logging.getLogger(__name__)

#: The answers a person gives a server's form (the specification's ``action``).
ACTIONS = ("accept", "decline", "cancel")
#: The field types a form may ask for (the specification's primitive schemas).
_FIELD_TYPES = ("string", "number", "integer", "boolean")
#: An icon the page shows: an image carried in the server's own answer (no address to fetch from).
_ICON_PREFIXES = (
    "data:image/png;base64,",
    "data:image/jpeg;base64,",
    "data:image/gif;base64,",
    "data:image/webp;base64,",
)
_MAX_ICON = 64 * 1024
#: How long a server's request waits for the person in the tab; then it is answered "cancel"
#: (a tab closed meanwhile must not hold the call, nor the server, for ever).
WAIT_SECONDS = 600.0


class RelayedRequests:
    """The servers' requests waiting for a person's answer in a tab, by id."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[asyncio.Future[dict[str, Any]], dict[str, Any]]] = {}

    def open(self, event: dict[str, Any]) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """A new request (``event`` without its id): its id and the future its answer settles."""
        request_id = "rel_" + secrets.token_hex(12)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (future, event)
        return request_id, future

    def close(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    def answer(self, request_id: str, body: dict[str, Any]) -> bool:
        """The person's answer (``{action, content?}``); False when nothing waits under that id.
        A content field the form did not ask for, or of another type, is refused."""
        waiting = self._waiting.get(request_id)
        if waiting is None or waiting[0].done():
            return False
        future, event = waiting
        action = body.get("action")
        if action not in ACTIONS:
            raise InvalidInput("action must be accept, decline or cancel.")
        answer: dict[str, Any] = {"action": action}
        if action == "accept" and event.get("mode") == "form":
            answer["content"] = _content(event.get("fields") or [], body.get("content"))
        future.set_result(answer)
        return True


def _content(fields: list[dict[str, Any]], content: Any) -> dict[str, Any]:
    if not isinstance(content, dict):
        raise InvalidInput("content must be an object of the form's fields.")
    kinds = {f["name"]: f["type"] for f in fields}
    out: dict[str, Any] = {}
    for name, value in content.items():
        kind = kinds.get(name)
        if kind is None:
            raise InvalidInput("Only the form's own fields can be answered.")
        ok = {
            "string": isinstance(value, str) and len(value) <= 10_000,
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        }[kind]
        if not ok:
            raise InvalidInput(f"The field {name} takes a {kind}.")
        out[name] = value
    missing = [f["name"] for f in fields if f.get("required") and f["name"] not in out]
    if missing:
        raise InvalidInput(f"Fill in {', '.join(missing)}.")
    return out


def _fields(schema: Any) -> list[dict[str, Any]]:
    """The form's fields as the page draws them (primitive types only, as the specification allows)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    required = set(schema.get("required") or ()) if isinstance(schema, dict) else set()
    fields = []
    for name, field in (properties or {}).items():
        field = field if isinstance(field, dict) else {}
        kind = field.get("type", "string")
        if kind not in _FIELD_TYPES:
            continue
        shown: dict[str, Any] = {"name": str(name), "type": kind, "required": name in required}
        for key in ("title", "description", "default"):
            if field.get(key) is not None:
                shown[key] = field[key]
        options = field.get("enum") or [o.get("const") for o in field.get("oneOf") or () if isinstance(o, dict)]
        if options:
            shown["options"] = [str(o) for o in options if o is not None]
        fields.append(shown)
    return fields


def _origin(meta: Any) -> dict[str, str]:
    said = meta.get(ORIGIN_KEY) if isinstance(meta, dict) else None
    said = said if isinstance(said, dict) else {}
    origin = {k: str(said[k]) for k in ("slug", "title", "server") if said.get(k)}
    icon = said.get("icon")
    if isinstance(icon, str) and icon.startswith(_ICON_PREFIXES) and len(icon) <= _MAX_ICON:
        origin["icon"] = icon
    return origin


def _unlabelled(message: str, origin: dict[str, str]) -> str:
    """The server's own words: the relay's "<title> (installed server `<slug>`) asks: " goes, the
    page says who asks in its frame."""
    prefix = f"{origin.get('title', '')} (installed server `{origin.get('slug', '')}`) "
    if not message.startswith(prefix):
        return message
    rest = message[len(prefix) :]
    return rest.split(": ", 1)[1] if ": " in rest else rest


class PageCaller:
    """The page's tab as the client of one tool call (see the module doc). ``emit(event)`` sends
    the tab an event; ``principal`` is the person (the guard counts a protected value in their
    answers against it)."""

    def __init__(
        self,
        requests: RelayedRequests,
        emit: Callable[[dict[str, Any]], None],
        *,
        principal: str = "user:web",
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self.requests = requests
        self.emit = emit
        self.principal = principal
        self.wait_seconds = wait_seconds

    def can(self, capability: str) -> bool:
        return capability in ("elicitation.form", "elicitation.url")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if method != "elicitation/create":  # the relay asks only what `can` allows
            raise InvalidInput(f"The page does not answer {method}.")
        origin = _origin(params.get("_meta"))
        mode = "url" if params.get("mode") == "url" else "form"
        event: dict[str, Any] = {
            "type": "relayed_request",
            "origin": origin,
            "mode": mode,
            "message": _unlabelled(str(params.get("message") or ""), origin),
        }
        if mode == "url":
            event["url"] = str(params.get("url") or "")
        else:
            event["fields"] = _fields(params.get("requestedSchema"))
        request_id, future = self.requests.open(event)
        event["request_id"] = request_id
        self.emit(event)
        try:
            answer = await asyncio.wait_for(future, self.wait_seconds)
        except TimeoutError:
            log.info("a request of %s waited %.0f s in the page: cancelled", origin.get("slug"), self.wait_seconds)
            answer = {"action": "cancel"}
        finally:
            self.requests.close(request_id)
            self.emit({"type": "relayed_done", "request_id": request_id})
        return types.ElicitResult.model_validate(answer)

    async def log(self, params: dict[str, Any]) -> None:
        """A log message during the call: what mcp-setup tells the person (a refused form) is shown."""
        if params.get("logger") == "mcp-setup":
            self.emit({"type": "relayed_notice", "text": str(params.get("data") or "")})


async def try_tool(runtime: Any, hub: Any, params: dict[str, Any], audience: str | None, by: str) -> dict[str, Any]:
    """``servers.try_tool`` ``{name, arguments?}``: the person runs an installed tool from the page
    (``<slug>__<tool>``, as clients see it), the tab being its client: a request the server sends
    during the call is shown there (:class:`PageCaller`). Returns the tool's result as the gateway
    gives it (redacted, capped; a refusal is a tool error)."""
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("name is required: the tool's name as clients see it, e.g. brave-search__web_search.")
    if not isinstance(arguments, dict):
        raise InvalidInput("arguments must be an object.")
    caller = PageCaller(hub.relayed, lambda event: hub.emit(event, audience=audience), principal=by)
    result: dict[str, Any] = await runtime.gateway.call(name.strip(), arguments, session=by, caller=caller)
    return result


async def answer_relayed(hub: Any, request: Any, request_id: str) -> Any:
    """``POST /api/relayed/{request_id}``: the person's answer to a server's request shown in the page."""
    from starlette.responses import JSONResponse, Response

    from .answers import ANSWER_ID, json_error, read_answer

    data = await read_answer(
        request, send_json='Send JSON: {"action": "accept", "content": {...}}.', too_long="The answer is too long."
    )
    if isinstance(data, Response):
        return data
    if not ANSWER_ID.fullmatch(request_id):
        return json_error(404, "not_found", "This request is no longer open.")
    try:
        if not hub.relayed.answer(request_id, data):
            return json_error(404, "not_found", "This request is no longer open: the call it belonged to ended.")
    except InvalidInput as exc:
        return json_error(400, exc.code, exc.message)
    return JSONResponse({"ok": True})
