"""Agent runs of the web face: each ``spawn_subagent`` run, and its ChatIO towards a browser tab.

An :class:`AgentRun` is the harness's ChatIO. It turns what the harness says into events for
its audience (a websocket session id, or ``None`` for every tab), each tagged with ``run_id``:

* ``agent_started {goal}``, ``agent_message {text}``, ``agent_question {question_id, question,
  choices}``, ``question_closed {question_id, answer?}``, ``agent_done {result}`` (the
  transcript is left out);
* ``progress`` — the core's stages of a test or install, forwarded as the core sent them
  (``{action, server, stage, status, code?, message?, tools?, package?, server_id?}``, see
  :class:`setup_agent.setup.service.CallContext`), and the harness's own tool steps as ``progress
  {stage: "agent_step", step: "tool_call" | "tool_result", tool, ok?, code?, turn?}``;
* secret prompts go through ``announce_prompt`` and consent requests through
  ``announce_consent`` (the websocket hub shows them); the run waits for the user's answer.

:class:`AgentRuns` holds the live runs and their open questions. A run keeps its recent events
so a tab that takes it over (after a reload) can replay them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Container
from typing import Any

from setup_agent.errors import PromptCancelled, SetupError

__all__ = ["AgentRun", "AgentRuns", "oauth_request_event"]

log = logging.getLogger(__name__)

_MAX_LOG = 500
_MAX_ANSWER = 2000
_CANCEL_GRACE = 10.0

#: ``emit(event, audience)``: send an event to one session (``None``: every session).
Emit = Callable[[dict[str, Any], str | None], None]
#: ``announce_prompt(pending, audience, run_id)``: show a secret prompt in the browser.
Announce = Callable[[Any, str | None, str | None], None]


class _Question:
    def __init__(self, run: AgentRun, question_id: str, choices: list[str] | None) -> None:
        self.run = run
        self.id = question_id
        self.choices = choices
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()


def _cancelled() -> Exception:
    from setup_agent.agent import AgentCancelled

    return AgentCancelled("The user cancelled the setup.")


class AgentRun:
    """One ``spawn_subagent`` run, talking with the browser: the harness's ChatIO."""

    def __init__(
        self,
        runs: AgentRuns,
        *,
        goal: str,
        archetype_id: str,
        driver: str | None,
        audience: str | None,
        installed_by: str,
    ) -> None:
        self.runs = runs
        self.runtime = runs.runtime
        self.id = "run_" + secrets.token_hex(6)
        self.goal = goal
        self.archetype_id = archetype_id
        self.driver = driver
        self.audience = audience
        self.installed_by = installed_by
        self.log: list[dict[str, Any]] = []
        self.cancelled = False
        self.prompts: set[str] = set()
        self.consent_ids: set[str] = set()
        self.task: asyncio.Task[dict[str, Any]] | None = None
        self.result: dict[str, Any] | None = None

    # -- events -----------------------------------------------------------------------

    def hand_to(self, audience: str | None) -> None:
        """A new session takes this run over: its events go there from now on."""
        self.audience = audience

    def emit(self, event: dict[str, Any], *, keep: bool = True) -> None:
        event = {**event, "run_id": self.id}
        if keep:
            self.log.append(event)
            del self.log[:-_MAX_LOG]
        self.runs.emit(event, self.audience)

    def _check(self) -> None:
        if self.cancelled:
            raise _cancelled()

    # -- ChatIO -----------------------------------------------------------------------
    async def say(self, text: str) -> None:
        self._check()
        self.emit({"type": "agent_message", "text": str(text)})

    async def ask_user(self, question: str, choices: list[str] | None = None) -> str:
        self._check()
        qid = "q_" + secrets.token_hex(8)
        clean = [str(c) for c in choices] if choices else None
        q = _Question(self, qid, clean)
        self.runs.questions[qid] = q
        try:
            self.emit({"type": "agent_question", "question_id": qid, "question": str(question), "choices": clean})
            return await q.future
        finally:
            self.runs.questions.pop(qid, None)

    async def present_authorization(self, info: dict[str, Any]) -> dict:
        """An OAuth sign-in: the page shows the sign-in box; the run waits for the sign-in."""
        self._check()
        self.emit(oauth_request_event(info), keep=False)
        return {"status": "shown"}

    async def present_secret(self, pending: Any) -> dict:
        self._check()
        self.prompts.add(pending.prompt_id)
        self.runs.announce_prompt(pending, self.audience, self.id)
        try:
            timeout = self.runtime.settings.secret_prompt_timeout_seconds
            await self.runtime.broker.wait(pending.prompt_id, timeout=timeout)
        except TimeoutError:
            return {"status": "pending", "message": "The user has not entered it yet."}
        except PromptCancelled:
            if self.cancelled:
                raise _cancelled() from None
            raise
        finally:
            self.prompts.discard(pending.prompt_id)
        return {"status": "answered"}

    async def present_consent(self, pending: Any) -> dict:
        self._check()
        self.consent_ids.add(pending.consent_id)
        self.runs.announce_consent(pending, self.audience, self.id)
        try:
            await self.runtime.consents.wait(
                pending.consent_id, timeout=self.runtime.settings.secret_prompt_timeout_seconds
            )
        except TimeoutError:
            return {"status": "pending"}
        finally:
            self.consent_ids.discard(pending.consent_id)
        self._check()
        return {}

    async def progress(self, event: dict) -> None:
        if not isinstance(event, dict):
            return
        if event.get("type") == "progress":
            # The core's stage of a test or install (already redacted). The core calls this in the
            # middle of the call: never raise here, a cancel is seen at the harness's next step.
            self.emit(event)
            return
        self._check()
        out: dict[str, Any] = {"type": "progress", "stage": "agent_step", "step": event.get("type")}
        for key in ("name", "ok", "code", "turn"):
            if key in event:
                out["tool" if key == "name" else key] = event[key]
        self.emit(out)

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> asyncio.Task[dict[str, Any]]:
        self.emit({"type": "agent_started", "goal": self.goal})
        self.task = asyncio.create_task(self._run(), name=f"mcp-setup-{self.id}")
        return self.task

    async def _run(self) -> dict[str, Any]:
        from setup_agent.agent import spawn_subagent

        result: dict[str, Any]
        try:
            result = await spawn_subagent(
                self.archetype_id,
                {"goal": self.goal},
                service=self.runtime.service,
                redactor=self.runtime.redactor,
                io=self,
                driver=self.driver,
                installed_by=self.installed_by,
            )
        except (KeyError, ValueError) as exc:  # unknown archetype/driver, bad goal: the caller's mistake
            message = exc.args[0] if exc.args else str(exc)
            self._finish({"status": "failed", "summary": str(message), "transcript": []})
            raise
        except asyncio.CancelledError:
            # This task's own top level: mcp-setup is stopping (or a cancelled run would not end).
            summary = "Stopped: mcp-setup is shutting down." if self.runs.closing else "Cancelled by the user."
            result = {"status": "cancelled", "summary": summary, "transcript": []}
            self._finish(result)
            return result
        except Exception:
            log.exception("agent run %s crashed", self.id)
            result = {"status": "failed", "summary": "The setup agent stopped on an internal error.", "transcript": []}
        result = self.runtime.redactor.redact_obj(result)
        self._finish(result)
        return result

    def _finish(self, result: dict[str, Any]) -> None:
        self.result = result
        self._close_open()
        public = {k: v for k, v in result.items() if k != "transcript"}
        with contextlib.suppress(Exception):
            self.emit({"type": "agent_done", "result": public})
        self.runs.runs.pop(self.id, None)

    def _close_open(self, exc: BaseException | None = None) -> None:
        for q in [q for q in self.runs.questions.values() if q.run is self]:
            if not q.future.done():
                if exc is not None:
                    q.future.set_exception(exc)
                else:
                    q.future.cancel()
        for prompt_id in list(self.prompts):
            with contextlib.suppress(SetupError):
                self.runtime.broker.cancel(prompt_id, "the setup was cancelled")
        for consent_id in list(self.consent_ids):
            with contextlib.suppress(SetupError):
                self.runtime.consents.deny(consent_id, "the setup was cancelled")

    def cancel(self) -> None:
        """The user pressed Cancel: close the open question and prompts; stop the task if it lingers."""
        if self.cancelled or self.task is None or self.task.done():
            return
        self.cancelled = True
        self._close_open(_cancelled())
        loop = asyncio.get_running_loop()
        loop.call_later(_CANCEL_GRACE, lambda: self.task.cancel() if self.task and not self.task.done() else None)


class AgentRuns:
    """The live agent runs of one web face and their open questions."""

    def __init__(
        self, runtime: Any, *, emit: Emit, announce_prompt: Announce, announce_consent: Announce | None = None
    ) -> None:
        self.runtime = runtime
        self.emit = emit
        self.announce_prompt = announce_prompt
        self.announce_consent = announce_consent or (lambda pending, audience, run_id: None)
        self.runs: dict[str, AgentRun] = {}
        self.questions: dict[str, _Question] = {}
        self.closing = False

    def spawn(
        self,
        goal: str,
        *,
        archetype_id: str = "mcp_setup",
        driver: str | None = None,
        audience: str | None = None,
        installed_by: str = "agent",
    ) -> AgentRun:
        """Start a run; its task ends with the result (``run.task``)."""
        run = AgentRun(
            self, goal=goal, archetype_id=archetype_id, driver=driver, audience=audience, installed_by=installed_by
        )
        self.runs[run.id] = run
        run.start()
        return run

    def busy(self, audience: str) -> bool:
        """Whether a run is talking with this session."""
        return any(run.audience == audience for run in self.runs.values())

    def answer(self, question_id: Any, answer: Any) -> tuple[str, str] | None:
        """Answer an open question; returns an error ``(code, message)`` when it cannot be used."""
        q = self.questions.get(question_id) if isinstance(question_id, str) else None
        if q is None or q.future.done():
            return "question_closed", "That question is no longer open."
        if not isinstance(answer, str) or len(answer) > _MAX_ANSWER:
            return "invalid_input", f"The answer must be text (at most {_MAX_ANSWER} characters)."
        q.future.set_result(answer)
        closed: dict[str, Any] = {"type": "question_closed", "question_id": question_id}
        if q.choices and answer in q.choices:
            closed["answer"] = answer
        q.run.emit(closed)
        return None

    def cancel(self, run_id: Any, audience: str) -> None:
        """Cancel run ``run_id``, or (``None``) the runs talking with ``audience`` or with every tab."""
        for run in list(self.runs.values()):
            if run.id == run_id or (run_id is None and run.audience in (audience, None)):
                run.cancel()

    def adopt(self, session_id: str, live: Container[str]) -> list[dict[str, Any]]:
        """A new session takes over the runs whose session is gone; returns their events to replay."""
        replay: list[dict[str, Any]] = []
        for run in list(self.runs.values()):
            if run.audience is not None and run.audience in live and run.audience != session_id:
                continue
            run.hand_to(session_id if run.audience is not None else None)
            replay.extend(run.log)
        return replay

    async def aclose(self) -> None:
        """Shutting down: cancel every run and wait (bounded) for it to end."""
        self.closing = True
        tasks = [run.task for run in list(self.runs.values()) if run.task is not None and not run.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)


def oauth_request_event(info: dict[str, Any]) -> dict[str, Any]:
    """The ``oauth_request`` frame for an OAuth sign-in (``SignIns`` info; never a token)."""
    return {
        "type": "oauth_request",
        "server": info.get("server"),
        "authorization_server": info.get("authorization_server"),
        "scopes": list(info.get("scopes") or []),
        "message": info.get("message"),
        "url": info.get("url"),
    }
