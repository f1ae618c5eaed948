"""Test-connect: start a candidate server in a scratch workspace and list its tools.

``Prober.probe`` starts the server through the launch (``setup_agent/launch/start.py``: its
values stay masked until then) in a fresh scratch directory with a minimal environment
(a short allowlist of the host's variables plus the resolved values), runs ``initialize`` +
``tools/list`` under a deadline, then, when the server offers a read-only tool that needs no
arguments, calls it once to check the key (``key_check.py``: a refused key is
``credential_rejected``), and returns. Teardown
(process group, then the scratch dir) runs in the background: it never holds up the answer,
and ``drain()`` waits for it, so nothing is left behind. Every string that leaves passes
the redactor.

Scratch dirs are named for their owner (``mcp-setup-<kind>-<pid>.<start>-<random>``, see
:func:`setup_agent.launch.scratch.make_scratch_dir`), so that its sweep at start-up removes those of a
process that died mid-probe and never one of a live process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shutil
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx2
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, UNSUPPORTED_PROTOCOL_VERSION

from setup_agent.errors import (
    NeedsSignIn,
    OAuthRequired,
    ProbeTimeout,
    ProtocolError,
    ServerExited,
    ServerRejected,
    SetupError,
    Unreachable,
)
from setup_agent.gateway import InFlight, relay_callbacks
from setup_agent.launch import (
    DirectStarts,
    HttpWatch,
    LaunchSpec,
    NetRecord,
    ProcessLedger,
    ProcessWatch,
    Sandbox,
    Values,
    list_all_tools,
    make_scratch_dir,
    materialize,
    note_hidden_path,
    open_client,
    tool_dicts,
)
from setup_agent.secrets import Redactor
from setup_agent.translation import translate

from .adoption import Keep, Parked, ParkingLot
from .key_check import CHECK_SECONDS, KeyCheck, check_key

__all__ = ["ProbeResult", "Prober", "StageHook", "tools_hash"]

#: Called as ``await hook(stage, status)``: ("starting", "started"), ("handshake", "done").
StageHook = Callable[[str, str], Awaitable[None]]

logger = logging.getLogger(__name__)

#: After the first non-JSON line on stdout, how long a server still has to answer properly.
BAD_OUTPUT_GRACE = 3.0
#: Probes that run at once by default (``MCP_SETUP_MAX_CONCURRENT_PROBES``).
DEFAULT_MAX_CONCURRENT = 4


@dataclass
class ProbeResult:
    tools: list[dict[str, Any]]
    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    elapsed: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: The session was parked for an install to adopt (``keep``): its dir now belongs to it.
    parked: bool = False
    #: What the server reached or tried through its proxy during the test (None: not proxied);
    #: the consent shows it and offers "only these".
    net: NetRecord | None = None
    #: Whether the test checked the key with a read-only call, or why not (None: no key to check).
    key_check: KeyCheck | None = None

    @property
    def tools_hash(self) -> str:
        return tools_hash(self.tools)


def tools_hash(tools: list[dict[str, Any]]) -> str:
    canonical = json.dumps(sorted(tools, key=lambda t: t["name"]), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class Prober:
    """Runs test-connects. ``scratch_root`` holds the per-probe workspaces."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        scratch_root: Path | None = None,
        timeout: float = 60.0,
        host_env: Mapping[str, str] | None = None,
        ledger: ProcessLedger | None = None,
        keep_for: float = 0.0,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        sandbox: Sandbox | None = None,
        direct: DirectStarts | None = None,
    ) -> None:
        self.redactor = redactor
        #: What the download phase noted a runner installed: a tested server starts without its runner.
        self.direct = direct
        #: Probes that run at once; the rest wait their turn (stage ``queued``).
        self.max_concurrent = max(1, max_concurrent)
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        #: The sandbox each tested server starts in (setup_agent/launch/sandbox.py; None: none).
        self.sandbox = sandbox
        #: Tested sessions waiting for their install (``keep_for`` seconds; 0: never kept).
        self.parking = ParkingLot(keep_for)
        self.scratch_root = scratch_root
        self.ledger = ledger
        self.timeout = timeout
        self.host_env = host_env
        self._teardowns: set[asyncio.Task[None]] = set()
        self._parked_in: weakref.WeakKeyDictionary[asyncio.Task[None], Parked] = weakref.WeakKeyDictionary()

    async def probe(
        self,
        spec: LaunchSpec,
        values: Values,
        *,
        dirname: str | None = None,
        timeout: float | None = None,
        on_stage: StageHook | None = None,
        auth: httpx2.Auth | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        keep: Keep | None = None,
    ) -> ProbeResult:
        """Connect, list the tools, return. Raises a ProbeError (redacted) on failure.

        ``auth`` (an ``httpx2.Auth``, remotes only) signs the requests: a stored OAuth sign-in.
        ``on_stderr`` sees the server's stderr chunks as they come (raw: redact before showing).
        ``keep``: run in ``keep.workdir`` and, on success, park the session for an install
        to adopt (``result.parked``; see setup_agent/setup/adoption.py) instead of ending it.
        """
        if keep is not None and (not self.parking.enabled or auth is not None):
            keep = None
        deadline = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        slots = self._slots_for(loop)
        if slots.locked() and on_stage is not None:  # every slot is taken: say so, then wait
            with contextlib.suppress(Exception):  # a progress listener never breaks a probe
                await on_stage("queued", "waiting")
        async with slots:
            started = loop.time()
            try:
                result = await self._attempt(spec, values, dirname, deadline, "auto", on_stage, auth, on_stderr, keep)
            except _EraLocked:
                # A server that refused `server/discover` hides its reason behind -32022 in auto
                # mode; the classic handshake shows the server's own message.
                remaining = max(1.0, deadline - (loop.time() - started))
                try:
                    result = await self._attempt(
                        spec, values, dirname, remaining, "legacy", on_stage, auth, on_stderr, keep
                    )
                except _EraLocked as exc:
                    raise ServerRejected(self.redactor.redact(exc.message)) from None
            result.elapsed = loop.time() - started
            return result

    def _slots_for(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(self.max_concurrent), loop
        return self._slots

    async def _attempt(
        self,
        spec: LaunchSpec,
        values: Values,
        dirname: str | None,
        deadline: float,
        mode: Literal["auto", "legacy"],
        on_stage: StageHook | None = None,
        auth: httpx2.Auth | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        keep: Keep | None = None,
    ) -> ProbeResult:
        began = asyncio.get_running_loop().time()
        scratch = make_scratch_dir(self.scratch_root, "probe") if keep is None else None
        try:
            resolved = materialize(spec, values, dirname=dirname, cwd=str(scratch or keep.workdir))  # type: ignore[union-attr]
        except BaseException:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            raise
        pwatch = ProcessWatch(on_stderr=on_stderr)
        hwatch = HttpWatch()
        outcome: asyncio.Future[ProbeResult] = asyncio.get_running_loop().create_future()
        # It declares what the gateway relays (sampling, elicitation, roots: refused while nobody
        # calls), so the tools it lists are the ones its live connection gets.
        inflight = InFlight()
        record = NetRecord()
        parked: Parked | None = None  # set by run(), read again in its finally
        adopted = False

        async def stage(name: str, status: str) -> None:
            if on_stage is not None:
                try:
                    await on_stage(name, status)
                except Exception:  # a progress listener never breaks a probe
                    logger.exception("stage hook failed")

        async def run() -> None:
            nonlocal parked, adopted
            try:
                await stage("starting", "started")
                async with open_client(
                    resolved,
                    mode=mode,
                    process_watch=pwatch,
                    http_watch=hwatch,
                    host_env=self.host_env,
                    ledger=self.ledger,
                    auth=auth,
                    sandbox=self.sandbox,
                    direct=self.direct,
                    callbacks=relay_callbacks(inflight, self.redactor, spec.identifier or "the server"),
                    net_record=record,
                ) as client:
                    await stage("handshake", "done")
                    tools = tool_dicts(await list_all_tools(client))
                    # The key's own check: what is left of the deadline, at most CHECK_SECONDS.
                    left = deadline - (asyncio.get_running_loop().time() - began) - 0.5
                    checked = await check_key(client, tools, values, self.redactor, timeout=min(CHECK_SECONDS, left))
                    info = client.server_info
                    result = ProbeResult(
                        tools=self.redactor.redact_obj(tools),
                        protocol_version=client.protocol_version,
                        server_name=self.redactor.redact(info.name) if info else None,
                        server_version=self.redactor.redact(info.version) if info else None,
                        net=record,
                        key_check=checked if checked.checked or checked.note else None,
                    )
                    if keep is not None and not outcome.done():
                        parked = Parked(keep.key, keep.workdir, client, pwatch, result, inflight=inflight)
                        self._parked_in[task] = parked
                        result.parked = True
                        outcome.set_result(result)
                        adopted = await self.parking.hold(parked)
                    if not outcome.done():
                        outcome.set_result(result)
            except BaseException as exc:  # noqa: BLE001 - reported through the future
                if not outcome.done():
                    outcome.set_exception(_unwrap(exc))
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
            finally:
                if parked is not None:
                    parked.closed.set()
                    if not adopted:  # nobody took it: its reserved dir goes with it
                        await asyncio.to_thread(shutil.rmtree, parked.workdir, True)
                # The scratch dir goes in the done callback below: an await here could be cut short
                # by the cancel of a failed probe, leaving the removal to a thread nobody waits for.

        task = asyncio.create_task(run(), name="mcp-setup-probe")
        self._teardowns.add(task)
        task.add_done_callback(self._teardowns.discard)
        # A task cancelled before it ran never reaches its ``finally``: the
        # workspace goes when the task is done, however it ended.
        if scratch is not None:
            task.add_done_callback(lambda _t: shutil.rmtree(scratch, ignore_errors=True))

        try:
            return await self._await_outcome(outcome, pwatch, deadline)
        except _EraLocked:
            raise
        except BaseException as exc:
            if not outcome.done():
                outcome.cancel()  # nobody waits for it any more
            task.cancel()
            current = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and current is not None and current.cancelling():
                raise  # the caller was cancelled (Ctrl-C, a closing face): not a failure of the server
            failure = self._classify(exc, pwatch, hwatch, deadline, auth)
            if self.sandbox is not None and resolved.local:  # a path it could not open may be hidden
                shown = [resolved.cwd or "", resolved.bundle_dir or "", *resolved.grants, *resolved.literal_paths]
                note_hidden_path(failure, [p for p in shown if p], self.sandbox.mechanism)
            raise failure from None

    async def _await_outcome(
        self, outcome: asyncio.Future[ProbeResult], pwatch: ProcessWatch, deadline: float
    ) -> ProbeResult:
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        while True:
            remaining = end - loop.time()
            if remaining <= 0:
                raise TimeoutError
            if pwatch.bad_lines:
                remaining = min(remaining, BAD_OUTPUT_GRACE)
            bad = asyncio.ensure_future(pwatch.bad_line_seen.wait()) if not pwatch.bad_lines else None
            waiters: set[asyncio.Future[Any]] = {outcome} | ({bad} if bad else set())
            done, _ = await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if bad is not None and not bad.done():
                bad.cancel()
            if outcome in done:
                return outcome.result()
            if not done:
                if pwatch.bad_lines:
                    raise _BadOutput
                raise TimeoutError
            # a first bad line arrived: loop with the shorter grace

    def _classify(
        self,
        exc: BaseException,
        pwatch: ProcessWatch,
        hwatch: HttpWatch,
        deadline: float,
        auth: httpx2.Auth | None = None,
    ) -> SetupError:
        redact = self.redactor.redact
        # a stored sign-in (setup_agent/oauth/grant.py GrantAuth) says when its refresh was refused
        signed_out: asyncio.Event | None = getattr(auth, "signed_out", None)
        if signed_out is not None and signed_out.is_set():
            return NeedsSignIn(getattr(auth, "signed_out_reason", ""))
        if auth is None and hwatch.resource_metadata and 401 in hwatch.statuses:
            return OAuthRequired(
                "This server signs in with OAuth. Call mcp_setup_authorize with this qualified_name (and package, "
                "if you chose one): the user signs in in their browser and you get a ref. Then pass it as oauth_ref "
                "to mcp_setup_test_connection or mcp_setup_install_and_connect.",
                details={
                    "http_status": 401,
                    "resource_metadata": redact(hwatch.resource_metadata),
                    "next_tool": "mcp_setup_authorize",
                },
            )
        tail = redact(pwatch.stderr_tail())
        details: dict[str, Any] = {}
        if tail:
            details["stderr_tail"] = tail
        if isinstance(exc, _EraLocked):
            return ServerRejected(redact(exc.message), details=details)
        if isinstance(exc, _BadOutput) or (pwatch.bad_lines and not isinstance(exc, SetupError)):
            sample = redact(pwatch.first_bad_line or "")
            return ProtocolError(
                "The server wrote output that is not MCP JSON-RPC on stdout "
                f"(first line: {sample!r}). It may log to stdout, which breaks the protocol.",
                details=details,
            )
        if isinstance(exc, SetupError):
            return _redacted(exc, redact)
        if isinstance(exc, TimeoutError):
            return ProbeTimeout(
                f"The server did not list its tools within {deadline:g} seconds.",
                details=details,
            )
        if hwatch.auth_refused():
            status = next(s for s in hwatch.statuses if s in (401, 403))
            return ServerRejected(
                f"The server refused the credentials (HTTP {status}). Check the key or token you entered.",
                details={"http_status": status},
            )
        if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
            if hwatch.last_status and hwatch.last_status >= 400:
                return ProtocolError(
                    f"The server answered HTTP {hwatch.last_status}.", details={"http_status": hwatch.last_status}
                )
            # An error answer from the server itself (e.g. to initialize): it refused us.
            return ServerRejected(f"The server refused to start: {redact(exc.message)}", details=details)
        if pwatch.returncode is not None:
            details["exit_code"] = pwatch.returncode
            return _exited(f"The server exited with code {pwatch.returncode} before listing its tools.", tail, details)
        if isinstance(exc, MCPError):
            return _exited("The server closed the connection before listing its tools.", tail, details)
        if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout, OSError)) and pwatch.pid is None:
            return Unreachable(f"Could not reach the server: {redact(str(exc)) or type(exc).__name__}.")
        if isinstance(exc, httpx2.HTTPError):
            return ProtocolError(f"HTTP error talking to the server: {redact(str(exc))}")
        translated = translate(exc)
        if type(translated) is SetupError:
            logger.warning("probe failed unexpectedly: %s", redact(repr(exc)))
            return ProtocolError(f"The server did not speak MCP as expected ({type(exc).__name__}).", details=details)
        return _redacted(translated, redact)

    async def drain(self, timeout: float = 15.0) -> None:
        """End the sessions waiting for an install, then wait until every background teardown
        has finished (bounded). An adopted session belongs to its connection and is not waited for."""
        self.parking.expire_all()
        await asyncio.sleep(0)  # let the parked sessions see it
        pending = [t for t in self._teardowns if not t.done() and not self._adopted(t)]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def _adopted(self, task: asyncio.Task[None]) -> bool:
        parked = self._parked_in.get(task)
        return parked is not None and parked.claimed.is_set()

    @property
    def pending_teardowns(self) -> int:
        return sum(1 for t in self._teardowns if not t.done() and not self._adopted(t))


class _BadOutput(Exception):
    pass


class _EraLocked(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _unwrap(exc: BaseException) -> BaseException:
    """The first meaningful exception inside nested ExceptionGroups (the SDK wraps failures)."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        if not inner:
            return exc.exceptions[0]
        exc = inner[0]
    if isinstance(exc, MCPError) and exc.code == UNSUPPORTED_PROTOCOL_VERSION:
        return _EraLocked(exc.message)
    return exc


def _redacted(exc: SetupError, redact: Callable[[str], str]) -> SetupError:
    def value(v: Any) -> Any:  # a list of names stays a list
        return [redact(str(x)) for x in v] if isinstance(v, list) else redact(str(v))

    clone = type(exc)(redact(exc.message), key=exc.key, details={k: value(v) for k, v in exc.details.items()})
    return clone


def _exited(sentence: str, tail: str, details: dict[str, Any]) -> ServerExited:
    """Our ``sentence``, then the server's last error lines (words from outside, where an echo of
    the agent's text is scrubbed: setup_agent/setup/tool_args.py)."""
    err = ServerExited("", details=details)
    err.add_words(sentence, own=True)
    if tail:
        err.add_words(" Last lines of its error output: ", own=True)
        err.add_words(tail[-600:], own=False)
    return err
