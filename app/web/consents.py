"""The consent modal's answers: ``POST /api/consents/{consent_id}`` of the web face.

The body is JSON ``{"approve": true, "settings": {NAME: value}, "accept_warnings": bool}`` or
``{"deny": true}``; it goes straight to the :class:`~setup_agent.setup.consent.ConsentBroker`.
``settings`` are the user's values for the destination settings shown (the agent's were only
suggestions). Answers: 200 ``{"ok": true, "status": "approved" | "denied"}``; 400
``invalid_input`` (e.g. warnings not accepted), 404 ``consent_not_found``, 409 ``consent_denied``,
413/415 for an oversized or non-JSON body.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from setup_agent.errors import ConsentDenied, ConsentNotFound, InvalidInput

from .answers import ANSWER_ID, json_error, read_answer

__all__ = ["answer_consent"]

log = logging.getLogger(__name__)

_SEND_JSON = 'Send JSON: {"approve": true, "settings": {...}, "accept_warnings": true} or {"deny": true}.'


async def answer_consent(runtime: Any, request: Request, consent_id: str) -> Response:
    data = await read_answer(request, send_json=_SEND_JSON, too_long="The answer is too long.")
    if isinstance(data, Response):
        return data
    consents = getattr(runtime, "consents", None)
    if consents is None or not ANSWER_ID.fullmatch(consent_id):
        return json_error(404, "consent_not_found", "This consent request is unknown or has expired.")
    try:
        if data.get("deny") is True:
            consents.deny(consent_id, "denied in the web page", by="web")
            return JSONResponse({"ok": True, "status": "denied"})
        if data.get("approve") is not True:
            return json_error(400, "invalid_input", _SEND_JSON)
        settings = data.get("settings") or {}
        if not isinstance(settings, dict):
            return json_error(400, "invalid_input", "settings must be an object of setting names to values.")
        consents.approve(consent_id, settings, accept_warnings=data.get("accept_warnings") is True, by="web")
        return JSONResponse({"ok": True, "status": "approved"})
    except InvalidInput as exc:
        return json_error(400, exc.code, runtime.redactor.redact(exc.message))
    except ConsentDenied as exc:
        return json_error(409, exc.code, exc.message)
    except ConsentNotFound as exc:
        return json_error(404, exc.code, exc.message)
    except Exception as exc:  # never a traceback
        log.error("web: answering a consent request failed (%s)", type(exc).__name__)
        return json_error(500, "internal", "Nothing was decided. Try again.")
