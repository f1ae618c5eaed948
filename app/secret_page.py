"""The one-time local secret page: where the user types a secret the agent must never see.

``GET /secrets/{prompt_id}?t=TOKEN`` shows a password form; ``POST /secrets/{prompt_id}``
(form fields ``t``, ``value``, ``action=submit|cancel``) hands the value straight to the
:class:`~setup_agent.prompts.PromptBroker`. The value is never echoed, logged or pre-filled.

Guards, in order, on every request:

* ``Host`` must be one of the allowed hosts (``127.0.0.1:PORT``, ``localhost:PORT``),
  else 421 (DNS-rebinding guard);
* on POST: ``Sec-Fetch-Site``, when sent, must be ``same-origin``; ``Origin``, when sent,
  must be ``http://`` + an allowed host, or ``null`` together with
  ``Sec-Fetch-Site: same-origin`` (browsers send ``Origin: null`` for form posts from a page
  whose ``Referrer-Policy`` is ``no-referrer``, as this one's is); without ``Origin``, a
  ``Referer``, when sent, must be same-origin; a request with neither (curl) is accepted.
  Else 403;
* the per-process token (query ``t`` on GET, form field ``t`` on POST) else 403.

:class:`SecretPageServer` runs the app with uvicorn in a background thread on an ephemeral
loopback port, writing nothing to stdout (the stdio MCP face owns stdout).
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import logging
import re
import secrets
import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import uvicorn
from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from setup_agent.errors import InvalidInput, PromptAlreadyAnswered, PromptCancelled, PromptNotFound
from setup_agent.prompts import WEAK_VALUE_WARNING, PendingPrompt, PromptBroker, is_weak_value

__all__ = ["SECURITY_HEADERS", "SecretPageServer", "create_secret_app"]

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

_CSS = """\
:root { color-scheme: light dark; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
body { margin: 0; padding: 1rem; line-height: 1.5; font-size: 1.05rem; }
main { max-width: 34rem; margin: 2rem auto; }
h1 { font-size: 1.35rem; line-height: 1.3; }
code { font-size: 1em; overflow-wrap: anywhere; }
blockquote { margin: 1rem 0; padding: .5rem 1rem; border-left: .25rem solid #888; white-space: pre-wrap;
  overflow-wrap: anywhere; }
label { display: block; font-weight: 600; margin: 1rem 0 .25rem; }
input[type=password] { box-sizing: border-box; width: 100%; font-size: 1.1rem; padding: .6rem; }
.buttons { display: flex; gap: .75rem; margin-top: 1rem; flex-wrap: wrap; }
button { font-size: 1.05rem; padding: .6rem 1.2rem; cursor: pointer; }
button:focus-visible, input:focus-visible { outline: 3px solid #2a6fdb; outline-offset: 2px; }
.error { color: #b00020; font-weight: 600; }
.note { font-size: .95rem; opacity: .85; }
"""

HostSource = Callable[[], set[str]] | set[str] | frozenset[str]


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _document(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_esc(title)}</title>\n"
        '<link rel="stylesheet" href="/secrets/static/page.css">\n'
        f"</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


#: Said on every form, before the value is typed (#10 item 2).
_WEAK_NOTE = (
    "Note: a value under 8 characters, or a word, a date or a simple pattern (such as Summer2024!), "
    "cannot be protected against a determined agent: it could find it by guessing."
)


def _message_page(status: int, title: str, text: str, *, warning: str | None = None) -> HTMLResponse:
    body = f"<h1>{_esc(title)}</h1>\n<p>{_esc(text)}</p>"
    if warning:
        body += f'\n<p class="error" role="alert" id="weak-warning">{_esc(warning)}</p>'
    return HTMLResponse(_document(f"{title} — mcp-setup", body), status_code=status)


def _form_page(prompt: PendingPrompt, token: str, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    key = _esc(prompt.key_name)
    who = f" for <strong>{_esc(prompt.server)}</strong>" if prompt.server else ""
    title = f"Enter your {prompt.key_name}" + (f" for {prompt.server}" if prompt.server else "") + " — mcp-setup"
    alert = f'<p class="error" role="alert" id="error">{_esc(error)}</p>\n' if error else ""
    described = "privacy error" if error else "privacy"
    body = (
        f"<h1>mcp-setup needs your <code>{key}</code>{who}</h1>\n"
        '<p id="privacy">It is stored on this computer and never shown to the AI assistant.</p>\n'
        "<p>Your assistant asked:</p>\n"
        f"<blockquote>{_esc(prompt.prompt)}</blockquote>\n"
        f"{alert}"
        f'<form method="post" action="/secrets/{_esc(prompt.prompt_id)}" autocomplete="off">\n'
        f'<input type="hidden" name="t" value="{_esc(token)}">\n'
        f'<label for="value">Your {key}</label>\n'
        '<input type="password" id="value" name="value" autocomplete="off" required autofocus '
        f'spellcheck="false" autocapitalize="off" aria-describedby="{described}">\n'
        '<div class="buttons">\n'
        '<button type="submit" name="action" value="submit">Submit</button>\n'
        '<button type="submit" name="action" value="cancel" formnovalidate>Cancel</button>\n'
        "</div>\n</form>\n"
        f'<p class="note" id="weak-note">{_esc(_WEAK_NOTE)}</p>\n'
        '<p class="note">If you did not expect this request, press Cancel.</p>'
    )
    return HTMLResponse(_document(title, body), status_code=status)


def _not_found() -> HTMLResponse:
    return _message_page(
        404,
        "This request is no longer open",
        "It has expired or was never made. Go back to your assistant and ask it to request the secret again.",
    )


def _refused() -> HTMLResponse:
    return _message_page(403, "This link cannot be used", "Open the link exactly as your assistant gave it.")


def _prompt_error_page(exc: Exception) -> HTMLResponse:
    if isinstance(exc, PromptAlreadyAnswered):
        return _message_page(
            409, "Already answered", "This secret was already saved. You can close this tab and return to your assistant."
        )
    if isinstance(exc, PromptCancelled):
        return _message_page(
            410, "Request cancelled", "This request was cancelled. Ask your assistant again if you still want to add it."
        )
    return _not_found()


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
            response = _message_page(421, "Wrong address", "Open the secret page at the address your assistant gave.")
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


def _token_ok(given: str | None, token: str) -> bool:
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
    broker: PromptBroker, *, token: str, allowed_hosts: HostSource, consents: Callable[[], Any] | None = None
) -> FastAPI:
    """The secret page app. ``allowed_hosts`` are ``host:port`` strings (or a callable giving them).

    ``consents`` (a callable giving the ConsentBroker) adds the consent page of :mod:`app.consent_page`.
    """
    if not token:
        raise ValueError("token must be a non-empty string")

    def hosts() -> set[str]:
        current = allowed_hosts() if callable(allowed_hosts) else allowed_hosts
        return {h.lower() for h in current}

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/secrets/static/page.css")
    async def stylesheet() -> Response:
        return Response(_CSS, media_type="text/css")

    @app.get("/secrets/{prompt_id}")
    async def show(request: Request, prompt_id: str) -> Response:
        if not _token_ok(request.query_params.get("t"), token):
            log.warning("Secret page: refused a GET without the right token")
            return _refused()
        if not _PROMPT_ID.fullmatch(prompt_id):
            return _not_found()
        try:
            prompt = broker.get(prompt_id)
        except (PromptNotFound, PromptAlreadyAnswered, PromptCancelled) as exc:
            return _prompt_error_page(exc)
        return _form_page(prompt, token)

    @app.post("/secrets/{prompt_id}")
    async def submit(request: Request, prompt_id: str) -> Response:
        if not _origin_ok(request, {f"http://{h}" for h in hosts()}):
            log.warning("Secret page: refused a POST from a foreign origin")
            return _refused()
        form = await _read_form(request)
        if form is None:
            return _message_page(400, "Could not read the form", "Go back, reload the page and try again.")
        if not _token_ok(form.get("t"), token):
            log.warning("Secret page: refused a POST without the right token")
            return _refused()
        if not _PROMPT_ID.fullmatch(prompt_id):
            return _not_found()
        action = form.get("action") or "submit"
        try:
            prompt = broker.get(prompt_id)
            if action == "cancel":
                broker.cancel(prompt_id, "cancelled by the user on the secret page")
                return _message_page(
                    200, "Cancelled", "Nothing was saved. You can close this tab and return to your assistant."
                )
            if action != "submit":
                return _message_page(400, "Unknown action", "Use the Submit or Cancel button.")
            try:
                weak = is_weak_value(form.get("value", ""))
                broker.answer(prompt_id, form.get("value", ""))
            except InvalidInput:
                return _form_page(prompt, token, error="Please enter a value, or press Cancel.", status=400)
        except (PromptNotFound, PromptAlreadyAnswered, PromptCancelled) as exc:
            return _prompt_error_page(exc)
        except Exception as exc:  # never let a traceback (which could quote the form) reach a log
            log.error("Secret page: handling a POST failed (%s)", type(exc).__name__)
            return _message_page(500, "Something went wrong", "Nothing was saved. Ask your assistant again.")
        finally:
            form.clear()
        return _message_page(
            200,
            f"{prompt.key_name} saved",
            "It stays on this computer; your assistant only gets a reference to it. You can close this tab and "
            "return to your assistant.",
            warning=WEAK_VALUE_WARNING if weak else None,  # the user may want a stronger value
        )

    if consents is not None:
        from .consent_page import add_consent_routes

        add_consent_routes(
            app,
            consents,
            token_ok=lambda given: _token_ok(given, token),
            origin_ok=lambda request: _origin_ok(request, {f"http://{h}" for h in hosts()}),
            read_form=_read_form,
            refused=_refused,
            token=token,
        )
    app.add_middleware(_Guard, hosts=hosts)
    return app


class _Server(uvicorn.Server):
    """uvicorn's server, telling a threading.Event when it is serving (or failed to)."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


class SecretPageServer:
    """Serves the secret page on a loopback port from a background thread (own event loop)."""

    def __init__(
        self, broker: PromptBroker, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None, consents: Any = None
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError("The secret page only binds to a loopback address such as 127.0.0.1")
        self.broker = broker
        self.consents = consents
        self.host = host
        self.token = token or secrets.token_urlsafe(32)
        self._want_port = port
        self.port: int | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._log_filter: logging.Filter | None = None
        self._filtered: list[logging.Handler] = []

    def _hide_token_in_logs(self) -> None:
        """No log line shows the page token (#10 item 13): a client's error quoting the URL,
        a traceback, a library's debug line. Every root handler gets a filter for it."""
        from setup_agent.redact import RedactingFilter, Redactor

        hider = Redactor()
        hider.register(self.token, "[page-token]")
        self._log_filter = RedactingFilter(hider)
        for handler in logging.getLogger().handlers:
            handler.addFilter(self._log_filter)
            self._filtered.append(handler)

    @property
    def allowed_hosts(self) -> set[str]:
        if self.port is None:
            return set()
        name = f"[{self.host}]" if ":" in self.host else self.host
        return {f"{name}:{self.port}", f"localhost:{self.port}"}

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("The secret page server is not started")
        name = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{name}:{self.port}"

    def url_for(self, prompt: PendingPrompt | str) -> str:
        """The page for ``prompt``: ``http://127.0.0.1:PORT/secrets/<prompt_id>?t=<token>``."""
        prompt_id = prompt.prompt_id if isinstance(prompt, PendingPrompt) else prompt
        return f"{self.base_url}/secrets/{quote(prompt_id, safe='')}?t={quote(self.token, safe='')}"

    def consent_url(self, consent_id: str) -> str:
        """The consent page for ``consent_id`` (see :mod:`app.consent_page`)."""
        return f"{self.base_url}/secrets/consents/{quote(consent_id, safe='')}?t={quote(self.token, safe='')}"

    def start(self, timeout: float = 10.0) -> SecretPageServer:
        """Bind, start serving in a background thread, and return once it serves."""
        if self._thread is not None:
            raise RuntimeError("The secret page server is already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((self.host, self._want_port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self._hide_token_in_logs()
        app = create_secret_app(
            self.broker, token=self.token, allowed_hosts=lambda: self.allowed_hosts, consents=lambda: self.consents
        )
        config = uvicorn.Config(
            app,
            log_config=None,  # never configure logging (no handler on stdout)
            access_log=False,
            lifespan="off",
            ws="none",
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=5,
        )
        ready = threading.Event()
        self._server = _Server(config, ready)
        self._thread = threading.Thread(target=self._run, args=(sock, ready), name="mcp-setup-secret-page", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or not self._server.started:
            self.stop()
            raise RuntimeError("The secret page server did not start") from self._error
        log.info("Secret page serving on %s", self.base_url)
        return self

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        assert self._server is not None
        try:
            asyncio.run(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # SystemExit from uvicorn on a failed startup included
            self._error = exc
            log.error("Secret page server stopped with %s", type(exc).__name__)
        finally:
            sock.close()
            ready.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (bounded) and join the thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        if thread.is_alive():
            log.warning("The secret page server thread did not stop in time")
        self._server = self._thread = None
        if self._log_filter is not None:
            for handler in self._filtered:
                handler.removeFilter(self._log_filter)
            self._filtered.clear()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> SecretPageServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
