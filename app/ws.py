"""The websocket ``/ws`` of the web face: browser sessions, agent runs, progress, server status.

Server → browser events (JSON objects, each with ``type``; every one passes the redactor as
the last gate, and none ever holds a secret value):

* ``hello {session_id}`` — first frame; send ``X-MCP-Setup-Session: <session_id>`` on ``/rpc``
  to have a JSON-RPC ``spawn_subagent`` (or ``mcp_setup_request_secret``) talk to this tab;
* ``secret_request {prompt_id, key_name, prompt, server, run_id?}`` — open the secret modal;
  the value goes to ``POST /api/secrets/{prompt_id}``, never over this socket;
* ``secret_done {prompt_id, key_name, status}`` — answered | cancelled | expired;
* ``agent_started {run_id, goal}``, ``agent_message {run_id, text}``,
  ``agent_question {run_id, question_id, question, choices}``,
  ``question_closed {run_id, question_id, answer?}`` (``answer`` only when it was a choice),
  ``agent_done {run_id, result: {status, server_id?, tools?, summary}}`` (the transcript is left
  out; JSON-RPC ``spawn_subagent`` returns it);
* ``progress {run_id?, stage, status, server?, message?, code?, tools?, protocol_version?}`` —
  ``stage`` is ``resolving`` | ``starting`` | ``handshake`` | ``tools_listed`` around test and
  install calls (``status`` started | done | failed, failures with the core's ``code``), or
  ``agent_step`` (``step`` tool_call | tool_result, ``tool``, ``ok?``, ``code?``) from the harness;
* ``server_status {server_id, status, reason?}`` — connecting | connected | failed | stopped;
* ``error {code, message}`` — a message from the browser could not be used.

Browser → server: ``start_agent {goal, driver?}``, ``answer {question_id, answer}``,
``cancel_agent {run_id?}``, ``ping``.

A run's events go to the session that started it (or named in ``X-MCP-Setup-Session``); when
that session is gone (a reload), the next session to connect adopts the run and gets its
history, open question and open secret prompts replayed. Events without an audience go to
every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import secrets
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from setup_agent.errors import PromptCancelled, SetupError

__all__ = ["AgentRun", "WebHub", "stage_for_code"]

log = logging.getLogger(__name__)

TEST = "mcp_setup_test_connection"
INSTALL = "mcp_setup_install_and_connect"
_MAX_LOG = 500
_MAX_QUEUE = 1000
_MAX_ANSWER = 2000
_MAX_GOAL = 2000
_CANCEL_GRACE = 10.0

Reporter = Callable[[dict[str, Any]], None]
#: Who hears about the stages of the test/install call running in this task (set per run or per RPC call).
current_reporter: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("mcp_setup_reporter", default=None)

_STARTING_CODES = {"exited", "command_not_found", "runtime_missing"}
_HANDSHAKE_CODES = {"rejected", "protocol_error", "timeout", "unreachable"}


def stage_for_code(code: str | None) -> str:
    """The stage a test/install error code belongs to."""
    if code in _STARTING_CODES:
        return "starting"
    if code in _HANDSHAKE_CODES:
        return "handshake"
    return "resolving"


def _report(event: dict[str, Any]) -> None:
    reporter = current_reporter.get()
    if reporter is not None:
        try:
            reporter(event)
        except Exception:  # noqa: BLE001 - a progress listener never breaks a call
            log.exception("progress reporter failed")


class ObservedService:
    """The setup service, reporting test/install stages to :data:`current_reporter`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def call(self, name: str, arguments: Any, ctx: Any = None) -> dict:
        if name not in (TEST, INSTALL):
            return await self._inner.call(name, arguments, ctx)
        server = arguments.get("qualified_name") if isinstance(arguments, dict) else None
        base = {"type": "progress", "server": server if isinstance(server, str) else None, "action": name}
        _report({**base, "stage": "resolving", "status": "started"})
        result = await self._inner.call(name, arguments, ctx)
        if isinstance(result, dict) and result.get("ok") is False:
            err = result.get("error") or {}
            code = err.get("code")
            _report({**base, "stage": stage_for_code(code), "status": "failed", "code": code, "message": err.get("message")})
        elif isinstance(result, dict):
            tools = [
                {"name": t.get("name"), "description": t.get("description") or ""}
                for t in result.get("tools") or []
                if isinstance(t, dict)
            ]
            event = {**base, "stage": "tools_listed", "status": "done", "tools": tools}
            if name == INSTALL:
                event["server_id"] = result.get("server_id")
                event["server_status"] = result.get("status")
            _report(event)
        return result


class ObservedProber:
    """The prober, reporting when a candidate starts and when it answered the handshake."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def probe(self, spec: Any, values: Any, **kwargs: Any) -> Any:
        _report({"type": "progress", "stage": "resolving", "status": "done"})
        _report({"type": "progress", "stage": "starting", "status": "started"})
        result = await self._inner.probe(spec, values, **kwargs)
        _report({"type": "progress", "stage": "starting", "status": "done"})
        _report(
            {
                "type": "progress",
                "stage": "handshake",
                "status": "done",
                "protocol_version": getattr(result, "protocol_version", None),
            }
        )
        return result


def _add_status_listener(connections: Any, callback: Callable[[Any], None]) -> None:
    """Hear every server status change (chained onto the manager's single ``on_status``)."""
    adder = getattr(connections, "add_status_listener", None)
    if callable(adder):
        adder(callback)
        return
    previous = getattr(connections, "_on_status", None)

    def chained(status: Any) -> None:
        if previous is not None:
            previous(status)
        callback(status)

    connections._on_status = chained


class _Session:
    """One websocket connection."""

    def __init__(self, session_id: str, websocket: WebSocket) -> None:
        self.id = session_id
        self.websocket = websocket
        self.queue: asyncio.Queue[str | None] = asyncio.Queue(_MAX_QUEUE)

    def send_text(self, text: str) -> None:
        try:
            self.queue.put_nowait(text)
        except asyncio.QueueFull:
            log.warning("web: dropped an event for a slow browser session")

    async def pump(self) -> None:
        while True:
            text = await self.queue.get()
            if text is None:
                return
            await self.websocket.send_text(text)


class _Question:
    def __init__(self, run: AgentRun, question_id: str, choices: list[str] | None) -> None:
        self.run = run
        self.id = question_id
        self.choices = choices
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()


class AgentRun:
    """One ``spawn_subagent`` run, talking with the browser: the harness's ChatIO."""

    def __init__(
        self,
        hub: WebHub,
        *,
        goal: str,
        archetype_id: str,
        driver: str | None,
        audience: str | None,
        installed_by: str,
    ) -> None:
        self.hub = hub
        self.id = "run_" + secrets.token_hex(6)
        self.goal = goal
        self.archetype_id = archetype_id
        self.driver = driver
        self.audience = audience
        self.installed_by = installed_by
        self.log: list[dict[str, Any]] = []
        self.cancelled = False
        self.prompts: set[str] = set()
        self.task: asyncio.Task[dict[str, Any]] | None = None
        self.result: dict[str, Any] | None = None

    # -- events -----------------------------------------------------------------------
    def emit(self, event: dict[str, Any], *, keep: bool = True) -> None:
        event = {**event, "run_id": self.id}
        if keep:
            self.log.append(event)
            del self.log[:-_MAX_LOG]
        self.hub.emit(event, audience=self.audience)

    def _check(self) -> None:
        if self.cancelled:
            from setup_agent.harness import AgentCancelled

            raise AgentCancelled("The user cancelled the setup.")

    # -- ChatIO -----------------------------------------------------------------------
    async def say(self, text: str) -> None:
        self._check()
        self.emit({"type": "agent_message", "text": str(text)})

    async def ask_user(self, question: str, choices: list[str] | None = None) -> str:
        self._check()
        qid = "q_" + secrets.token_hex(8)
        clean = [str(c) for c in choices] if choices else None
        event = {"type": "agent_question", "question_id": qid, "question": str(question), "choices": clean}
        q = _Question(self, qid, clean)
        self.hub.questions[qid] = q
        try:
            self.emit(event)
            return await q.future
        finally:
            self.hub.questions.pop(qid, None)

    async def present_secret(self, pending: Any) -> dict:
        self._check()
        from setup_agent.harness import AgentCancelled

        broker = self.hub.runtime.broker
        self.prompts.add(pending.prompt_id)
        self.hub.announce_prompt(pending, audience=self.audience, run=self)
        try:
            await broker.wait(pending.prompt_id, timeout=self.hub.runtime.settings.secret_prompt_timeout_seconds)
        except TimeoutError:
            return {"status": "pending", "message": "The user has not entered it yet."}
        except PromptCancelled:
            if self.cancelled:
                raise AgentCancelled("The user cancelled the setup.") from None
            raise
        finally:
            self.prompts.discard(pending.prompt_id)
        return {"status": "answered"}

    async def progress(self, event: dict) -> None:
        self._check()
        if not isinstance(event, dict):
            return
        out: dict[str, Any] = {"type": "progress", "stage": "agent_step", "step": event.get("type")}
        for key in ("name", "ok", "code", "turn"):
            if key in event:
                out["tool" if key == "name" else key] = event[key]
        self.emit(out)

    def report(self, event: dict[str, Any]) -> None:
        """Stages seen by :class:`ObservedService`/:class:`ObservedProber` during this run."""
        self.emit(event)

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> asyncio.Task[dict[str, Any]]:
        self.emit({"type": "agent_started", "goal": self.goal})
        self.task = asyncio.create_task(self._run(), name=f"mcp-setup-{self.id}")
        return self.task

    async def _run(self) -> dict[str, Any]:
        from setup_agent.harness import spawn_subagent

        current_reporter.set(self.report)
        result: dict[str, Any]
        try:
            result = await spawn_subagent(
                self.archetype_id,
                {"goal": self.goal},
                service=self.hub.service,
                redactor=self.hub.runtime.redactor,
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
            summary = "Stopped: mcp-setup is shutting down." if self.hub.closing else "Cancelled by the user."
            result = {"status": "cancelled", "summary": summary, "transcript": []}
            self._finish(result)
            return result
        except Exception:
            log.exception("agent run %s crashed", self.id)
            result = {"status": "failed", "summary": "The setup agent stopped on an internal error.", "transcript": []}
        result = self.hub.runtime.redactor.redact_obj(result)
        self._finish(result)
        return result

    def _finish(self, result: dict[str, Any]) -> None:
        self.result = result
        self._close_open()
        public = {k: v for k, v in result.items() if k != "transcript"}
        with contextlib.suppress(Exception):
            self.emit({"type": "agent_done", "result": public})
        self.hub.runs.pop(self.id, None)

    def _close_open(self, exc: BaseException | None = None) -> None:
        for q in [q for q in self.hub.questions.values() if q.run is self]:
            if not q.future.done():
                if exc is not None:
                    q.future.set_exception(exc)
                else:
                    q.future.cancel()
        for prompt_id in list(self.prompts):
            with contextlib.suppress(SetupError):
                self.hub.runtime.broker.cancel(prompt_id, "the setup was cancelled")

    def cancel(self) -> None:
        """The user pressed Cancel: close the open question and prompts; stop the task if it lingers."""
        if self.cancelled or self.task is None or self.task.done():
            return
        from setup_agent.harness import AgentCancelled

        self.cancelled = True
        self._close_open(AgentCancelled("The user cancelled the setup."))
        loop = asyncio.get_running_loop()
        loop.call_later(_CANCEL_GRACE, lambda: self.task.cancel() if self.task and not self.task.done() else None)


class WebHub:
    """Sessions, runs, open questions and web-shown prompts of one web face."""

    def __init__(self, runtime: Any, *, page_url: Callable[[str], str]) -> None:
        self.runtime = runtime
        self.redactor = runtime.redactor
        self.page_url = page_url
        self.sessions: dict[str, _Session] = {}
        self.runs: dict[str, AgentRun] = {}
        self.questions: dict[str, _Question] = {}
        self.prompts: dict[str, tuple[dict[str, Any], str | None]] = {}  # prompt_id -> (event, audience)
        self.service = ObservedService(runtime.service)
        self._unsubscribe: Callable[[], None] | None = None
        self.closing = False

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hook into the runtime: broker events, server status, probe stages."""
        self._unsubscribe = self.runtime.broker.subscribe(self._on_broker_event, loop=loop)
        _add_status_listener(self.runtime.connections, self._on_status)
        service = self.runtime.service
        if not isinstance(service.prober, ObservedProber):
            service.prober = ObservedProber(service.prober)

    async def aclose(self) -> None:
        self.closing = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        tasks = [run.task for run in list(self.runs.values()) if run.task is not None and not run.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        for session in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await session.websocket.close(code=1001)

    # -- sending ----------------------------------------------------------------------
    def encode(self, event: dict[str, Any]) -> str:
        """The frame for ``event``: redacted as an object, then as text (the last gate)."""
        clean = self.redactor.redact_obj(event)
        return self.redactor.redact(json.dumps(clean, ensure_ascii=False, default=str))

    def emit(self, event: dict[str, Any], *, audience: str | None = None) -> None:
        text = self.encode(event)
        target = self.sessions.get(audience) if audience else None
        if target is not None:
            target.send_text(text)
            return
        for session in list(self.sessions.values()):
            session.send_text(text)

    def announce_prompt(self, pending: Any, *, audience: str | None, run: AgentRun | None = None) -> None:
        event: dict[str, Any] = {
            "type": "secret_request",
            "prompt_id": pending.prompt_id,
            "key_name": pending.key_name,
            "prompt": pending.prompt,
            "server": pending.server,
        }
        if run is not None:
            event["run_id"] = run.id
        self.prompts[pending.prompt_id] = (event, audience)
        self.emit(event, audience=audience)

    def _on_broker_event(self, event: dict[str, Any]) -> None:
        if event.get("type") != "secret_done":
            return  # secret_request is announced by whoever presents the prompt (with its audience)
        entry = self.prompts.pop(event.get("prompt_id"), None)
        if entry is None:
            return
        self.emit(
            {
                "type": "secret_done",
                "prompt_id": event.get("prompt_id"),
                "key_name": event.get("key_name"),
                "status": event.get("status"),
            }
        )

    def _on_status(self, status: Any) -> None:
        event: dict[str, Any] = {"type": "server_status", "server_id": status.server_id, "status": status.status}
        if status.reason:
            event["reason"] = status.reason
        try:
            self.emit(event)
        except Exception:  # noqa: BLE001 - never break a connection
            log.exception("web: could not send a server status")

    # -- runs -------------------------------------------------------------------------
    def spawn(
        self,
        goal: str,
        *,
        archetype_id: str = "mcp_setup",
        driver: str | None = None,
        audience: str | None = None,
        installed_by: str = "agent",
    ) -> AgentRun:
        run = AgentRun(
            self, goal=goal, archetype_id=archetype_id, driver=driver, audience=audience, installed_by=installed_by
        )
        self.runs[run.id] = run
        run.start()
        return run

    def rpc_presenter(self, audience: str | None) -> Callable[[Any], Any]:
        """How a direct JSON-RPC ``mcp_setup_request_secret`` shows its prompt (does not wait)."""

        async def present(pending: Any) -> dict[str, Any]:
            self.announce_prompt(pending, audience=audience)
            return {
                "status": "pending",
                "url": self.page_url(pending.prompt_id),
                "message": (
                    f"The user can enter {pending.key_name} in the open mcp-setup page, or at this link. The ref "
                    "works once they have submitted it; the value is never shown to you."
                ),
            }

        return present

    # -- the websocket ----------------------------------------------------------------
    async def serve(self, websocket: WebSocket) -> None:
        if self.closing:
            await websocket.close(code=1001)
            return
        await websocket.accept()
        session = _Session("ses_" + secrets.token_hex(8), websocket)
        self.sessions[session.id] = session
        pump = asyncio.create_task(session.pump(), name=f"mcp-setup-ws-{session.id}")
        session.send_text(self.encode({"type": "hello", "session_id": session.id}))
        self._replay(session)
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                if text is None:
                    self._error(session, "invalid_message", "Messages must be JSON text.")
                    continue
                await self._handle(session, text)
        except WebSocketDisconnect:
            pass
        except Exception:  # noqa: BLE001 - one broken socket never takes the face down
            log.exception("web: websocket session failed")
        finally:
            self.sessions.pop(session.id, None)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump

    def _replay(self, session: _Session) -> None:
        """A new tab adopts runs and prompts whose session is gone, and sees them as they are."""
        for run in list(self.runs.values()):
            if run.audience is not None and run.audience in self.sessions and run.audience != session.id:
                continue
            run.audience = session.id if run.audience is not None else None
            for event in list(run.log):
                session.send_text(self.encode(event))
        for prompt_id, (event, audience) in list(self.prompts.items()):
            if audience is not None and audience in self.sessions and audience != session.id:
                continue
            try:
                self.runtime.broker.get(prompt_id)
            except SetupError:
                self.prompts.pop(prompt_id, None)
                continue
            if audience is not None:
                self.prompts[prompt_id] = (event, session.id)
            session.send_text(self.encode(event))

    def _error(self, session: _Session, code: str, message: str) -> None:
        session.send_text(self.encode({"type": "error", "code": code, "message": message}))

    async def _handle(self, session: _Session, text: str) -> None:
        try:
            msg = json.loads(text)
        except ValueError:
            self._error(session, "invalid_message", "Messages must be JSON objects.")
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            self._error(session, "invalid_message", "Messages must be JSON objects with a type.")
            return
        kind = msg["type"]
        if kind == "ping":
            session.send_text(self.encode({"type": "pong"}))
        elif kind == "start_agent":
            self._start_agent(session, msg)
        elif kind == "answer":
            self._answer(session, msg)
        elif kind == "cancel_agent":
            run_id = msg.get("run_id")
            for run in list(self.runs.values()):
                if run.id == run_id or (run_id is None and run.audience in (session.id, None)):
                    run.cancel()
        else:
            self._error(session, "unknown_message", f"Unknown message type {kind[:40]!r}.")

    def _start_agent(self, session: _Session, msg: dict[str, Any]) -> None:
        goal = msg.get("goal")
        if not isinstance(goal, str) or not goal.strip() or len(goal) > _MAX_GOAL:
            self._error(session, "invalid_input", "Tell the assistant what to set up (a short sentence).")
            return
        driver = msg.get("driver")
        if driver is not None and not isinstance(driver, str):
            self._error(session, "invalid_input", "driver must be a name.")
            return
        if any(run.audience == session.id for run in self.runs.values()):
            self._error(session, "agent_busy", "A setup is already running in this page. Cancel it first.")
            return
        run = self.spawn(goal.strip(), driver=driver, audience=session.id, installed_by="ui")
        assert run.task is not None
        run.task.add_done_callback(_ignore_outcome)

    def _answer(self, session: _Session, msg: dict[str, Any]) -> None:
        qid, answer = msg.get("question_id"), msg.get("answer")
        q = self.questions.get(qid) if isinstance(qid, str) else None
        if q is None or q.future.done():
            self._error(session, "question_closed", "That question is no longer open.")
            return
        if not isinstance(answer, str) or len(answer) > _MAX_ANSWER:
            self._error(session, "invalid_input", "The answer must be text (at most 2000 characters).")
            return
        q.future.set_result(answer)
        closed: dict[str, Any] = {"type": "question_closed", "question_id": qid}
        if q.choices and answer in q.choices:
            closed["answer"] = answer
        q.run.emit(closed)


def _ignore_outcome(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: reported as agent_done already
