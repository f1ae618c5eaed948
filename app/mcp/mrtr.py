"""Secret prompts on 2026-07-28 sessions as input-required results (#29 item 7).

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
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
from typing import Any

from setup_agent.errors import SetupError

__all__ = ["Mrtr"]


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

    def input_required(
        self, ctx: Any, result: dict[str, Any], key_name: str, consent: tuple[str, str, str] | None = None,
        sign_in: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The input-required answer for a pending prompt's result, for a consent the call waits
        for, or for a sign-in (``sign_in``: what the face was asked to show; None: answer as it is)."""
        if not self.can_ask(ctx):
            return None
        if sign_in is not None and result.get("status") == "pending" and result.get("ref"):
            eid = "oauth-" + secrets.token_hex(8)
            elicit = {"method": "elicitation/create",
                      "params": {"mode": "url", "url": sign_in["url"], "elicitationId": eid, "message": sign_in["message"]}}
            state = self._sign({"sign_in": eid, "ref": str(result["ref"]), "server": str(sign_in["server"]),
                                "authorization_server": str(sign_in.get("authorization_server", "")),
                                "scopes": json.dumps(sign_in.get("scopes") or [])})  # fmt: skip
            return {"resultType": "input_required", "inputRequests": {eid: elicit}, "requestState": state}
        error = result.get("error") if isinstance(result.get("error"), dict) else {}
        if consent is not None and error.get("code") == "consent_required":
            consent_id, url, server = consent
            elicit = {"method": "elicitation/create", "params": {
                "mode": "url", "url": url, "elicitationId": consent_id,
                "message": f"mcp-setup needs your approval to run {server}: open the page to see what will run "
                           "and where your secrets go."}}  # fmt: skip
            state = self._sign({"consent_id": consent_id})
            return {"resultType": "input_required", "inputRequests": {consent_id: elicit}, "requestState": state}
        if result.get("status") != "pending" or not result.get("url") or "prompt_id" not in result:
            return None
        prompt_id, ref = str(result["prompt_id"]), str(result["ref"])
        elicit = {
            "method": "elicitation/create",
            "params": {
                "mode": "url", "url": result["url"], "elicitationId": prompt_id,
                "message": f"mcp-setup needs your {key_name}. Open the page to enter it; it stays on this computer "
                           "and is never shown to the assistant.",
            },
        }  # fmt: skip
        state = self._sign({"prompt_id": prompt_id, "ref": ref, "key": key_name})
        return {"resultType": "input_required", "inputRequests": {prompt_id: elicit}, "requestState": state}

    async def resume(self, ctx: Any, params: Any, runtime: Any) -> dict[str, Any] | None:
        """The retry of a call that answered input-required: the result (None: not a retry of ours)."""
        state = self._open(getattr(params, "request_state", None))
        if state is None:
            return None
        if "consent_id" in state:
            return await self._resume_consent(state["consent_id"], params, runtime)
        if "sign_in" in state:
            return await self._resume_sign_in(state, params, runtime)
        if params.name != "mcp_setup_request_secret" or "prompt_id" not in state:
            return None
        prompt_id, ref = state["prompt_id"], state["ref"]
        responses = getattr(params, "input_responses", None) or {}
        answer = responses.get(prompt_id)
        if getattr(answer, "action", None) != "accept":
            try:
                runtime.broker.cancel(prompt_id, "declined by the user")
            except Exception:  # noqa: BLE001 - already answered or gone
                pass
            message = f"The user declined to enter {state['key']}."
            return {"ok": False, "error": {"code": "prompt_cancelled", "message": message}}
        try:
            await runtime.broker.wait(prompt_id, timeout=runtime.settings.secret_prompt_timeout_seconds)
        except TimeoutError:
            return {"ok": True, "ref": ref, "prompt_id": prompt_id, "status": "pending",
                    "message": "The user has not entered it yet; ask again with mcp_setup_request_secret."}  # fmt: skip
        return {"ok": True, "ref": ref, "prompt_id": prompt_id, "status": "answered"}

    async def _resume_consent(self, consent_id: str, params: Any, runtime: Any) -> dict[str, Any] | None:
        """Wait for the user's answer to the consent; None when approved (the call runs again)."""
        answer = (getattr(params, "input_responses", None) or {}).get(consent_id)
        consents = runtime.consents
        if getattr(answer, "action", None) != "accept":
            try:
                consents.deny(consent_id, "declined by the user")
            except Exception:  # noqa: BLE001 - already answered on the page
                pass
        try:
            await consents.wait(consent_id, timeout=runtime.settings.secret_prompt_timeout_seconds)
        except TimeoutError:
            pass
        except Exception:  # noqa: BLE001 - answered and closed already: its status says how
            pass
        if consents.status(consent_id) == "approved":
            return None
        return {"ok": False, "error": {"code": "consent_denied",
                                       "message": "The user did not approve it (or has not yet); nothing ran."}}  # fmt: skip

    async def _resume_sign_in(self, state: dict[str, str], params: Any, runtime: Any) -> dict[str, Any]:
        """Wait for the sign-in behind ``state`` (bounded): the classic call's answer, no link."""
        ref, server = state["ref"], state["server"]
        answer = (getattr(params, "input_responses", None) or {}).get(state["sign_in"])
        if getattr(answer, "action", None) != "accept":
            runtime.refs.discard(ref)  # the flow's own wait ends with its timeout; the ref is gone now
            return {"ok": False, "error": {"code": "oauth_denied", "message": f"The user declined to sign in to {server}."}}
        settled = await self._settled(runtime.refs, ref, runtime.settings.secret_prompt_timeout_seconds)
        out = {"ref": ref, "server": server, "authorization_server": state["authorization_server"],
               "scopes": json.loads(state["scopes"])}  # fmt: skip
        if settled is None:
            return {**out, "status": "pending", "message": "The user has not finished signing in; the ref works once they have."}
        if not settled:
            return {"ok": False, "error": {"code": "oauth_error", "message": f"Signing in to {server} did not complete."}}
        return {**out, "status": "authorized"}

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
