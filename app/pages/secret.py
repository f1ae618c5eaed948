"""The one-time local secret page: where the user types a secret the agent must never see.

``GET /secrets/{prompt_id}?t=TOKEN`` shows a password form; ``POST /secrets/{prompt_id}``
(form fields ``t``, ``value``, ``action=submit|cancel``) hands the value straight to the
:class:`~setup_agent.secrets.prompts.PromptBroker`. The value is never echoed, logged or pre-filled.

Guards, in order, on every request:

* ``Host`` must be one of the allowed hosts (``127.0.0.1:PORT``, ``localhost:PORT``),
  else 421 (DNS-rebinding guard);
* on POST: ``Sec-Fetch-Site``, when sent, must be ``same-origin``; ``Origin``, when sent,
  must be ``http://`` + an allowed host, or ``null`` together with
  ``Sec-Fetch-Site: same-origin`` (browsers send ``Origin: null`` for form posts from a page
  whose ``Referrer-Policy`` is ``no-referrer``, as this one's is); without ``Origin``, a
  ``Referer``, when sent, must be same-origin; a request with neither (curl) is accepted.
  Else 403;
* the prompt's own capability (query ``t`` on GET, form field ``t`` on POST; see
  :class:`~setup_agent.secrets.Capabilities`): a key that opens this one prompt's entry and
  nothing else (not another prompt, not a consent), spent by the answer — else 403.

:class:`~app.pages.server.SecretPageServer` runs the app with uvicorn in a background thread on
an ephemeral loopback port, writing nothing to stdout (the stdio MCP face owns stdout). The HTML
is in ``html.py``.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from setup_agent.errors import InvalidInput, PromptAlreadyAnswered, PromptCancelled, PromptNotFound
from setup_agent.secrets import WEAK_VALUE_WARNING, Capabilities, PromptBroker, is_weak_value

from .html import PAGE_CSS, form_page, message_page, prompt_error_page, refused_page

__all__ = ["SECURITY_HEADERS", "create_secret_app", "token_ok"]

log = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_MAX_BODY = 64 * 1024
_PROMPT_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")

HostSource = Callable[[], set[str]] | set[str] | frozenset[str]


class _Guard:
    """ASGI middleware: Host allowlist, security headers on every response."""

    def __init__(self, app: ASGIApp, hosts: Callable[[], set[str]]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secure(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        host = _header(scope, b"host")
        if host is None or host.lower() not in self.hosts():
            log.warning("Secret page: refused a request for a foreign Host header")
            response = message_page(421, "Wrong address", "Open the secret page at the address your assistant gave.")
            await response(scope, receive, send_secure)
            return
        await self.app(scope, receive, send_secure)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _origin_ok(request: Request, origins: set[str]) -> bool:
    """The POST's Origin/Sec-Fetch-Site/Referer rule (see the module docstring)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site != "same-origin":
        return False
    origin = request.headers.get("origin")
    if origin is not None:
        if origin == "null":
            return fetch_site == "same-origin"
        return origin.lower() in origins
    referer = request.headers.get("referer")
    if referer is not None:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}".lower() in origins
    return True


def token_ok(given: str | None, token: str) -> bool:
    if not given:
        return False
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


async def _read_form(request: Request, *, max_fields: int = 10) -> dict[str, str] | None:
    """Parse a small urlencoded body ourselves (bounded; errors never echo it)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_BODY:
            return None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=max_fields)
    except (UnicodeDecodeError, ValueError):
        return None
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


def create_secret_app(
    broker: PromptBroker,
    *,
    capabilities: Capabilities,
    allowed_hosts: HostSource,
    consents: Callable[[], Any] | None = None,
) -> FastAPI:
    """The secret page app. ``allowed_hosts`` are ``host:port`` strings (or a callable giving them).

    Each link's ``t`` is a capability from ``capabilities`` bound to its prompt (action ``secret``)
    or its consent (action ``consent``). ``consents`` (a callable giving the ConsentBroker) adds
    the consent page of :mod:`app.pages.consent`.
    """

    def hosts() -> set[str]:
        current = allowed_hosts() if callable(allowed_hosts) else allowed_hosts
        return {h.lower() for h in current}

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    def _opens(key: str | None, prompt_id: str) -> bool:
        """This prompt's key, live or spent (a spent one only gets "already answered")."""
        return capabilities.allows(key, prompt_id, "secret") or capabilities.spent(key, prompt_id, "secret")

    @app.get("/secrets/static/page.css")
    async def stylesheet() -> Response:
        return Response(PAGE_CSS, media_type="text/css")

    @app.get("/secrets/{prompt_id}")
    async def show(request: Request, prompt_id: str) -> Response:
        key = request.query_params.get("t")
        if not _PROMPT_ID.fullmatch(prompt_id) or not _opens(key, prompt_id):
            log.warning("Secret page: refused a GET without this prompt's key")
            return refused_page()
        try:
            prompt = broker.get(prompt_id)
        except (PromptNotFound, PromptAlreadyAnswered, PromptCancelled) as exc:
            return prompt_error_page(exc)
        if not capabilities.allows(key, prompt_id, "secret"):  # a spent key: it opens nothing
            return refused_page()
        return form_page(prompt, key or "")

    @app.post("/secrets/{prompt_id}")
    async def submit(request: Request, prompt_id: str) -> Response:
        if not _origin_ok(request, {f"{scheme}://{h}" for h in hosts() for scheme in ("http", "https")}):
            log.warning("Secret page: refused a POST from a foreign origin")
            return refused_page()
        form = await _read_form(request)
        if form is None:
            return message_page(400, "Could not read the form", "Go back, reload the page and try again.")
        key = form.get("t")
        if not _PROMPT_ID.fullmatch(prompt_id) or not _opens(key, prompt_id):
            log.warning("Secret page: refused a POST without this prompt's key")
            return refused_page()
        action = form.get("action") or "submit"
        try:
            prompt = broker.get(prompt_id)
            if not capabilities.allows(key, prompt_id, "secret"):  # a spent key: it opens nothing
                return refused_page()
            if action == "cancel":
                broker.cancel(prompt_id, "cancelled by the user on the secret page")
                capabilities.consume(key, prompt_id, "secret")
                return message_page(
                    200, "Cancelled", "Nothing was saved. You can close this tab and return to your assistant."
                )
            if action != "submit":
                return message_page(400, "Unknown action", "Use the Submit or Cancel button.")
            try:
                weak = is_weak_value(form.get("value", ""))
                broker.answer(prompt_id, form.get("value", ""))
                capabilities.consume(key, prompt_id, "secret")
            except InvalidInput:
                return form_page(prompt, key or "", error="Please enter a value, or press Cancel.", status=400)
        except (PromptNotFound, PromptAlreadyAnswered, PromptCancelled) as exc:
            return prompt_error_page(exc)
        except Exception as exc:  # never let a traceback (which could quote the form) reach a log
            log.error("Secret page: handling a POST failed (%s)", type(exc).__name__)
            return message_page(500, "Something went wrong", "Nothing was saved. Ask your assistant again.")
        finally:
            form.clear()
        return message_page(
            200,
            f"{prompt.key_name} saved",
            "It stays on this computer; your assistant only gets a reference to it. You can close this tab and "
            "return to your assistant.",
            warning=WEAK_VALUE_WARNING if weak else None,  # the user may want a stronger value
        )

    if consents is not None:
        from .consent import add_consent_routes

        add_consent_routes(
            app,
            consents,
            capabilities=capabilities,
            origin_ok=lambda request: _origin_ok(
                request, {f"{scheme}://{h}" for h in hosts() for scheme in ("http", "https")}
            ),
            read_form=_read_form,
            refused=refused_page,
        )
    app.add_middleware(_Guard, hosts=hosts)
    return app
