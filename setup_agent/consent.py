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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import secrets as _random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from registry_clients.models import RequiredKey

from .errors import ConsentDenied, ConsentNotFound, ConsentRequired, InvalidInput
from .launch import LaunchSpec, template_keys

__all__ = [
    "ConsentBroker",
    "ConsentDecision",
    "ConsentMode",
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
MAX_SETTING_CHARS = 2000
_TOMBSTONES = 10_000
_DESTINATION_NAME = re.compile(r"(?i)(^|[_.\-])(url|uri|host|hostname|endpoint|domain|origin|base[_\-]?url)$")
_URL_VALUE = re.compile(r"(?i)^[a-z][a-z0-9+.\-]*://")
_TEMPLATE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class ConsentWarning:
    """Something the user must accept explicitly (``code`` e.g. ``argv_secret``)."""

    code: str
    message: str


@dataclass(frozen=True)
class DestinationSetting:
    """A non-secret value that decides where the server connects: the agent only suggests it."""

    name: str
    suggested: str
    description: str = ""


@dataclass(frozen=True)
class SecretDestination:
    """Where one secret goes: ``how`` (env var, header, argument, URL) and to which ``host``."""

    key: str
    how: list[str]
    destination: str
    host: str | None = None


@dataclass(frozen=True)
class ConsentRequest:
    """What the user is asked to approve. Holds templates and non-secret values only."""

    server: str
    version: str | None
    action: str
    package_type: str
    package: str
    runner: str | None
    sha256: str | None
    transport: str
    command_line: list[str]
    url: str | None
    env: dict[str, str]
    headers: dict[str, str]
    secrets: list[SecretDestination]
    destinations: list[DestinationSetting]
    warnings: list[ConsentWarning] = field(default_factory=list)
    fingerprint: str = ""
    #: For ``action == "tools_change"``: the installed server's tool list changed (see pins.py):
    #: ``{server_id, pinned_hash, live_hash, diff, tools: [{name, change, description, pinned_description,
    #: inputSchema}]}`` — the new texts as the server wrote them, shown escaped, never to the agent.
    tools_change: dict[str, Any] | None = None

    def public(self) -> dict[str, Any]:
        """The JSON a face shows (no fingerprint: it is an internal key)."""
        out = asdict(self)
        out.pop("fingerprint", None)
        return out


@dataclass(frozen=True)
class ConsentDecision:
    """An approval: the destination settings' values the user chose (these are used)."""

    settings: dict[str, str]


@dataclass(frozen=True)
class PendingConsent:
    consent_id: str
    request: ConsentRequest
    created_at: float


# -- building a request -------------------------------------------------------------------


def is_destination_setting(key: RequiredKey, value: str | None, url_keys: Iterable[str] = ()) -> bool:
    """A non-secret setting that shapes where the server connects."""
    if key.secret:
        return False
    if key.kind == "url_variable" or key.name in set(url_keys):
        return True
    return bool(_DESTINATION_NAME.search(key.name)) or bool(value and _URL_VALUE.match(value.strip()))


def _fill_public(text: str, values: Mapping[str, str], *, in_url: bool = False) -> str:
    """Fill ``${KEY}`` from non-secret ``values``; other templates stay as ``${KEY}``."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return "$"
        if name not in values:
            return m.group(0)
        return quote(values[name], safe=":@!$'()*+,;=") if in_url else values[name]

    return _TEMPLATE.sub(sub, text)


def _host_of(url: str | None) -> str | None:
    if not url:
        return None
    try:
        parts = urlsplit(url)
        return parts.netloc.rsplit("@", 1)[-1] or None
    except ValueError:
        return None


def _fingerprint(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def build_consent_request(
    *,
    server: str,
    version: str | None,
    spec: LaunchSpec,
    keys: Iterable[RequiredKey],
    values: Mapping[str, str],
    action: str = "test",
    warnings: Iterable[ConsentWarning | Mapping[str, str]] = (),
) -> ConsentRequest:
    """The request for running ``spec`` with ``values`` (only non-secret values are read)."""
    keys = list(keys)
    secret_names = {k.name for k in keys if k.secret}
    url_keys = template_keys(spec.url or "")
    destinations = [
        DestinationSetting(k.name, values[k.name], k.description or "")
        for k in keys
        if k.name in values and is_destination_setting(k, values.get(k.name), url_keys)
    ]
    public_values = {d.name: d.suggested for d in destinations}
    filled_url = _fill_public(spec.url, public_values, in_url=True) if spec.url else None
    secrets: list[SecretDestination] = []
    for name in sorted(secret_names & spec.keys()):
        how: list[str] = []
        how += [f"environment variable {env}" for env, t in spec.env.items() if name in template_keys(t)]
        how += [f"header {h}" for h, t in spec.headers.items() if name in template_keys(t)]
        if any(name in template_keys(a) for a in spec.args) or name in template_keys(spec.command or ""):
            how.append("command-line argument")
        if name in url_keys:
            how.append("URL")
        if spec.transport == "stdio":
            where = "this computer: the server process started by " + (spec.runner or spec.command or "its runtime")
            if destinations:
                where += " (it may send it on to " + ", ".join(d.name for d in destinations) + ")"
            secrets.append(SecretDestination(name, how, where, None))
        else:
            host = _host_of(filled_url)
            secrets.append(SecretDestination(name, how, f"{spec.transport} server at {filled_url}", host))
    warns = [w if isinstance(w, ConsentWarning) else ConsentWarning(str(w["code"]), str(w["message"])) for w in warnings]
    command_line = [spec.command, *spec.args] if spec.command else []
    request = ConsentRequest(
        server=server,
        version=version,
        action=action,
        package_type=spec.package_type,
        package=spec.identifier,
        runner=spec.runner,
        sha256=spec.file_sha256,
        transport=spec.transport,
        command_line=[c for c in command_line if c is not None],
        url=spec.url,
        env=dict(spec.env),
        headers=dict(spec.headers),
        secrets=secrets,
        destinations=destinations,
        warnings=warns,
    )
    fp = _fingerprint(
        {
            "server": server,
            "version": version,
            "spec": spec.model_dump(mode="json"),
            "destinations": public_values,
            "warnings": sorted(w.code for w in warns),
        }
    )
    return ConsentRequest(**{**request.__dict__, "fingerprint": fp})


# -- the broker ---------------------------------------------------------------------------

Event = dict[str, Any]


@dataclass(eq=False)
class _State:
    pending: PendingConsent
    status: str = "pending"  # pending | approved | denied | expired
    decision: ConsentDecision | None = None
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)


_UNKNOWN = "This consent request is unknown (already closed, expired, or from before a restart)."


class ConsentBroker:
    """Pending consents, the user's answers, and remembered approvals (for ``ttl_seconds``)."""

    def __init__(self, *, ttl_seconds: float, mode: ConsentMode = "ask", timer: Callable[[], float] = time.monotonic) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        if mode not in ("ask", "never-ask"):
            raise ValueError("mode must be 'ask' or 'never-ask'")
        self.mode = mode
        self._ttl = float(ttl_seconds)
        self._timer = timer
        self._lock = threading.RLock()
        self._pending: dict[str, _State] = {}
        self._closed: dict[str, str] = {}  # consent_id -> final status (bounded)
        self._remembered: dict[str, tuple[ConsentDecision, float]] = {}
        self._subscribers: list[tuple[Callable[[Event], Any], asyncio.AbstractEventLoop | None]] = []

    @property
    def ask(self) -> bool:
        return self.mode == "ask"

    # -- events -------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Event], Any], *, loop: asyncio.AbstractEventLoop | None = None) -> Callable[[], None]:
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
        for fp, (_, at) in list(self._remembered.items()):
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

    def _open_state(self, consent_id: Any) -> _State:
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
        with self._lock:
            events = self._sweep()
            entry = self._remembered.get(request.fingerprint)
        self._emit(events)
        return entry[0] if entry else None

    def open(self, request: ConsentRequest) -> PendingConsent:
        """A pending consent for ``request`` (the open one with the same fingerprint, if any)."""
        with self._lock:
            events = self._sweep()
            for state in self._pending.values():
                if state.pending.request.fingerprint == request.fingerprint:
                    pending = state.pending
                    break
            else:
                pending = PendingConsent(_random.token_urlsafe(24), request, self._timer())
                self._pending[pending.consent_id] = _State(pending)
                events.append({"type": "consent_request", "consent_id": pending.consent_id, "consent": request.public()})
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

    def status(self, consent_id: str) -> str:
        with self._lock:
            if consent_id in self._pending:
                return "pending"
            return self._closed.get(consent_id, "unknown")

    def approve(
        self, consent_id: str, settings: Mapping[str, Any] | None = None, *, accept_warnings: bool = False,
        by: str | None = None,
    ) -> ConsentDecision:
        """The user approves, with their values for the destination settings (others keep the suggestion)."""
        with self._lock:
            events = self._sweep()
            try:
                state = self._open_state(consent_id)
                request = state.pending.request
                chosen = _validated_settings(request, settings or {})
                if request.warnings and accept_warnings is not True:
                    codes = ", ".join(w.code for w in request.warnings)
                    raise InvalidInput(f"Accept the warnings ({codes}) explicitly to approve, or deny.")
                decision = ConsentDecision(chosen)
                state.decision = decision
                self._remembered[request.fingerprint] = (decision, self._timer())
                self._close(consent_id, state, "approved")
                events.append(_done(consent_id, "approved", by))
            finally:
                self._emit(events)
        log.info("The user approved running %s", request.server)
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
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
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


def _validated_settings(request: ConsentRequest, settings: Mapping[str, Any]) -> dict[str, str]:
    names = {d.name: d for d in request.destinations}
    unknown = [k for k in settings if k not in names]
    if unknown:
        raise InvalidInput("Only the destination settings shown can be changed here.")
    out = {d.name: d.suggested for d in request.destinations}
    for name, value in settings.items():
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"Enter a value for {name}.", key=name)
        value = value.strip()
        if len(value) > MAX_SETTING_CHARS or _CONTROL.search(value):
            raise InvalidInput(f"The value for {name} is too long or holds control characters.", key=name)
        out[name] = value
    return out


#: A face's way of showing a consent to the user; it may wait for the answer and returns extra
#: fields for a ``consent_required`` error (e.g. ``{"url": ...}``).
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
    extra: dict[str, Any] = {}
    if present is not None:
        extra = dict(await present(pending) or {})
    decision = broker.decision(request)
    if decision is not None:
        return decision
    if broker.status(pending.consent_id) == "denied":
        raise ConsentDenied(f"The user did not allow running {request.server}.")
    details = {"prompt_id": pending.consent_id, **{k: v for k, v in extra.items() if k in ("url", "status")}}
    raise ConsentRequired(
        f"The user has to approve running {request.server} (what runs and where its secrets go) out of band. "
        + ("Ask them to open the link in details.url, then " if "url" in extra else "Once they have, ")
        + "call this tool again with the same arguments.",
        details=details,
    )
