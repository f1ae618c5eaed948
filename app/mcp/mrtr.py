"""Secret prompts on 2026-07-28 sessions as input-required results.

Such a session takes no server requests, so an elicitation cannot be sent during the call. A
``mcp_setup_request_secret`` whose client declared URL-mode elicitation therefore answers with
an ``InputRequiredResult``: one URL-mode elicitation (the one-time secret page; its id is the
prompt's) and a ``requestState`` that names the prompt, signed with a key of this face (a
client cannot make it wait on another prompt). The client shows the page to the person and
retries the call with its response; the retry waits for the value (bounded) and answers as a
2025-era call would: the ref and ``answered``, never the page's link, so the model sees none.
A consent (a test or an install that needs the user's approval) goes the same way: the call
answers input-required with the consent page; its retry waits for the user's answer and runs the
call again (the broker remembers the approval, so the second run goes through). An OAuth sign-in
(``mcp_setup_authorize``) too: the elicitation carries the authorization URL (it holds the
flow's ``state``), the signed state names only the ref, the server and its scopes; the retry
waits for the redirect and the token exchange (the ref filled, or discarded when it failed) and
answers ``authorized`` with the ref, as a classic session's call does. The link never reaches
the model.

A retry whose input response is ``decline`` or ``cancel``, or whose person does not finish within
``secret_prompt_timeout_seconds``, ends what it waited for (the prompt cancelled, the consent
denied, the sign-in's flow cancelled and its loopback listener closed: each ref and page stops
working) and answers a tool result: ``prompt_cancelled``, ``consent_denied`` or ``oauth_denied``
with ``details.reason`` (decline | cancel | timeout) and a sentence for the agent. 2026-07-28 has
no ``notifications/elicitation/complete`` (removed with ``elicitationId``: the retry is the
signal); on a 2025-11-25 session the face sends it (:meth:`Mrtr.completed`) once the secret
is entered, the consent answered or the sign-in done.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
from typing import Any

from setup_agent.errors import ConsentDenied, OAuthDenied, OAuthError, PromptCancelled, SetupError

__all__ = ["Mrtr"]

logger = logging.getLogger(__name__)


def modern(ctx: Any) -> bool:
    return str(getattr(ctx, "protocol_version", "")) >= "2026"


def _declares_url_elicitation(ctx: Any) -> bool:
    caps = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    elicitation = getattr(caps, "elicitation", None) if caps is not None else None
    return elicitation is not None and getattr(elicitation, "url", None) is not None


class Mrtr:
    """Turns a pending secret prompt into an input-required result, and resumes it."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._woken: set[asyncio.Event] = set()  # resumed sign-ins waiting for their ref
        self._listening: Any = None  # the ref store whose changes wake them

    def _sign(self, state: dict[str, str]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        return f"{body}.{mac}"

    def _open(self, token: str | None) -> dict[str, str] | None:
        if not token or "." not in token:
            return None
        body, mac = token.rsplit(".", 1)
        if not hmac.compare_digest(mac, hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()):
            return None
        try:
            state = json.loads(base64.urlsafe_b64decode(body.encode()))
        except ValueError:
            return None
        return state if isinstance(state, dict) else None

    def can_ask(self, ctx: Any) -> bool:
        """Whether this request's answer may be input-required with a URL-mode elicitation."""
        return modern(ctx) and _declares_url_elicitation(ctx)

    async def completed(self, ctx: Any, elicitation_id: str) -> None:
        """``notifications/elicitation/complete`` for a URL-mode elicitation whose step on the page
        is done, to the session that was asked (2025-11-25). Not at 2026-07-28: that revision
        removed it (and ``elicitationId``): the client's retry of the call learns the outcome."""
        if modern(ctx) or not _declares_url_elicitation(ctx):
            return
        try:
            await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)
        except Exception as exc:  # noqa: BLE001 - a client that went away; the call's answer says it all
            logger.debug("elicitation/complete not delivered: %s", type(exc).__name__)

    def input_required(
        self,
        ctx: Any,
        result: dict[str, Any],
        key_name: str,
        consent: tuple[str, str, str] | None = None,
        sign_in: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The input-required answer for a pending prompt's result, for a consent the call waits
        for, or for a sign-in (``sign_in``: what the face was asked to show; None: answer as it is)."""
        if not self.can_ask(ctx):
            return None
        if sign_in is not None and result.get("status") == "pending" and result.get("ref"):
            eid = "oauth-" + secrets.token_hex(8)
            elicit = {
                "method": "elicitation/create",
                "params": {"mode": "url", "url": sign_in["url"], "message": sign_in["message"]},
            }
            state = self._sign(
                {
                    "sign_in": eid,
                    "ref": str(result["ref"]),
                    "server": str(sign_in["server"]),
                    "authorization_server": str(sign_in.get("authorization_server", "")),
                    "scopes": json.dumps(sign_in.get("scopes") or []),
                }
            )
            return {"resultType": "input_required", "inputRequests": {eid: elicit}, "requestState": state}
        error = result.get("error") if isinstance(result.get("error"), dict) else {}
        if consent is not None and error.get("code") == "consent_required":
            consent_id, url, server = consent
            elicit = {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "url": url,
                    "message": f"mcp-setup needs your approval to run {server}: open the page to see what will run "
                    "and where your secrets go.",
                },
            }
            state = self._sign({"consent_id": consent_id})
            return {"resultType": "input_required", "inputRequests": {consent_id: elicit}, "requestState": state}
        if result.get("status") != "pending" or not result.get("url") or "prompt_id" not in result:
            return None
        prompt_id, ref = str(result["prompt_id"]), str(result["ref"])
        elicit = {
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "url": result["url"],
                "message": f"mcp-setup needs your {key_name}. Open the page to enter it; it stays on this computer "
                "and is never shown to the assistant.",
            },
        }
        state = self._sign({"prompt_id": prompt_id, "ref": ref, "key": key_name})
        return {"resultType": "input_required", "inputRequests": {prompt_id: elicit}, "requestState": state}

    async def resume(self, ctx: Any, params: Any, runtime: Any) -> dict[str, Any] | None:
        """The retry of a call that answered input-required: the result (None: not a retry of ours,
        or a consent the user approved: then the call runs again)."""
        state = self._open(getattr(params, "request_state", None))
        if state is None:
            return None
        responses = getattr(params, "input_responses", None) or {}
        timeout = runtime.settings.secret_prompt_timeout_seconds
        if "consent_id" in state:
            return await _resume_consent(state, _action(responses.get(state["consent_id"])), runtime, timeout)
        if "sign_in" in state:
            return await self._resume_sign_in(state, _action(responses.get(state["sign_in"])), runtime, timeout)
        if params.name != "mcp_setup_request_secret" or "prompt_id" not in state:
            return None
        return await _resume_prompt(state, _action(responses.get(state["prompt_id"])), runtime, timeout)

    async def _resume_sign_in(self, state: dict[str, str], action: str, runtime: Any, timeout: float) -> dict[str, Any]:
        """Wait for the sign-in behind ``state`` (bounded): the classic call's answer, no link."""
        ref, server = state["ref"], state["server"]  # messages name neither (no echo)
        sign_ins = getattr(runtime, "sign_ins", None)
        again = "Call mcp_setup_authorize again when they are ready."
        if action != "accept":
            await _cancel_sign_in(runtime, ref)
            message = f"The user {_VERBS[action]} signing in; the sign-in is cancelled and its ref no longer works."
            return _refused(OAuthDenied(f"{message} {again}", details={"reason": action}))
        settled = await self._settled(runtime.refs, ref, timeout)
        if settled is None:
            await _cancel_sign_in(runtime, ref)
            message = f"The user did not finish signing in within {_span(timeout)}; the sign-in is cancelled."
            return _refused(OAuthDenied(f"{message} {again}", details={"reason": "timeout"}))
        if not settled:  # the flow ended without a grant: its own reason (declined there, timed out, refused)
            failure = sign_ins.failure(ref) if sign_ins is not None else None
            return _refused(failure or OAuthError(f"Signing in did not complete. {again}"), runtime)
        return {
            "ref": ref,
            "server": server,
            "authorization_server": state["authorization_server"],
            "scopes": json.loads(state["scopes"]),
            "status": "authorized",
        }

    async def _settled(self, refs: Any, ref: str, timeout: float) -> bool | None:
        """True once ``ref`` holds the grant, False once the flow discarded it, None at the timeout."""
        if self._listening is not refs:
            loop = asyncio.get_running_loop()
            refs.add_listener(lambda: loop.call_soon_threadsafe(lambda: [e.set() for e in list(self._woken)]))
            self._listening = refs
        event = asyncio.Event()
        self._woken.add(event)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if refs.is_ready(ref):
                        return True
                    try:
                        refs.key_of(ref)  # still reserved: the redirect or the exchange is under way
                    except SetupError:
                        return False
                    await event.wait()
                    event.clear()
        except TimeoutError:
            return None
        finally:
            self._woken.discard(event)


_VERBS = {"decline": "declined", "cancel": "dismissed the request without"}  # ... signing in


def _action(answer: Any) -> str:
    """The client's answer to an input request: accept | decline | cancel (none, or unknown: cancel)."""
    action = getattr(answer, "action", None)
    if action is None and isinstance(answer, dict):
        action = answer.get("action")
    return action if action in ("accept", "decline") else "cancel"


def _span(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:g} minutes"
    return "1 second" if seconds == 1 else f"{seconds:g} seconds"


def _refused(error: SetupError, runtime: Any = None) -> dict[str, Any]:
    out = error.to_dict()
    redactor = getattr(runtime, "redactor", None)
    return {"ok": False, "error": redactor.redact_obj(out) if redactor is not None else out}


async def _cancel_sign_in(runtime: Any, ref: str) -> None:
    sign_ins = getattr(runtime, "sign_ins", None)
    if sign_ins is not None:
        await sign_ins.cancel(ref)  # its loopback listener closes; the ref is discarded
    else:
        runtime.refs.discard(ref)


async def _resume_prompt(state: dict[str, str], action: str, runtime: Any, timeout: float) -> dict[str, Any]:
    """The secret prompt's answer: the ref once the user entered the value; else the prompt is
    cancelled (its page and its ref stop working) and the agent is told why."""
    prompt_id, ref = state["prompt_id"], state["ref"]  # the messages do not name the key (no echo)
    broker = runtime.broker
    again = "Ask again with mcp_setup_request_secret when they are ready."
    if action != "accept":
        _quietly(broker.cancel, prompt_id, f"{action} by the user")
        verb = "declined to enter" if action == "decline" else "dismissed the request for"
        message = f"The user {verb} the secret; the prompt is cancelled and its ref no longer works."
        return _refused(PromptCancelled(f"{message} {again}", details={"reason": action}))
    try:
        await broker.wait(prompt_id, timeout=timeout)
    except TimeoutError:
        _quietly(broker.cancel, prompt_id, "not answered in time")
        message = f"The user did not enter the secret within {_span(timeout)}; the prompt is cancelled."
        return _refused(PromptCancelled(f"{message} {again}", details={"reason": "timeout"}))
    except PromptCancelled:  # Cancel on the page (the broker's message names the key: not echoed)
        message = f"The user cancelled on the secret's page. {again}"
        return _refused(PromptCancelled(message, details={"reason": "cancel"}))
    except SetupError as exc:  # expired, or gone
        return _refused(type(exc)(f"The request for the secret is no longer open. {again}"))
    return {"ok": True, "ref": ref, "prompt_id": prompt_id, "status": "answered"}


async def _resume_consent(state: dict[str, str], action: str, runtime: Any, timeout: float) -> dict[str, Any] | None:
    """Wait for the user's answer to the consent; None when approved (the call runs again).
    Declined in the client, or not answered in time: the consent is denied (its page closes)."""
    consent_id, consents = state["consent_id"], runtime.consents
    what = "running the server"  # not named: the agent gave the name (no echo)
    reason = action
    if action != "accept":
        _quietly(consents.deny, consent_id, f"{action} by the user")
    else:
        try:
            await consents.wait(consent_id, timeout=timeout)
        except TimeoutError:
            _quietly(consents.deny, consent_id, "not answered in time")
            reason = "timeout"
        except SetupError:  # answered and closed already: its status says how
            pass
        if consents.status(consent_id) == "approved":
            return None
    message = {
        "decline": f"The user declined {what}; nothing ran.",
        "cancel": f"The user dismissed the approval of {what} without answering; nothing ran.",
        "timeout": f"The user did not answer the approval of {what} within {_span(timeout)}; it is withdrawn and "
        "nothing ran.",
    }.get(reason, f"The user did not approve {what}; nothing ran.")
    details = {"reason": reason if reason in ("decline", "cancel", "timeout") else "denied"}
    return _refused(ConsentDenied(message + " Try again when they are ready.", details=details))


def _quietly(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except SetupError:  # already answered, cancelled or gone
        pass
