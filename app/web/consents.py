"""The consent modal's answers: ``POST /api/consents/{consent_id}`` of the web face.

The body is JSON ``{"approve": true, "settings": {NAME: value}, "accept_warnings": bool, "sandbox":
{"extra_paths": [FOLDER], "network": bool}, "hidden_tools": [TOOL], "choices": {NAME: VALUE}}``
(``sandbox``: the user's widening, optional; ``hidden_tools``: the tools shown that the user
unticked; ``choices``: an option of each choice shown, its default where left out) or
``{"deny": true}``; it goes straight to the :class:`~setup_agent.setup.consent.ConsentBroker`
(another process's consent, shown by ``foreign.py``: to the store, for its owner to apply). The
answer is recorded under the principal that gave it (``user:web``, or an admin's ``token:NAME``).
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
from setup_agent.setup import answer_shared

from .answers import ANSWER_ID, json_error, read_answer
from .security import current_principal

__all__ = ["answer_consent"]

log = logging.getLogger(__name__)

_SEND_JSON = 'Send JSON: {"approve": true, "settings": {...}, "accept_warnings": true} or {"deny": true}.'


async def answer_consent(runtime: Any, request: Request, consent_id: str, *, foreign: Any = None) -> Response:
    data = await read_answer(request, send_json=_SEND_JSON, too_long="The answer is too long.")
    if isinstance(data, Response):
        return data
    consents = getattr(runtime, "consents", None)
    if consents is None or not ANSWER_ID.fullmatch(consent_id):
        return json_error(404, "consent_not_found", "This consent request is unknown or has expired.")
    principal = current_principal()  # the Guard let only the user or an --admin token in
    by = principal.label if principal is not None else "user:web"
    try:
        deny = data.get("deny") is True
        if not deny and data.get("approve") is not True:
            return json_error(400, "invalid_input", _SEND_JSON)
        settings = data.get("settings") or {}
        if not isinstance(settings, dict):
            return json_error(400, "invalid_input", "settings must be an object of setting names to values.")
        accept = data.get("accept_warnings") is True
        sandbox = data.get("sandbox") or None  # the user's widening: {extra_paths: [...], network: bool}
        hidden = data.get("hidden_tools") or None  # the tools the user unticked (names of those shown)
        choices = data.get("choices") or None  # the person's answer to each choice shown (consent_choices.py)
        if foreign is not None and foreign.owns(consent_id):  # another process's: answered through the store
            done = answer_shared(
                runtime.approvals,
                consent_id,
                approve=not deny,
                by=by,
                settings=settings,
                accept_warnings=accept,
                sandbox=sandbox,
                hidden_tools=hidden,
                choices=choices,
                remembered=getattr(runtime, "shared_approvals", None),
                ttl_seconds=runtime.refs.ttl_seconds,
            )
            if not done:
                raise ConsentNotFound("This consent request was answered elsewhere or has expired.")
            return JSONResponse({"ok": True, "status": "denied" if deny else "approved"})
        if deny:
            consents.deny(consent_id, "denied in the web page", by=by)
            return JSONResponse({"ok": True, "status": "denied"})
        consents.approve(
            consent_id, settings, accept_warnings=accept, by=by, sandbox=sandbox, hidden_tools=hidden, choices=choices
        )
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
