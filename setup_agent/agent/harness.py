"""The agent harness: runs an archetype's driver over an allowlisted, redacted tool surface.

:func:`~setup_agent.agent.spawn.spawn_subagent` loads an archetype (``agents/*.toml``), builds an
:class:`AgentSession` and hands it to a driver (``guided`` or ``openai``). The session is the only way a driver
reaches the world: it refuses tools outside the archetype's allowlist (as a tool result the
model sees), passes every result through the redactor, keeps chat answers that look like
secrets out of everything, enforces the turn and time limits, and records the transcript
(refs only). Faces supply a :class:`ChatIO`; nothing here knows about terminals or the web.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Protocol

from setup_agent.errors import ConsentDenied, PromptCancelled, SetupError
from setup_agent.secrets import WITHHELD, PendingPrompt, Redactor, looks_like_secret, scrub_secrets
from setup_agent.setup import TOOL_NAMES, TOOL_SPECS, CallContext, SetupService

from .archetypes import Archetype

__all__ = [
    "CHAT_TOOL_SPECS",
    "WITHHELD",
    "AgentCancelled",
    "AgentInputEnded",
    "AgentLimitReached",
    "AgentSession",
    "ChatIO",
    "DriverError",
    "installed_summary",
    "looks_like_secret",
    "scrub_secrets",
]

logger = logging.getLogger(__name__)

CHAT_TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "say",
        "description": "Show a short message to the user (progress, an explanation, the final summary).",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "ask_user",
        "description": (
            "Ask the user a question and wait for the answer; offer choices when you can. Never ask for a "
            "secret (API key, token, password) this way: use mcp_setup_request_secret."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "question": {"type": "string"},
                "choices": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            },
            "required": ["question"],
        },
    },
]
_CHAT_TOOLS = frozenset(s["name"] for s in CHAT_TOOL_SPECS)
_KNOWN_TOOLS = frozenset(TOOL_NAMES) | _CHAT_TOOLS


class AgentCancelled(Exception):
    """The user cancelled (a ChatIO raises it from ``ask_user`` or ``present_secret``)."""


class AgentInputEnded(AgentCancelled):
    """The face's input ended before a question was answered (a script's stdin closed): no one
    cancelled, so the run ends ``failed`` (or not found, :attr:`AgentSession.not_found`), not cancelled."""


class AgentLimitReached(Exception):
    """The run hit its turn or time limit; the message is the summary."""


class DriverError(Exception):
    """A driver cannot go on (e.g. the model endpoint failed); the message is for the user."""


class ChatIO(Protocol):
    """How a face talks with the user during a run."""

    async def say(self, text: str) -> None: ...

    async def ask_user(self, question: str, choices: list[str] | None = None) -> str: ...

    async def present_secret(self, pending: PendingPrompt) -> dict: ...

    async def progress(self, event: dict) -> None: ...

    # Optional: ``async def present_consent(self, pending: PendingConsent) -> dict`` shows a
    # consent request (setup_agent/setup/consent.py) out of band and waits for the user's answer.


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


# -- the session --------------------------------------------------------------------------


class AgentSession:
    """One run: the drivers' only door to tools and the user."""

    def __init__(
        self,
        archetype: Archetype,
        goal: str,
        *,
        service: SetupService,
        redactor: Redactor,
        io: ChatIO,
        installed_by: str = "agent",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.archetype = archetype
        self.service = service
        self.redactor = redactor
        self.io = io
        self.installed_by = installed_by
        self.clock = clock
        unknown = [t for t in archetype.tools if t not in _KNOWN_TOOLS]
        if unknown:
            logger.warning("agent %s lists tools the harness does not provide: %s", archetype.id, unknown)
        self.tools: tuple[str, ...] = tuple(t for t in archetype.tools if t in _KNOWN_TOOLS)
        self.turns = 0
        self.started = clock()
        self.transcript: list[dict[str, Any]] = []
        self.installed: dict[str, Any] | None = None
        self._withheld: list[str] = []
        self._cancelled: AgentCancelled | None = None  # how a prompt or consent was cancelled
        #: The driver's last search found nothing: a run that ends there ends "not found".
        self.not_found = False
        self.goal, found = scrub_secrets(goal, redactor)
        self.goal_had_secret = bool(found)
        for value in found:
            self._withhold(value)
        self.record({"role": "user", "content": self.goal})

    # -- what the model may know ----------------------------------------------------------

    def found(self, anything: bool) -> None:
        """Whether the latest search found any server (a run that fails having found none ends ``not_found``)."""
        self.not_found = not anything

    def tool_specs(self) -> list[dict[str, Any]]:
        """``{name, description, inputSchema}`` of each allowlisted tool, in allowlist order."""
        specs = {s["name"]: s for s in [*TOOL_SPECS, *CHAT_TOOL_SPECS]}
        return [specs[name] for name in self.tools]

    def record(self, message: dict[str, Any]) -> None:
        """Append ``message`` to the transcript, redacted (refs and withheld markers only)."""
        self.transcript.append(self.redactor.redact_obj(message))

    def _withhold(self, value: str) -> None:
        if value and not self.redactor.contains_secret(value):
            self.redactor.register(value, WITHHELD)
            self._withheld.append(value)

    def close(self) -> None:
        for value in self._withheld:
            self.redactor.unregister(value)
        self._withheld.clear()

    # -- limits ---------------------------------------------------------------------------
    def _tick(self) -> None:
        self.turns += 1
        if self.turns > self.archetype.max_turns:
            raise AgentLimitReached(
                f"Stopped after {self.archetype.max_turns} tool calls without finishing: that is the "
                f"{self.archetype.id} agent's turn limit."
            )
        if self.clock() - self.started > self.archetype.max_seconds:
            raise AgentLimitReached(
                f"Stopped after {self.archetype.max_seconds:g} seconds without finishing: that is the "
                f"{self.archetype.id} agent's time limit."
            )

    # -- tools ----------------------------------------------------------------------------
    async def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run tool ``name`` for the driver. Failures are tool results; only the limits and a cancel raise."""
        self._tick()
        await self.io.progress({"type": "tool_call", "name": name, "turn": self.turns})
        if name not in self.tools:
            result = _error(
                "tool_not_allowed",
                "That is not one of your tools, so it was not run. Your tools: " + ", ".join(self.tools) + ".",
            )
        elif not isinstance(arguments, dict):
            result = _error("invalid_input", "Tool arguments must be a JSON object.")
        elif name == "say":
            result = await self._say(arguments)
        elif name == "ask_user":
            result = await self._ask(arguments)
        else:
            result = await self.service.call(
                name,
                arguments,
                CallContext(
                    installed_by=self.installed_by,
                    present_prompt=self._present,
                    on_progress=self.io.progress,
                    present_consent=self._present_consent,
                    present_authorization=self._present_authorization,
                ),
            )
            if self._cancelled is not None:
                raise type(self._cancelled)("The user cancelled the secret prompt.")
        result = self.redactor.redact_obj(result)
        if name == "mcp_setup_install_and_connect" and result.get("server_id"):
            self.installed = {**result, "qualified_name": arguments.get("qualified_name")}
        self.record({"role": "tool", "name": name, "arguments": arguments, "result": result})
        event: dict[str, Any] = {"type": "tool_result", "name": name, "ok": result.get("ok") is not False}
        if not event["ok"]:
            event["code"] = (result.get("error") or {}).get("code")
        await self.io.progress(event)
        return result

    async def _say(self, args: dict) -> dict:
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            return _error("invalid_input", "say needs a non-empty text.")
        await self.io.say(self.redactor.redact(text))
        return {"ok": True}

    async def _ask(self, args: dict) -> dict:
        question, choices = args.get("question"), args.get("choices")
        if not isinstance(question, str) or not question.strip():
            return _error("invalid_input", "ask_user needs a non-empty question.")
        if choices is not None and (
            not isinstance(choices, list) or not all(isinstance(c, str) for c in choices) or len(choices) > 20
        ):
            return _error("invalid_input", "choices must be a list of at most 20 strings.")
        answer = await self.io.ask_user(self.redactor.redact(question), self.redactor.redact_obj(choices) or None)
        answer = answer if isinstance(answer, str) else ""
        if looks_like_secret(answer, self.redactor):
            self._withhold(answer.strip())
            for token in scrub_secrets(answer)[1]:
                self._withhold(token)
            await self.io.say(
                "That looked like a secret, so I did not use it and it is not kept in this conversation. "
                "Secrets go only through the secret prompt."
            )
            return {
                "answer": WITHHELD,
                **_error(
                    "secret_in_chat",
                    "The answer looked like a secret, so it was withheld and not used. Never ask for secrets in "
                    "chat: request them with mcp_setup_request_secret.",
                ),
            }
        return {"answer": answer}

    async def _present(self, pending: PendingPrompt) -> dict:
        try:
            return await self.io.present_secret(pending)
        except AgentCancelled as exc:
            self._cancelled = exc
            with suppress(SetupError):
                self.service.broker.cancel(pending.prompt_id, "cancelled by the user")
            raise PromptCancelled(
                f"The user cancelled the request for {pending.key_name}.", key=pending.key_name
            ) from None

    async def _present_consent(self, pending: Any) -> dict:
        """The face asks the user to approve a launch (a ChatIO's optional ``present_consent``)."""
        present = getattr(self.io, "present_consent", None)
        if present is None:
            return {}
        try:
            return await present(pending) or {}
        except AgentCancelled as exc:
            self._cancelled = exc
            consents = getattr(self.service, "consents", None)
            with suppress(SetupError):
                if consents is not None:
                    consents.deny(pending.consent_id, "cancelled by the user")
            raise ConsentDenied("The user cancelled the consent request.") from None

    async def _present_authorization(self, info: dict[str, Any]) -> dict[str, Any]:
        """Show an OAuth sign-in: the face's own way if it has one, else as a message with the link."""
        present = getattr(self.io, "present_authorization", None)
        if present is not None:
            return await present(info)
        await self.io.say(f"{info['message']} Open this link to sign in: {info['url']}")
        return {"status": "shown"}

    # -- the result -----------------------------------------------------------------------
    def result(self, status: str, summary: str) -> dict[str, Any]:
        if self.installed is not None:
            status = "installed"
        out: dict[str, Any] = {"status": status, "summary": self.redactor.redact(summary)}
        if status == "failed" and self.not_found:
            out["reason"] = "not_found"  # nothing matched what was asked for (the CLI exits 3)
        if self.installed is not None:
            out["server_id"] = self.installed["server_id"]
            out["tools"] = self.installed.get("tools") or []
        self.record({"role": "result", "status": status, "summary": out["summary"]})
        out["transcript"] = list(self.transcript)
        return out


def installed_summary(installed: dict[str, Any]) -> str:
    """One sentence: what was installed and which tools are now available."""
    names = ", ".join(t.get("name", "?") for t in installed.get("tools") or []) or "none listed"
    name = installed.get("qualified_name") or installed["server_id"]
    state = installed.get("status", "connected")
    tail = "" if state == "connected" else f" It is installed but {state}: {installed.get('reason', 'see the log')}."
    if left := installed.get("left_out_by_user"):  # unticked in the consent
        tail = f" Left out, as you chose: {', '.join(left)}.{tail}"
    return f"Installed {name} ({installed['server_id']}). Tools now available: {names}.{tail}"
