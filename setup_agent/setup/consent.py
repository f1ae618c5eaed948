"""Consent: the user, never the agent, approves what runs and where secrets go.

Before a test-connect or an install runs third-party code (or sends a secret to a remote),
the service builds a :class:`ConsentRequest` from the prepared launch spec: the runner,
package, exact version or sha256, the command line with ``${KEY}`` templates (never values),
the host each secret is sent to, the *destination settings* (URL template variables and
``*_URL``/``*_HOST``-like settings, whose values the agent only suggests), and warnings the
user must accept explicitly (e.g. ``argv_secret``). The :class:`ConsentBroker` holds pending
consents until a face's out-of-band channel (web modal, one-time page, terminal prompt)
answers them; an approval carries the user's values for the destination settings, which are
the ones used. Approvals are remembered per (server, version, launch spec, suggested
destinations, warnings) for the ref TTL. ``mode="never-ask"`` turns consent off.

The broker is thread-safe (the one-time page answers from its own thread) and emits
value-free events: ``consent_request {consent_id, consent}`` and ``consent_done {consent_id,
status}`` (approved | denied | expired).

The request and its builder are in ``consent_request.py`` (importable from here as before).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets as _random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from setup_agent.errors import ConsentDenied, ConsentNotFound, ConsentRequired, InvalidInput
from setup_agent.pulls import Pulls

from .consent_choices import choice_words, validated_choices
from .consent_decision import ConsentDecision, validated_hidden_tools, validated_settings
from .consent_request import (
    ConsentRequest,
    ConsentWarning,
    DestinationSetting,
    SecretDestination,
    build_consent_request,
    is_destination_setting,
)
from .sandbox_choice import validated_sandbox_choice

__all__ = [
    "ConsentBroker",
    "ConsentDecision",
    "ConsentMode",
    "ConsentSharing",
    "NotShared",
    "ConsentRequest",
    "ConsentWarning",
    "DestinationSetting",
    "PendingConsent",
    "SecretDestination",
    "build_consent_request",
    "is_destination_setting",
    "obtain_consent",
]

log = logging.getLogger(__name__)

ConsentMode = Literal["ask", "never-ask"]
_TOMBSTONES = 10_000


class DecisionsElsewhere(Protocol):
    """Approvals remembered where every replica of a team's gateway reads them
    (setup_agent/setup/shared_consents.py ``SharedDecisions``)."""

    def recall(self, request: ConsentRequest) -> ConsentDecision | None: ...

    def remember(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None: ...

    def forget(self, server: str) -> None: ...


@dataclass(frozen=True)
class PendingConsent:
    consent_id: str
    request: ConsentRequest
    created_at: float


# -- the broker ---------------------------------------------------------------------------

Event = dict[str, Any]


@dataclass(eq=False)
class _State:
    pending: PendingConsent
    status: str = "pending"  # pending | approved | denied | expired
    decision: ConsentDecision | None = None
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)


_UNKNOWN = "This consent request is unknown (already closed, expired, or from before a restart)."


class ConsentAudit(Protocol):
    """Where answers to consents are audited (the store's ``record_event``)."""

    def __call__(
        self, event: str, *, actor: str, qualified_name: str | None = None, detail: str | None = None
    ) -> None: ...


def answer_detail(request: ConsentRequest, decision: ConsentDecision) -> str:
    """What an approval granted, for the audit: the launch's fingerprint, the sandbox as approved
    (the person's widening), the destinations chosen and the tools left out. Never a value."""
    choice = decision.sandbox.public()
    parts = [
        f"launch {request.fingerprint}",
        "sandbox " + (json.dumps(choice, sort_keys=True, separators=(",", ":")) if choice else "as shown"),
    ]
    if decision.settings:
        parts.append("destinations " + ", ".join(f"{k}={v}" for k, v in sorted(decision.settings.items())))
    if decision.hidden_tools:
        parts.append("tools left out " + ", ".join(sorted(decision.hidden_tools)))
    parts += choice_words(request, decision.choices)
    return "; ".join(parts)[:512]


class ConsentSharing(Protocol):
    """Where else a broker's consents live, chosen once when the broker is built: nowhere
    (:class:`NotShared`), every process on one data dir, or a team's replicas
    (``shared_consents.py``). The broker hands itself to the calls that answer in it."""

    #: Whether answers may come from elsewhere: a waiting consent then looks every half second.
    polls: bool

    def event(self, broker: ConsentBroker, event: Event) -> None:
        """Each value-free event of ``broker``, before its subscribers hear it."""

    def pull(self, broker: ConsentBroker) -> None:
        """Apply in ``broker`` the answers given elsewhere."""

    def adopt(self, request: ConsentRequest) -> tuple[str, float] | None:
        """``(id, age in seconds)`` of a consent pending elsewhere to wait on instead of a new one."""

    def recall(self, request: ConsentRequest) -> ConsentDecision | None:
        """An approval of ``request`` remembered elsewhere."""

    def remember(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None:
        """``request`` was approved here: remember it elsewhere too."""

    def forget(self, server: str) -> None:
        """``server`` was removed: its approvals go elsewhere too."""


class NotShared:
    """One broker's consents, shared with no one."""

    polls = False

    def event(self, broker: ConsentBroker, event: Event) -> None:
        pass

    def pull(self, broker: ConsentBroker) -> None:
        pass

    def adopt(self, request: ConsentRequest) -> tuple[str, float] | None:
        return None

    def recall(self, request: ConsentRequest) -> ConsentDecision | None:
        return None

    def remember(self, request: ConsentRequest, decision: ConsentDecision, by: str | None) -> None:
        pass

    def forget(self, server: str) -> None:
        pass


class ConsentBroker:
    """Pending consents, the user's answers, and remembered approvals (for ``ttl_seconds``)."""

    def __init__(
        self,
        *,
        ttl_seconds: float,
        mode: ConsentMode = "ask",
        timer: Callable[[], float] = time.monotonic,
        sharing: ConsentSharing | None = None,
        audit: ConsentAudit | None = None,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        if mode not in ("ask", "never-ask"):
            raise ValueError("mode must be 'ask' or 'never-ask'")
        self.mode = mode
        self._audit = audit
        self._ttl = float(ttl_seconds)
        self._timer = timer
        self._lock = threading.RLock()
        self._pending: dict[str, _State] = {}
        self._closed: dict[str, str] = {}  # consent_id -> final status (bounded)
        self._remembered: dict[str, tuple[ConsentDecision, float, str]] = {}  # fingerprint -> (.., at, server)
        self._subscribers: list[tuple[Callable[[Event], Any], asyncio.AbstractEventLoop | None]] = []
        self._sharing: ConsentSharing = sharing if sharing is not None else NotShared()
        #: Pull answers given elsewhere (another process's user channel, see shared_consents.py).
        self._pulls = Pulls("consent answers given elsewhere", log)
        self._pulls.add(lambda: self._sharing.pull(self))

    def _pull(self) -> None:
        self._pulls.run()

    @property
    def sharing(self) -> ConsentSharing:
        """Where else its consents live (chosen when it was built)."""
        return self._sharing

    pull = _pull  # a team's feed heard an answer (store/change_feed.py): apply it now, waking the waiters

    @property
    def ask(self) -> bool:
        return self.mode == "ask"

    # -- events -------------------------------------------------------------------
    def subscribe(
        self, callback: Callable[[Event], Any], *, loop: asyncio.AbstractEventLoop | None = None
    ) -> Callable[[], None]:
        """Hear every event (on ``loop`` when given); returns an unsubscribe function."""
        entry = (callback, loop)
        with self._lock:
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._subscribers:
                    self._subscribers.remove(entry)

        return unsubscribe

    def _emit(self, events: list[Event]) -> None:
        with self._lock:
            subs = list(self._subscribers)
        for event in events:
            try:
                self._sharing.event(self, dict(event))
            except Exception:  # noqa: BLE001 - sharing never breaks the broker
                log.exception("Sharing a consent event failed")
            for callback, loop in subs:
                try:
                    if loop is None:
                        callback(dict(event))
                    else:
                        loop.call_soon_threadsafe(callback, dict(event))
                except Exception:  # noqa: BLE001 - a listener never breaks the broker
                    log.exception("A consent event subscriber failed")

    # -- state --------------------------------------------------------------------
    def _sweep(self) -> list[Event]:
        now = self._timer()
        events: list[Event] = []
        for fp, (_, at, _server) in list(self._remembered.items()):
            if now - at >= self._ttl:
                del self._remembered[fp]
        for cid, state in list(self._pending.items()):
            if now - state.pending.created_at >= self._ttl:
                self._close(cid, state, "expired")
                events.append({"type": "consent_done", "consent_id": cid, "status": "expired"})
        return events

    def _close(self, cid: str, state: _State, status: str) -> None:
        state.status = status
        self._pending.pop(cid, None)
        self._closed[cid] = status
        while len(self._closed) > _TOMBSTONES:
            self._closed.pop(next(iter(self._closed)))
        for loop, event in state.waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                pass
        state.waiters.clear()

    def _open_state(self, consent_id: object) -> _State:
        state = self._pending.get(consent_id) if isinstance(consent_id, str) else None
        if state is None:
            status = self._closed.get(consent_id) if isinstance(consent_id, str) else None
            if status == "approved":
                raise ConsentNotFound("This consent request was already approved.")
            if status == "denied":
                raise ConsentDenied("This consent request was denied by the user.")
            raise ConsentNotFound(_UNKNOWN)
        return state

    # -- API ----------------------------------------------------------------------
    def decision(self, request: ConsentRequest) -> ConsentDecision | None:
        """The remembered approval for ``request`` (same fingerprint, within the TTL)."""
        self._pull()
        with self._lock:
            events = self._sweep()
            entry = self._remembered.get(request.fingerprint)
        self._emit(events)
        if entry is None and (found := self._sharing.recall(request)) is not None:
            with self._lock:
                self._remembered[request.fingerprint] = (found, self._timer(), request.server)
            return found
        return entry[0] if entry else None

    def open(self, request: ConsentRequest) -> PendingConsent:
        """A pending consent for ``request`` (the open one with the same fingerprint, if any)."""
        with self._lock:
            events = self._sweep()
            for state in self._pending.values():
                if state.pending.request.fingerprint == request.fingerprint:
                    pending = state.pending
                    break
            else:  # or another replica's, pending for the same request and asker (shared_consents.py)
                found = self._sharing.adopt(request)
                cid, age = found or (_random.token_urlsafe(24), 0.0)
                pending = PendingConsent(cid, request, self._timer() - age)
                self._pending[pending.consent_id] = _State(pending)
                if found is None:  # else it is in the shared list already (waited on, or taken over)
                    events.append(
                        {"type": "consent_request", "consent_id": pending.consent_id, "consent": request.public()}
                    )
        self._emit(events)
        log.info("Consent asked for %s (%s)", request.server, request.action)
        return pending

    def get(self, consent_id: str) -> PendingConsent:
        """The open consent ``consent_id``; raises ConsentNotFound/ConsentDenied otherwise."""
        with self._lock:
            events = self._sweep()
            state = self._pending.get(consent_id) if isinstance(consent_id, str) else None
        self._emit(events)
        if state is None:
            with self._lock:
                self._open_state(consent_id)  # raises the right error
        return state.pending  # type: ignore[union-attr]

    def forget(self, server: str) -> None:
        """Forget the approvals remembered for ``server`` (it was removed: the next test asks again)."""
        with self._lock:
            for fp in [fp for fp, entry in self._remembered.items() if entry[2] == server]:
                del self._remembered[fp]
        self._sharing.forget(server)

    def pending(self) -> list[PendingConsent]:
        """The consents waiting for the user, oldest first (for the user's channels)."""
        with self._lock:
            events = self._sweep()
            out = sorted((state.pending for state in self._pending.values()), key=lambda p: p.created_at)
        self._emit(events)
        return out

    def status(self, consent_id: str) -> str:
        self._pull()
        with self._lock:
            if consent_id in self._pending:
                return "pending"
            return self._closed.get(consent_id, "unknown")

    def approve(
        self,
        consent_id: str,
        settings: Mapping[str, Any] | None = None,
        *,
        accept_warnings: bool = False,
        by: str | None = None,
        sandbox: Mapping[str, Any] | None = None,
        hidden_tools: Any = None,
        choices: Any = None,
    ) -> ConsentDecision:
        """The user approves, with their values for the destination settings (others keep the
        suggestion), their widening of the sandbox (an extra folder, no network), the tools
        they unticked (names of the tools shown) and their answer to each choice shown (the
        default where none). Called by user channels only."""
        with self._lock:
            events = self._sweep()
            try:
                state = self._open_state(consent_id)
                request = state.pending.request
                chosen = validated_settings(request, settings or {})
                if request.warnings and accept_warnings is not True:
                    codes = ", ".join(w.code for w in request.warnings)
                    raise InvalidInput(f"Accept the warnings ({codes}) explicitly to approve, or deny.")
                decision = ConsentDecision(
                    chosen,
                    validated_sandbox_choice(request.widenable, sandbox, request.only_these, request.home_files),
                    validated_hidden_tools(request, hidden_tools),
                    validated_choices(request, choices),
                )
                state.decision = decision
                self._remembered[request.fingerprint] = (decision, self._timer(), request.server)
                self._close(consent_id, state, "approved")
                events.append(_done(consent_id, "approved", by))
            finally:
                self._emit(events)
        self._sharing.remember(request, decision, by)
        log.info("The user approved running %s", request.server)
        self._record("consent_approved", request, by, answer_detail(request, decision))
        return decision

    def deny(self, consent_id: str, reason: str = "denied by the user", *, by: str | None = None) -> None:
        with self._lock:
            events = self._sweep()
            try:
                state = self._open_state(consent_id)
                self._close(consent_id, state, "denied")
                events.append(_done(consent_id, "denied", by))
            finally:
                self._emit(events)
        log.info("The user denied running %s (%s)", state.pending.request.server, reason[:200])
        request = state.pending.request
        self._record("consent_denied", request, by, f"launch {request.fingerprint}; {reason[:200]}")

    def _record(self, event: str, request: ConsentRequest, by: str | None, detail: str) -> None:
        """The answer in the audit: who gave it, to which launch, granting what. A failing audit
        is logged; the person's answer stands."""
        if self._audit is None:
            return
        try:
            self._audit(event, actor=by or "user", qualified_name=request.server, detail=detail)
        except Exception:  # noqa: BLE001 - the answer was given; the log says the audit missed it
            log.exception("could not audit the answer to the consent for %s", request.server)

    async def wait(self, consent_id: str, timeout: float) -> str:
        """Wait for the user's answer; returns the final status (approved | denied | expired).

        Raises :class:`TimeoutError` when still pending after ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        with self._lock:
            state = self._pending.get(consent_id)
            if state is None:
                return self._closed.get(consent_id, "unknown")
            state.waiters.append((loop, event))
        deadline = loop.time() + timeout
        while not event.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:  # with answers from elsewhere to pull, look every half second
                await asyncio.wait_for(event.wait(), min(remaining, 0.5) if self._sharing.polls else remaining)
            except TimeoutError:
                if self._sharing.polls:
                    await loop.run_in_executor(None, self._pull)
        with self._lock:
            if (loop, event) in state.waiters:
                state.waiters.remove((loop, event))
            if state.status == "pending":
                raise TimeoutError("The user has not answered the consent request yet.")
            return state.status


def _done(consent_id: str, status: str, by: str | None) -> Event:
    """A ``consent_done`` event; ``by`` names the face that answered (e.g. ``web``), for the audit."""
    event: Event = {"type": "consent_done", "consent_id": consent_id, "status": status}
    if by:
        event["by"] = by
    return event


#: A face's way of showing a consent to the user (on the user's channels only); it may wait for
#: the answer. What it returns is not passed on: the agent gets no link, id or key.
ConsentPresenter = Callable[[PendingConsent], Awaitable[dict[str, Any] | None]]


async def obtain_consent(
    broker: ConsentBroker | None, request: ConsentRequest, present: ConsentPresenter | None
) -> ConsentDecision | None:
    """The user's approval of ``request``, asking through ``present`` when none is remembered.

    Returns None when consent is off. Raises :class:`ConsentRequired` (with the prompt id and
    what the face added, e.g. a page URL) while the user has not answered, and
    :class:`ConsentDenied` when they said no.
    """
    if broker is None or not broker.ask:
        return None
    decision = broker.decision(request)
    if decision is not None:
        return decision
    pending = broker.open(request)
    if present is not None:
        await present(pending)  # shows it on the user's channels; may wait for the answer
    decision = broker.decision(request)
    if decision is not None:
        return decision
    if broker.status(pending.consent_id) == "denied":
        raise ConsentDenied(f"The user did not allow running {request.server}.")
    # No id, link or key: the agent cannot answer a consent, only wait for the user's answer.
    waiting = WAITING_FOR_TOOLS if request.tools else WAITING_FOR_APPROVAL
    raise ConsentRequired(waiting.format(server=request.server, n=len(request.tools)), details={"status": "pending"})


#: What the agent is told while the user has not answered: where the user can do it, nothing to use.
WAITING_FOR_APPROVAL = (
    "Waiting for the user's approval to run {server} (what runs and where its secrets go). They approve "
    "it themselves: in the mcp-setup page, or with `mcp-setup approve` in a terminal. Tell them so; once "
    "they have, call this tool again with the same arguments."
)

#: The install's second ask: the launch is approved; the user picks the tools to keep.
WAITING_FOR_TOOLS = (
    "Waiting for the user to approve installing {server} and to choose which of its {n} tools to keep. They do it "
    "themselves: in the mcp-setup page, or with `mcp-setup approve` in a terminal. Tell them so; once they have, "
    "call this tool again with the same arguments."
)
