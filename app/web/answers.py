"""A modal's answer posted to the web face: the bounded JSON body and the error shape.

Shared by ``POST /api/secrets/{prompt_id}`` (:mod:`app.web.secrets`) and ``POST
/api/consents/{consent_id}`` (:mod:`app.web.consents`). The body buffer is zeroed once parsed
(a secret's answer holds the value); an error never quotes the body.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

__all__ = ["ANSWER_ID", "MAX_BODY", "json_error", "read_answer"]

MAX_BODY = 64 * 1024
#: The shape of a prompt or consent id in the URL.
ANSWER_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")


def json_error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": {"code": code, "message": message}}, status)


async def read_answer(request: Request, *, send_json: str, too_long: str) -> dict[str, Any] | JSONResponse:
    """The JSON object posted, or the answer to give instead: 415 when the body is not JSON,
    413 (``too_long``) past :data:`MAX_BODY`, 400 (``send_json``) when it does not parse or
    is not an object."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return json_error(415, "invalid_input", send_json)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return json_error(413, "invalid_input", too_long)
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return json_error(400, "invalid_input", send_json)
    finally:
        body[:] = b"\0" * len(body)
    if not isinstance(data, dict):
        return json_error(400, "invalid_input", send_json)
    return data
