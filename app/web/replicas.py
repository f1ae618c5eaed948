"""What a load balancer needs from a ``serve`` replica of a team's gateway.

- ``GET /healthz`` (live: the process answers) and ``GET /readyz`` (ready: the runtime is built and
  the database answers; else 503), with no credential and nothing in them but the replica's id;
- ``X-MCP-Setup-Replica``: a short id of this process (a hash of host and pid, nothing else) on every
  answer, so an operator (and the tests) see which replica served a request;
- :func:`oauth_callback_app`: ``GET /oauth/callback`` (no credential: the sign-in's ``state`` is
  one), the redirect of a sign-in started on any replica: this replica redeems the code and fills
  the sign-in's shared ref, so the sign-in survives the replica that started it;
- :func:`wants_stateless`: an ``/mcp`` POST without ``Mcp-Session-Id`` that is not ``initialize``
  (a 2026-07-28 client, or any client behind a round-robin balancer) is served by a session-less
  transport, so it does not need to reach the replica that answered its ``initialize``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio.to_thread
from starlette.responses import JSONResponse, Response

from setup_agent.oauth import callback_page
from setup_agent.store import process_owner

__all__ = ["HEALTH_PATHS", "REPLICA_HEADER", "health_app", "oauth_callback_app", "replica_id", "wants_stateless"]

REPLICA_HEADER = "X-MCP-Setup-Replica"
HEALTH_PATHS = ("/healthz", "/readyz")
_MAX_PEEK = 1 << 20


def replica_id() -> str:
    return hashlib.sha256(process_owner().encode()).hexdigest()[:12]


def health_app(face: Any) -> Any:
    """The ASGI app of :data:`HEALTH_PATHS` for ``face`` (a :class:`~app.web.app.WebFace`)."""
    me = replica_id()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("method") not in ("GET", "HEAD"):
            await JSONResponse({"ok": False}, 405)(scope, receive, send)
            return
        body: dict[str, Any] = {"ok": True, "replica": me}
        status = 200
        if scope.get("path") == "/readyz":
            runtime = face.runtime
            ready = runtime is not None and face.rpc is not None
            if ready:
                try:
                    await anyio.to_thread.run_sync(runtime.store.database.change_counter)
                except Exception:  # noqa: BLE001 - any failure: not ready
                    ready = False
            body["ok"], status = ready, 200 if ready else 503
        await JSONResponse(body, status, headers={REPLICA_HEADER: me, "Cache-Control": "no-store"})(
            scope, receive, send
        )

    return app


def oauth_callback_app(face: Any, hosts: set[str]) -> Any:
    """The ASGI app of ``/oauth/callback`` for a team's replica: the usual page, the answer stored."""
    me = replica_id()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        sign_ins = getattr(face.runtime, "sign_ins", None)
        shared = getattr(sign_ins, "shared", None)
        if headers.get(b"host", b"").decode("latin-1").lower() not in hosts:
            status, title, text = 400, "Refused", "This sign-in response was addressed to another host or port."
        elif scope.get("method") != "GET":
            status, title, text = 400, "Refused", "This is not a sign-in response."
        elif shared is None:
            status, title, text = 404, "Refused", "Nothing here."
        else:
            query = scope.get("query_string", b"").decode("latin-1")
            status, title, text = await anyio.to_thread.run_sync(sign_ins.answer_callback, query)  # exchanges here
        response = Response(
            callback_page(status, title, text),
            status,
            media_type="text/html; charset=utf-8",
            headers={
                REPLICA_HEADER: me,
                "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
                "Content-Security-Policy": "default-src 'none'",
                "X-Content-Type-Options": "nosniff",
            },
        )
        await response(scope, receive, send)

    return app


async def wants_stateless(scope: Any, receive: Any) -> tuple[bool, Any]:
    """Whether this ``/mcp`` request goes to the session-less transport, and the ``receive`` to
    hand on (the body read here is replayed)."""
    headers = {k.lower(): v for k, v in scope.get("headers") or []}
    if scope.get("method") != "POST" or b"mcp-session-id" in headers:
        return False, receive
    chunks: list[dict[str, Any]] = []
    size, more = 0, True
    while more:
        message = await receive()
        chunks.append(message)
        if message.get("type") != "http.request":
            break
        size += len(message.get("body", b""))
        more = bool(message.get("more_body")) and size <= _MAX_PEEK
    body = b"".join(m.get("body", b"") for m in chunks if m.get("type") == "http.request")
    try:
        parsed = json.loads(body)
        methods = [m.get("method") for m in (parsed if isinstance(parsed, list) else [parsed]) if isinstance(m, dict)]
    except ValueError:
        methods = []
    stateless = bool(methods) and "initialize" not in methods

    async def replay() -> Any:
        if chunks:
            return chunks.pop(0)
        return await receive()

    return stateless, replay
