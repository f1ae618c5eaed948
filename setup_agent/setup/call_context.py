"""One tool call's context: who calls, how its face shows prompts, consents and sign-ins, who
hears its progress (:class:`CallContext`), and the progress events of a test or install
(:class:`Progress`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from setup_agent.errors import SetupError
from setup_agent.secrets import PendingPrompt, Redactor
from setup_agent.translation import translate

from .consent import ConsentPresenter

__all__ = ["CallContext", "Presenter", "Progress", "ProgressHook"]

logger = logging.getLogger(__name__)


#: A face's way of showing a secret prompt to the user. It may wait for the answer (URL
#: elicitation) and returns extra fields for the tool result (e.g. ``{"url": ...}``).
Presenter = Callable[[PendingPrompt], Awaitable[dict[str, Any]]]

#: Hears the stages of a test or install: ``{"type": "progress", "stage", "status", "server",
#: "action", "code"?, "message"?, "tools"?}``. Stages: resolving, downloading, starting,
#: handshake, tools_listed, installing, connected.
ProgressHook = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class CallContext:
    """Who is calling, how this face shows secret prompts, and who hears progress."""

    installed_by: str = "agent"
    #: Who calls, as the guessing guard counts them (one opaque key: a session id,
    #: ``token:NAME``, ``user:terminal``, a stdio client's key…); None: ``installed_by``.
    principal: str | None = None
    #: Who authenticated, as the audit names it beside ``installed_by`` (``client:stdio via
    #: cursor`` beside ``mcp:cursor``); None: ``installed_by`` alone.
    audited_as: str | None = None
    present_prompt: Presenter | None = None
    on_progress: ProgressHook | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The user consented (out of band, never through the agent) to a launch that puts a
    #: secret on the command line; without it such a launch is refused with ``argv_secret``.
    #: Set by a face for a person's own command (never from a tool argument); an approval in
    #: the consent step, which shows that warning, allows it too.
    allow_argv_secret: bool = False
    #: How this face asks the user to approve a launch (see setup_agent/setup/consent.py).
    present_consent: ConsentPresenter | None = None
    #: Shows an OAuth sign-in (server, url, authorization_server, scopes, message) to the user;
    #: returns ``{"status": "pending", …}`` when it does not wait (see setup_agent/oauth/sign_ins.py).
    present_authorization: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    #: A person's command's own checks (``mcp-setup apply``: the lock file's; never a tool argument),
    #: raising to stop: ``check_prepared(prepared)`` once the launch is worked out, before the consent
    #: and before anything runs; ``check_tools(tools)`` with the tool list the install's test saw (as
    #: it would be pinned), before the commit, so a refusal leaves nothing installed.
    check_prepared: Callable[[Any], Awaitable[None]] | None = None
    check_tools: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None
    #: Tools to leave out at install, chosen by the person for a command of their own (``mcp-setup
    #: apply``: the lock file's ``left_out``; never a tool argument), as if unticked in the consent.
    left_out: frozenset[str] = frozenset()
    #: Who asked for this call, when it is not who installs (``installed_by``): the person pressing
    #: Update on a server an AI client installed (``ui``), ``mcp-setup update`` (``cli``). Named in
    #: the consent ("You asked to update …"); None: ``installed_by``.
    asked_by: str | None = None


class Progress:
    """Emits progress events for one call and remembers the stage a failure belongs to."""

    def __init__(self, ctx: CallContext, redactor: Redactor, action: str, server: str | None) -> None:
        self.ctx, self.redactor, self.base = ctx, redactor, {"type": "progress", "action": action, "server": server}
        self.stage = "resolving"
        self.download_failed = False  # the download phase ended without the package (npm 404, …)

    async def __call__(self, stage: str, status: str, **extra: Any) -> None:
        self.stage = stage
        if stage == "downloading" and status == "done":
            self.download_failed = extra.get("ok") is False
        if self.ctx.on_progress is None:
            return
        try:
            await self.ctx.on_progress(
                self.redactor.redact_obj({**self.base, "stage": stage, "status": status, **extra})
            )
        except Exception:  # a progress listener never breaks a call
            logger.exception("progress listener failed")

    async def failed(self, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            return
        err = exc if isinstance(exc, SetupError) else translate(exc)
        stage = self.stage
        if stage == "starting" and err.code in ("rejected", "protocol_error", "timeout", "unreachable"):
            stage = "handshake"  # it started, then failed to speak MCP
        extra = {"reason": err.details["reason"]} if isinstance(err.details.get("reason"), str) else {}
        if stage == "starting" and self.download_failed and err.details.get("failed") == "package":
            stage = "downloading"  # the runner could not fetch the package: not a crash
        await self(stage, "failed", code=err.code, message=err.message, **extra)
