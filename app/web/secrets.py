"""The secret modal's answers: ``POST /api/secrets/{prompt_id}`` of the web face.

The body is JSON ``{"value": "..."}`` or ``{"cancel": true}``; the value goes straight to the
prompt broker and is never echoed, logged or broadcast (the body buffer is zeroed, a failure
never shows a traceback). Answers: 200 ``{"ok": true, "status": "answered" | "cancelled"}``;
400 ``invalid_input``, 404 ``prompt_not_found``, 409 ``prompt_answered``, 410
``prompt_cancelled``, 413/415 for an oversized or non-JSON body.

:class:`BrokerView` hands the one-time secret page (:mod:`app.pages.secret`) the runtime's
broker, looked up late: the runtime is built in the app's lifespan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from setup_agent.errors import InvalidInput, PromptAlreadyAnswered, PromptCancelled, PromptNotFound

from .answers import ANSWER_ID, json_error, read_answer

__all__ = ["BrokerView", "answer_secret"]

log = logging.getLogger(__name__)

_SEND_JSON = 'Send JSON: {"value": "..."} or {"cancel": true}.'


class BrokerView:
    """The runtime's broker, looked up on each use (``runtime()`` is ``None`` until startup). A
    member's prompt for their own key (``setup_agent/gateway/member_prompts.py``) is in a broker of
    its own, which no page or tab lists: its link's ``get``/``answer``/``cancel`` go there."""

    def __init__(self, runtime: Callable[[], Any]) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        runtime = self._runtime()
        members = getattr(getattr(runtime, "gateway", None), "members", None)
        if members is None or name not in ("get", "answer", "cancel"):
            return getattr(runtime.broker, name)

        def routed(prompt_id: str, *args: Any) -> Any:
            broker = members.prompts.broker if members.prompts.holds(prompt_id) else runtime.broker
            return getattr(broker, name)(prompt_id, *args)

        return routed


async def answer_secret(runtime: Any, request: Request, prompt_id: str, *, foreign: Any = None) -> Response:
    """The modal's answer for ``prompt_id``. The value is never echoed or logged. Another process's
    prompt (shown by ``foreign.py``) is answered through the store, encrypted with the data key."""
    data = await read_answer(request, send_json=_SEND_JSON, too_long="The value is too long.")
    if isinstance(data, Response):
        return data
    if not ANSWER_ID.fullmatch(prompt_id):
        return json_error(404, "prompt_not_found", "This request for a secret is unknown or has expired.")
    broker = runtime.broker
    value = data.pop("value", None)
    try:
        if foreign is not None and foreign.owns(prompt_id):
            from setup_agent.setup import answer_secret_shared

            if data.get("cancel") is not True and not isinstance(value, str):
                return json_error(400, "invalid_input", "Enter a value, or cancel.")
            cancel = data.get("cancel") is True
            shared_refs = getattr(runtime, "shared_refs", None)  # a team's: the ref is usable on any replica
            if not answer_secret_shared(
                runtime.approvals,
                runtime.vault,
                prompt_id,
                None if cancel else value,
                by="user:web",
                shared_refs=shared_refs,
                ttl_seconds=runtime.refs.ttl_seconds,
            ):
                raise PromptNotFound("This request for a secret was answered elsewhere or has expired.")
            return JSONResponse({"ok": True, "status": "cancelled" if cancel else "answered"})
        if data.get("cancel") is True:
            broker.cancel(prompt_id, "cancelled by the user in the web page")
            return JSONResponse({"ok": True, "status": "cancelled"})
        if not isinstance(value, str):
            return json_error(400, "invalid_input", "Enter a value, or cancel.")
        broker.answer(prompt_id, value)
        return JSONResponse({"ok": True, "status": "answered"})
    except InvalidInput as exc:
        return json_error(400, exc.code, runtime.redactor.redact(exc.message))
    except PromptAlreadyAnswered as exc:
        return json_error(409, exc.code, exc.message)
    except PromptCancelled as exc:
        return json_error(410, exc.code, exc.message)
    except PromptNotFound as exc:
        return json_error(404, exc.code, exc.message)
    except Exception as exc:  # never a traceback (which could quote the value)
        log.error("web: answering a secret prompt failed (%s)", type(exc).__name__)
        return json_error(500, "internal", "Nothing was saved. Try again.")
    finally:
        value = None
        data.clear()
