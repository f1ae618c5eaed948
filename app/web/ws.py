"""The websocket ``/ws`` of the web face: browser sessions and the events sent to them.

Server → browser events (JSON objects, each with ``type``; every one passes the redactor as
the last gate, and none ever holds a secret value):

* ``hello {session_id}`` — first frame; send ``X-MCP-Setup-Session: <session_id>`` on ``/rpc``
  to have JSON-RPC calls (``spawn_subagent``, ``mcp_setup_request_secret``, test and install
  progress) talk to this tab;
* ``secret_request {prompt_id, key_name, prompt, server, run_id?}`` — open the secret modal;
  the value goes to ``POST /api/secrets/{prompt_id}``, never over this socket;
* ``secret_done {prompt_id, key_name, status}`` — answered | cancelled | expired;
* ``consent_request {consent_id, consent, run_id?}`` — open the consent modal (``consent``: the
  core's ConsentRequest: what runs, where each secret goes, editable destination settings,
  warnings); the answer goes to ``POST /api/consents/{consent_id}``;
* ``consent_done {consent_id, status}`` — approved | denied | expired;
* ``agent_started``, ``agent_message``, ``agent_question``, ``question_closed``, ``agent_done``
  — an agent run, each with ``run_id`` (see :mod:`app.web.agent_runs`);
* ``progress {action, server, stage, status, code?, message?, tools?, package?, server_id?,
  run_id?}`` — the core's stages of a test or install (``stage``: resolving | downloading
  (MCPB bundles) | starting | handshake | tools_listed | installing | connected; ``status``:
  started | done | failed, failures with the core's ``code``), from an agent run (``run_id``)
  or a JSON-RPC call; and ``progress {run_id, stage: "agent_step", step, tool, ok?, code?}``,
  the agent's tool calls;
* ``server_status {server_id, status, reason?}`` — connecting | connected | failed | stopped,
  from the connection manager's status listener;
* ``error {code, message}`` — a message from the browser could not be used.

Browser → server: ``start_agent {goal, driver?}``, ``answer {question_id, answer}``,
``cancel_agent {run_id?}``, ``ping``.

A run's events go to the session that started it (or named in ``X-MCP-Setup-Session``); when
that session is gone (a reload), the next session to connect adopts the run and gets its
history, open question and open secret prompts replayed. Events without an audience (or whose
session is gone) go to every session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from setup_agent.errors import SetupError

from .agent_runs import AgentRuns, oauth_request_event
from .relayed import RelayedRequests

__all__ = ["WebHub"]

log = logging.getLogger(__name__)

_MAX_QUEUE = 1000
_ANSWER_BURST = 8
_ANSWERS_PER_SECOND = 1.0
_PROMPTS_AT_ONCE = 8
_MAX_GOAL = 2000


class _Session:
    """One websocket connection: a bounded queue of frames and the task sending them.

    A tab that stops reading cannot hold the server up: frames past ``_MAX_QUEUE`` are dropped
    (one warning per backlog, not one per frame). Answers to the tab's own messages (``pong``,
    the ``error`` for a message it cannot use) are rate-limited (a burst of ``_ANSWER_BURST``,
    then ``_ANSWERS_PER_SECOND``; the page sends few messages, so it never meets the limit): a
    tab that floods messages without reading gets few frames ahead of the close answer. A
    websockets client stops reading its socket once 16 messages wait unread, and then could not
    see the server's close frame behind a thousand answers: it waited its 10 s close timeout and
    reported 1006.
    """

    def __init__(self, session_id: str, websocket: WebSocket, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.id = session_id
        self.websocket = websocket
        self.queue: asyncio.Queue[str | None] = asyncio.Queue(_MAX_QUEUE)
        self._clock = clock
        self._answers = float(_ANSWER_BURST)  # a token bucket
        self._refilled = clock()
        self._dropping = False
        # Secret prompts shown to this tab, and the ones held back until one of those closes: a tab
        # gets at most _PROMPTS_AT_ONCE of them at a time (sixty queued prompts hid the
        # server's close frame from a client that reads 16 frames ahead, and its close took 10 s).
        self.prompts_shown: set[str] = set()
        self.prompts_held: dict[str, str] = {}

    def show_prompt(self, prompt_id: str, text: str) -> None:
        if prompt_id in self.prompts_shown or prompt_id in self.prompts_held:
            return
        if len(self.prompts_shown) >= _PROMPTS_AT_ONCE:
            self.prompts_held[prompt_id] = text
            return
        self.prompts_shown.add(prompt_id)
        self.send_text(text)

    def prompt_done(self, prompt_id: str) -> None:
        self.prompts_held.pop(prompt_id, None)
        if prompt_id in self.prompts_shown:
            self.prompts_shown.discard(prompt_id)
            if self.prompts_held:  # the next one held back
                next_id = next(iter(self.prompts_held))
                self.show_prompt(next_id, self.prompts_held.pop(next_id))

    def send_text(self, text: str) -> bool:
        """Queue ``text``; False when it was dropped (the tab is too far behind)."""
        try:
            self.queue.put_nowait(text)
        except asyncio.QueueFull:
            if not self._dropping:
                self._dropping = True
                log.warning("web: a browser session is not reading; dropping its events until it catches up")
            return False
        return True

    def send_answer(self, text: str) -> bool:
        """Queue an answer to the tab's own message, unless the tab is over its answer rate."""
        now = self._clock()
        self._answers = min(float(_ANSWER_BURST), self._answers + (now - self._refilled) * _ANSWERS_PER_SECOND)
        self._refilled = now
        if self._answers < 1:
            return False
        self._answers -= 1
        return self.send_text(text)

    async def pump(self) -> None:
        while True:
            text = await self.queue.get()
            if text is None:
                return
            if self._dropping and self.queue.qsize() < _MAX_QUEUE // 2:
                self._dropping = False
            await self.websocket.send_text(text)


class WebHub:
    """The browser sessions of one web face, the events sent to them, and web-shown prompts."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.redactor = runtime.redactor
        self.sessions: dict[str, _Session] = {}
        self.prompts: dict[str, tuple[dict[str, Any], str | None]] = {}  # prompt_id -> (event, audience)
        self.consents: dict[str, tuple[dict[str, Any], str | None]] = {}  # consent_id -> (event, audience)
        #: More events a new tab is handed (e.g. other processes' consents, see foreign.py).
        self.replays: list[Callable[[], list[dict[str, Any]]]] = []
        self.agents = AgentRuns(
            runtime,
            emit=lambda event, audience: self.emit(event, audience=audience),
            announce_prompt=lambda pending, audience, run_id: self.announce_prompt(
                pending, audience=audience, run_id=run_id
            ),
            announce_consent=lambda pending, audience, run_id: self.announce_consent(
                pending, audience=audience, run_id=run_id
            ),
        )
        #: Installed servers' requests shown in a tab that ran their tool, waiting for an answer (relayed.py).
        self.relayed = RelayedRequests()
        self._unsubscribe: list[Callable[[], None]] = []
        self.closing = False

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Listen to the runtime: the broker's prompt events and every server's status."""
        self._unsubscribe.append(self.runtime.broker.subscribe(self._on_broker_event, loop=loop))
        self._unsubscribe.append(self.runtime.connections.add_status_listener(self._on_status))
        if getattr(self.runtime, "consents", None) is not None:
            self._unsubscribe.append(self.runtime.consents.subscribe(self._on_consent_event, loop=loop))

    async def aclose(self) -> None:
        """Stop listening, end the agent runs, close the websockets (idempotent)."""
        self.closing = True
        while self._unsubscribe:
            self._unsubscribe.pop()()
        await self.agents.aclose()
        for session in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await session.websocket.close(code=1001)

    # -- sending ----------------------------------------------------------------------
    def encode(self, event: dict[str, Any]) -> str:
        """The frame for ``event``: redacted as an object, then as text (the last gate)."""
        clean = self.redactor.redact_obj(event)
        return self.redactor.redact(json.dumps(clean, ensure_ascii=False, default=str))

    def emit(self, event: dict[str, Any], *, audience: str | None = None) -> None:
        """Send ``event`` to session ``audience``; to every session without one or when it is gone."""
        text = self.encode(event)
        target = self.sessions.get(audience) if audience else None
        if target is not None:
            target.send_text(text)
            return
        for session in list(self.sessions.values()):
            session.send_text(text)

    def progress_to(self, audience: str | None) -> Callable[[dict[str, Any]], Any]:
        """A core ``on_progress`` hook sending each progress event to ``audience``."""

        async def on_progress(event: dict[str, Any]) -> None:
            self.emit(event, audience=audience)

        return on_progress

    def announce_prompt(self, pending: Any, *, audience: str | None, run_id: str | None = None) -> None:
        """Open the secret modal for ``pending`` (kept until answered, for tabs that connect later)."""
        event: dict[str, Any] = {
            "type": "secret_request",
            "prompt_id": pending.prompt_id,
            "key_name": pending.key_name,
            "prompt": pending.prompt,
            "server": pending.server,
        }
        if run_id is not None:
            event["run_id"] = run_id
        self.prompts[pending.prompt_id] = (event, audience)
        self.show_prompt(event, audience=audience)

    def show_prompt(self, event: dict[str, Any], *, audience: str | None = None) -> None:
        """A ``secret_request`` to ``audience`` (else every tab), a few at a time per tab."""
        text = self.encode(event)
        target = self.sessions.get(audience) if audience else None
        for session in [target] if target is not None else list(self.sessions.values()):
            session.show_prompt(str(event.get("prompt_id")), text)

    def prompt_closed(self, event: dict[str, Any]) -> None:
        """A ``secret_done``: every tab is told, and gets the next prompt it was holding back."""
        self.emit(event)
        for session in list(self.sessions.values()):
            session.prompt_done(str(event.get("prompt_id")))

    def announce_consent(self, pending: Any, *, audience: str | None, run_id: str | None = None) -> None:
        """Open the consent modal for ``pending`` (kept until answered, for tabs that connect later)."""
        event: dict[str, Any] = {
            "type": "consent_request",
            "consent_id": pending.consent_id,
            "consent": pending.request.public(),
        }
        if run_id is not None:
            event["run_id"] = run_id
        self.consents[pending.consent_id] = (event, audience)
        self.emit(event, audience=audience)

    def _on_consent_event(self, event: dict[str, Any]) -> None:
        consent = event.get("consent")
        if (
            event.get("type") == "consent_request"
            and isinstance(consent, dict)
            and consent.get("action") == "tools_change"
        ):
            # A changed tool list of an installed server (pins.py): every tab may answer it.
            shown = {"type": "consent_request", "consent_id": event.get("consent_id"), "consent": consent}
            self.consents[str(event.get("consent_id"))] = (shown, None)
            self.emit(shown)
            return
        if event.get("type") != "consent_done" or self.consents.pop(event.get("consent_id"), None) is None:
            return
        self.emit({"type": "consent_done", "consent_id": event.get("consent_id"), "status": event.get("status")})

    def announce_authorization(self, info: dict[str, Any], *, audience: str | None, run_id: str | None = None) -> None:
        """Open the sign-in box: the sign-in service's host, the scopes and the link (no token)."""
        event = oauth_request_event(info)
        if run_id is not None:
            event["run_id"] = run_id
        self.emit(event, audience=audience)

    def _on_broker_event(self, event: dict[str, Any]) -> None:
        if event.get("type") != "secret_done":
            return  # secret_request is announced by whoever presents the prompt (with its audience)
        entry = self.prompts.pop(event.get("prompt_id"), None)
        if entry is None:
            return
        self.prompt_closed(
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
                self._handle(session, text)
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
        if getattr(self.runtime, "review", None) is not None:
            try:  # tool-list changes waiting for the user (their consents may have expired)
                self.runtime.review.sync()
            except Exception:  # noqa: BLE001 - never keeps a tab out
                log.exception("web: could not list the tool-list changes")
        for event in self.agents.adopt(session.id, self.sessions):
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
            session.show_prompt(prompt_id, self.encode(event))
        for consent_id, (event, audience) in list(self.consents.items()):
            if audience is not None and audience in self.sessions and audience != session.id:
                continue
            if self.runtime.consents.status(consent_id) != "pending":
                self.consents.pop(consent_id, None)
                continue
            if audience is not None:
                self.consents[consent_id] = (event, session.id)
            session.send_text(self.encode(event))
        for replay in self.replays:
            for event in replay():
                if event.get("type") == "secret_request":
                    session.show_prompt(str(event.get("prompt_id")), self.encode(event))
                else:
                    session.send_text(self.encode(event))

    def _error(self, session: _Session, code: str, message: str) -> None:
        session.send_answer(self.encode({"type": "error", "code": code, "message": message}))

    def _handle(self, session: _Session, text: str) -> None:
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
            session.send_answer(self.encode({"type": "pong"}))
        elif kind == "start_agent":
            self._start_agent(session, msg)
        elif kind == "answer":
            error = self.agents.answer(msg.get("question_id"), msg.get("answer"))
            if error is not None:
                self._error(session, *error)
        elif kind == "cancel_agent":
            self.agents.cancel(msg.get("run_id"), session.id)
        else:
            self._error(
                session, "unknown_message", "Unknown message type; see app/web/ws.py for the ones the page sends."
            )

    def _start_agent(self, session: _Session, msg: dict[str, Any]) -> None:
        goal = msg.get("goal")
        if not isinstance(goal, str) or not goal.strip() or len(goal) > _MAX_GOAL:
            self._error(session, "invalid_input", "Tell the assistant what to set up (a short sentence).")
            return
        driver = msg.get("driver")
        if driver is not None and not isinstance(driver, str):
            self._error(session, "invalid_input", "driver must be a name.")
            return
        if self.agents.busy(session.id):
            self._error(session, "agent_busy", "A setup is already running in this page. Cancel it first.")
            return
        run = self.agents.spawn(goal.strip(), driver=driver, audience=session.id, installed_by="ui")
        assert run.task is not None
        run.task.add_done_callback(_ignore_outcome)


def _ignore_outcome(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: reported as agent_done already
