"""Pending secret prompts: the core's broker between "ask the user" and "the user answered".

A prompt reserves a ref in the :class:`~setup_agent.secrets.refs.SecretRefStore` when it opens;
answering it fulfils that ref with the user's value (which goes straight into the store and
is never kept, logged or sent in an event here); cancelling it discards the ref. Prompts
expire with the ref TTL. The broker is thread-safe: a face may answer from another thread
(or event loop) than the one awaiting :meth:`PromptBroker.wait`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import secrets as _random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from setup_agent.errors import (
    InvalidInput,
    PromptAlreadyAnswered,
    PromptCancelled,
    PromptNotFound,
    SecretExpired,
    SecretMissing,
)

from .refs import SecretRefStore, SecretValue
from .weak import WEAK_VALUE_WARNING, is_weak_value

__all__ = [
    "MAX_PROMPT_CHARS",
    "WEAK_VALUE_WARNING",
    "PendingPrompt",
    "PromptBroker",
    "PromptsElsewhere",
    "is_weak_value",
]

log = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 2000
MAX_SERVER_CHARS = 200
_TOMBSTONES = 10_000

Event = dict[str, Any]
Callback = Callable[[Event], Any]


@dataclass(frozen=True)
class PendingPrompt:
    """A secret prompt waiting for the user. Holds no value."""

    prompt_id: str
    key_name: str
    prompt: str
    server: str | None
    ref: str
    created_at: float

    @classmethod
    def published(cls, prompt_id: str, request: Mapping[str, Any]) -> PendingPrompt:
        """A prompt another process opened and published on a team's database, from its stored
        ``request`` (key name, text, server): it has no ref here, and its age counts from now."""
        return cls(
            prompt_id,
            str(request.get("key_name") or ""),
            str(request.get("prompt") or ""),
            request.get("server") or None,
            "",
            time.monotonic(),
        )


class PromptsElsewhere(Protocol):
    """Prompts opened by another process on a team's database (``setup/shared_prompts.py``)."""

    def get(self, prompt_id: str) -> PendingPrompt | None: ...
    def answer(self, prompt_id: str, value: SecretValue) -> bool: ...
    def cancel(self, prompt_id: str) -> bool: ...


@dataclass(eq=False)
class _State:
    prompt: PendingPrompt
    status: str = "pending"  # pending | answered | cancelled | expired
    reason: str = ""
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class _Subscriber:
    callback: Callback
    loop: asyncio.AbstractEventLoop | None


def _expired_message(key_name: str) -> str:
    return (
        f"The request for {key_name} has expired. Ask the agent again: it will open a new request "
        "with mcp_setup_request_secret."
    )


_UNKNOWN = "This secret request is unknown (already closed, or from before a restart). Ask the agent again."


class PromptBroker:
    """Opens, answers, cancels and awaits secret prompts; publishes value-free events."""

    def __init__(
        self,
        refs: SecretRefStore,
        *,
        timer: Callable[[], float] = time.monotonic,
        ttl_seconds: float | None = None,
        elsewhere: PromptsElsewhere | None = None,
    ) -> None:
        """``elsewhere``: prompts this broker does not know (another replica's, on a team's
        database) are looked up, answered and cancelled there (``setup/shared_prompts.py``)."""
        self._refs = refs
        self._timer = timer
        self._ttl = float(refs.ttl_seconds if ttl_seconds is None else ttl_seconds)
        if self._ttl <= 0:
            raise ValueError("ttl_seconds must be positive")
        self._lock = threading.RLock()
        self._prompts: dict[str, _State] = {}
        self._expired: OrderedDict[str, str] = OrderedDict()  # prompt_id -> key name
        self._subscribers: list[_Subscriber] = []
        self._elsewhere = elsewhere

    def _foreign(self, prompt_id: str) -> PromptsElsewhere | None:
        """``elsewhere`` when ``prompt_id`` was never this broker's."""
        if self._elsewhere is None or not isinstance(prompt_id, str):
            return None
        with self._lock:
            mine = prompt_id in self._prompts or prompt_id in self._expired
        return None if mine else self._elsewhere

    @property
    def refs(self) -> SecretRefStore:
        return self._refs

    @property
    def ttl_seconds(self) -> float:
        return self._ttl

    # -- events -------------------------------------------------------------------
    def subscribe(self, callback: Callback, *, loop: asyncio.AbstractEventLoop | None = None) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns an unsubscribe function.

        Without ``loop`` the callback runs synchronously in the thread that caused the event.
        With ``loop`` it is handed to that loop (``call_soon_threadsafe``), and a coroutine it
        returns is run there as a task: use this from async faces (websockets).
        """
        sub = _Subscriber(callback, loop)
        with self._lock:
            self._subscribers.append(sub)

        def unsubscribe() -> None:
            with self._lock:
                if sub in self._subscribers:
                    self._subscribers.remove(sub)

        return unsubscribe

    @contextmanager
    def _locked(self) -> Iterator[list[Event]]:
        """Hold the lock with expired prompts swept; the events gathered are emitted after
        the lock is released (a subscriber may call back into the broker)."""
        events: list[Event] = []
        try:
            with self._lock:
                events += self._sweep()
                yield events
        finally:
            self._emit(events)

    def _emit(self, events: list[Event]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for event in events:
            for sub in subscribers:
                if sub.loop is None:
                    self._deliver(sub.callback, dict(event))
                else:
                    try:
                        sub.loop.call_soon_threadsafe(self._deliver, sub.callback, dict(event))
                    except RuntimeError:  # that loop is closed
                        log.warning("Dropped a %s event for a subscriber whose event loop is closed", event["type"])

    @staticmethod
    def _deliver(callback: Callback, event: Event) -> None:
        try:
            result = callback(event)
            if inspect.isawaitable(result):
                try:
                    task = asyncio.ensure_future(result)  # needs a running loop: subscribe(loop=...)
                except RuntimeError:
                    if inspect.iscoroutine(result):
                        result.close()
                    log.error("An async secret prompt subscriber needs subscribe(..., loop=loop); event dropped")
                    return
                task.add_done_callback(_log_task_failure)
        except Exception:
            log.exception("A secret prompt event subscriber failed on a %s event", event.get("type"))

    # -- expiry -------------------------------------------------------------------
    def _sweep(self) -> list[Event]:
        """Drop prompts older than the TTL (caller holds the lock); returns events to emit."""
        now = self._timer()
        events: list[Event] = []
        for prompt_id, state in list(self._prompts.items()):
            if now - state.prompt.created_at < self._ttl:
                continue
            self._forget(prompt_id, state)
            if state.status == "pending":
                state.status = "expired"
                self._refs.discard(state.prompt.ref)
                self._wake(state)
                events.append(_done(state.prompt, "expired"))
        return events

    def _forget(self, prompt_id: str, state: _State) -> None:
        self._prompts.pop(prompt_id, None)
        self._expired[prompt_id] = state.prompt.key_name
        while len(self._expired) > _TOMBSTONES:
            self._expired.popitem(last=False)

    def _state(self, prompt_id: str) -> _State:
        """The state of ``prompt_id`` (caller holds the lock and has swept)."""
        state = self._prompts.get(prompt_id) if isinstance(prompt_id, str) else None
        if state is None:
            key_name = self._expired.get(prompt_id) if isinstance(prompt_id, str) else None
            if key_name is not None:
                raise PromptNotFound(_expired_message(key_name), key=key_name)
            raise PromptNotFound(_UNKNOWN)
        return state

    @staticmethod
    def _check_open(state: _State) -> None:
        key = state.prompt.key_name
        if state.status == "answered":
            raise PromptAlreadyAnswered(f"The request for {key} was already answered.", key=key)
        if state.status == "cancelled":
            raise PromptCancelled(f"The request for {key} was cancelled: {state.reason}.", key=key)
        if state.status == "expired":
            raise PromptNotFound(_expired_message(key), key=key)

    @staticmethod
    def _wake(state: _State) -> None:
        for loop, event in state.waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the waiter's loop is already closed
                pass
        state.waiters.clear()

    # -- prompts ------------------------------------------------------------------
    def open(self, key_name: str, prompt: str, server: str | None = None) -> PendingPrompt:
        """Open a prompt for ``key_name``, reserving its ref; announces a ``secret_request``."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidInput("The prompt must be a non-empty sentence telling the user what to enter.")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidInput(f"The prompt is too long (at most {MAX_PROMPT_CHARS} characters).")
        if server is not None and (not isinstance(server, str) or len(server) > MAX_SERVER_CHARS):
            raise InvalidInput(f"server must be a name of at most {MAX_SERVER_CHARS} characters.")
        server = server or None
        with self._locked() as events:
            prompt_id = _random.token_urlsafe(24)  # 192 random bits
            ref = self._refs.reserve(key_name, prompt_id=prompt_id)  # validates key_name
            pending = PendingPrompt(
                prompt_id=prompt_id,
                key_name=key_name,
                prompt=prompt,
                server=server,
                ref=ref,
                created_at=self._timer(),
            )
            self._prompts[pending.prompt_id] = _State(pending)
            events.append(
                {
                    "type": "secret_request",
                    "prompt_id": pending.prompt_id,
                    "key_name": key_name,
                    "prompt": prompt,
                    "server": server,
                }
            )
        log.info("Opened a secret prompt for %s", key_name)
        return pending

    def answer(self, prompt_id: str, value: str | SecretValue) -> str:
        """Store the user's ``value`` in the prompt's ref (once) and return the ref."""
        secret = value if isinstance(value, SecretValue) else SecretValue(value) if isinstance(value, str) else None
        elsewhere = self._foreign(prompt_id)
        if elsewhere is not None:
            if secret is None or secret.is_blank():
                raise InvalidInput("Enter a value; it cannot be empty.")
            if not elsewhere.answer(prompt_id, secret):
                raise PromptNotFound(_UNKNOWN)
            log.info("The user answered a secret prompt of another mcp-setup")
            return ""
        with self._locked() as events:
            state = self._state(prompt_id)
            self._check_open(state)
            key = state.prompt.key_name
            if secret is None or secret.is_blank():
                raise InvalidInput(f"Enter a value for {key}; it cannot be empty.", key=key)
            try:
                self._refs.fulfil(state.prompt.ref, secret)
            except (SecretExpired, SecretMissing):  # the store dropped the reserved ref
                state.status = "expired"
                self._forget(prompt_id, state)
                self._wake(state)
                events.append(_done(state.prompt, "expired"))
                raise PromptNotFound(_expired_message(key), key=key) from None
            state.status = "answered"
            self._wake(state)
            events.append(_done(state.prompt, "answered"))
        log.info("The user answered the secret prompt for %s", key)
        return state.prompt.ref

    def cancel(self, prompt_id: str, reason: str = "cancelled by the user") -> None:
        """Cancel a pending prompt and discard its ref. Cancelling twice is harmless."""
        elsewhere = self._foreign(prompt_id)
        if elsewhere is not None:
            if not elsewhere.cancel(prompt_id):
                raise PromptNotFound(_UNKNOWN)
            return
        with self._locked() as events:
            state = self._state(prompt_id)
            if state.status == "cancelled":
                return
            self._check_open(state)
            state.status = "cancelled"
            state.reason = str(reason or "cancelled")[:MAX_PROMPT_CHARS]
            self._refs.discard(state.prompt.ref)
            self._wake(state)
            events.append(_done(state.prompt, "cancelled"))
        log.info("The secret prompt for %s was cancelled", state.prompt.key_name)

    def get(self, prompt_id: str) -> PendingPrompt:
        """The open prompt ``prompt_id``; raises as :meth:`answer` would if it is not open."""
        elsewhere = self._foreign(prompt_id)
        if elsewhere is not None:
            found = elsewhere.get(prompt_id)
            if found is None:
                raise PromptNotFound(_UNKNOWN)
            return found
        with self._locked():
            state = self._state(prompt_id)
            self._check_open(state)
            return state.prompt

    def pending(self) -> list[PendingPrompt]:
        """Every open (unanswered, uncancelled, unexpired) prompt, oldest first."""
        with self._locked():
            out = [s.prompt for s in self._prompts.values() if s.status == "pending"]
        return sorted(out, key=lambda p: p.created_at)

    async def wait(self, prompt_id: str, timeout: float) -> str:
        """Wait until the prompt is answered and return its ref.

        Raises :class:`PromptCancelled` if it is cancelled, :class:`PromptNotFound` if it is
        unknown or expires, and :class:`TimeoutError` after ``timeout`` seconds (the prompt
        stays open, so the caller may wait again). ``answer`` may run in any thread.
        """
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waiter = (loop, event)
        with self._locked():
            state = self._state(prompt_id)
            if state.status == "pending":
                state.waiters.append(waiter)
            else:
                event.set()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass  # the outcome is decided below, from the state
        finally:
            with self._lock:
                if waiter in state.waiters:
                    state.waiters.remove(waiter)
        with self._locked():
            if state.status == "pending":
                raise TimeoutError(f"The user has not answered the request for {state.prompt.key_name} yet.")
            if state.status != "answered":
                self._check_open(state)
            return state.prompt.ref

    def __repr__(self) -> str:
        with self._lock:
            return f"PromptBroker(open={sum(s.status == 'pending' for s in self._prompts.values())})"


def _done(prompt: PendingPrompt, status: str) -> Event:
    return {"type": "secret_done", "prompt_id": prompt.prompt_id, "key_name": prompt.key_name, "status": status}


def _log_task_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("A secret prompt event subscriber failed: %s", type(task.exception()).__name__)
