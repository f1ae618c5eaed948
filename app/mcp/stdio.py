"""``mcp-setup mcp``'s stdio plumbing: stdin read on the event loop, answers drained at EOF.

:func:`run_stdio` serves :class:`~app.mcp.face.McpFace` on stdin/stdout. It answers
``initialize`` before it loads the core (tool calls wait for it), reads stdin on the event loop
so SIGTERM reaches the cleanup, and answers every request read before exiting at EOF, also one
the SDK cannot read (``-32700`` parse error, ``-32600`` invalid request, ``-32602``
invalid params; one log line without values). With both ends pipes, stdout is written on the
event loop too. Every request, a proxied ``tools/call`` too, goes through the SDK's server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params

from setup_agent.store import (
    SQLITE_FILE_NAME,
    TOOLS_BUDGET,
    read_sqlite_catalog,
    read_sqlite_counter,
    read_sqlite_preference,
    read_sqlite_recent,
)

from .face import McpFace

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.settings import Settings

__all__ = ["end_servers_now", "run_stdio"]

logger = logging.getLogger("app.mcp.face")  # the face's logger, as before the split

# Only the SDK server and the tool specs are imported up front: the core (ORM, HTTP clients,
# migrations) loads on the first request that needs it (a tool call; a listing only when the
# store has no catalog to read yet) — or, with MCP_SETUP_MCP_CORE=after-initialize, right after
# the client's initialize has been answered (see run_stdio).
#: How long to wait for a client's first request before loading the core anyway (after-initialize).
_LOAD_AFTER_IDLE_SECONDS = 1.0
_WRITER_HEADSTART_SECONDS = 0.005
#: Until the core is loaded, how often the store's change counter is read (stdlib sqlite3).
_EARLY_POLL_SECONDS = 0.5


async def _watch_until_core_wanted(face: McpFace, db_file: Path) -> None:
    """Until a request needs the core: tell clients when the store's tool list changes (another
    process installed or removed a server), reading it with the standard library."""
    counter = await asyncio.to_thread(read_sqlite_counter, db_file)
    signature = await asyncio.to_thread(_early_signature, db_file)
    while not face.core_wanted.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_EARLY_POLL_SECONDS):
                await face.core_wanted.wait()
        if face.core_wanted.is_set():
            return
        now = await asyncio.to_thread(read_sqlite_counter, db_file)
        if now == counter:
            continue
        counter = now
        new = await asyncio.to_thread(_early_signature, db_file)
        if new != signature:
            signature = new
            await face.tools_changed(("tools",))  # the only list read before the core


def _early_signature(db_file: Path) -> tuple[Any, ...]:
    """What decides the tool list before the core: the catalog, and the budget saved on the page."""
    catalog = read_sqlite_catalog(db_file)
    return (catalog.signature() if catalog is not None else None, read_sqlite_preference(db_file, TOOLS_BUDGET))


def _early_budget(db_file: Path, settings: Settings) -> int:
    """Before the core: the budget in this process's environment, else the one saved on the page,
    else the default (as setup_agent/gateway/budget.py decides once the core is up)."""
    saved = read_sqlite_preference(db_file, TOOLS_BUDGET)
    if saved is not None and saved.strip().isdigit():
        return int(saved)
    return settings.tools_budget


class _PipeLines:
    """stdin (a pipe) as async lines, read on the event loop: a cancel (SIGTERM) stops it at once.

    The SDK reads stdin in a worker thread, which nothing can interrupt while the client keeps
    the pipe open, so a SIGTERM could never get to the cleanup that stops our servers.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        #: Each line read, until the SDK's item for it is taken (one item per line, in order):
        #: a line the SDK cannot read is answered from it.
        self.lines: deque[str] = deque()

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        text = line.decode("utf-8", "replace")
        self.lines.append(text)
        return text


class _PipeOut:
    """stdout (a pipe) written on the event loop for the SDK's server: no thread hop per answer."""

    def __init__(self, writer: asyncio.StreamWriter, saved_fd: int) -> None:
        self.writer = writer
        self._saved_fd = saved_fd

    async def write(self, text: str) -> None:  # what stdio_server calls for each answer
        self.writer.write(text.encode("utf-8"))
        await self.writer.drain()

    async def flush(self) -> None:
        return None

    def restore(self) -> None:
        """Point fd 1 at the wire again (it pointed at stderr while serving)."""
        with contextlib.suppress(OSError):
            os.dup2(self._saved_fd, 1)
            os.close(self._saved_fd)


async def _pipe_stdout() -> _PipeOut | None:
    """A :class:`_PipeOut` over a duplicate of fd 1, or None (the SDK's writer) for files/ttys.

    While serving, fd 1 points at stderr, as the SDK's own claim does: stray output of ours or
    of a child misses the wire."""
    try:
        if not stat.S_ISFIFO(os.fstat(1).st_mode) and not stat.S_ISSOCK(os.fstat(1).st_mode):
            return None
        saved = os.dup(1)
    except (OSError, ValueError):
        return None
    try:
        pipe = os.fdopen(os.dup(1), "wb", buffering=0)
    except OSError:
        os.close(saved)
        return None
    try:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    except (OSError, ValueError):  # e.g. a loop that cannot watch this pipe: the SDK's writer
        pipe.close()
        os.close(saved)
        return None
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    os.dup2(2, 1)
    return _PipeOut(writer, saved)


_PARSE_ERROR, _INVALID_REQUEST, _INVALID_PARAMS = -32700, -32600, -32602


def _bad_line_answer(raw: str | None) -> tuple[int | None, Any]:
    """The JSON-RPC error code and id that answer a line the SDK could not read (None: a
    notification, which gets no answer). Never a value of the line in the answer."""
    if raw is None:
        return _PARSE_ERROR, None
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return _PARSE_ERROR, None  # truncated, not JSON, or nested past what we parse
    if not isinstance(message, dict):
        return _INVALID_REQUEST, None
    req_id = message.get("id")
    if not isinstance(req_id, (str, int)) or isinstance(req_id, bool):
        return (_INVALID_REQUEST, None) if "id" in message or "method" not in message else (None, None)
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return _INVALID_REQUEST, req_id
    return _INVALID_PARAMS, req_id  # a request the SDK refused: its params (depth, a lone surrogate)


def _error_message(code: int, req_id: Any) -> Any:
    from mcp import types
    from mcp.shared.message import SessionMessage

    text = {_PARSE_ERROR: "Parse error", _INVALID_REQUEST: "Invalid request", _INVALID_PARAMS: "Invalid params"}[code]
    error = types.JSONRPCError(jsonrpc="2.0", id=req_id, error=types.ErrorData(code=code, message=text))
    return SessionMessage(error)


async def _cancellable_stdin() -> Any:
    """A :class:`_PipeLines` over a duplicate of fd 0, or None (the SDK's default) for files/ttys."""
    try:
        if not stat.S_ISFIFO(os.fstat(0).st_mode) and not stat.S_ISSOCK(os.fstat(0).st_mode):
            return None
        fd = os.dup(0)
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0))
    except (OSError, ValueError):
        return None
    # Children must not read the wire: fd 0 now points at the null device.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return _PipeLines(reader)


class _Pending:
    """Requests read and not yet answered, by id as the SDK correlates them ("7" and 7 are one
    id, a cancel may name either); counted, since a client may reuse an id still in flight."""

    def __init__(self) -> None:
        self._count: Counter[Any] = Counter()
        self._changed = anyio.Event()

    def read(self, request_id: Any) -> None:
        self._count[coerce_request_id(request_id)] += 1

    def settled(self, request_id: Any) -> None:
        """One request of ``request_id`` is answered, or cancelled (never to be answered)."""
        key = coerce_request_id(request_id)
        if self._count[key] > 0:
            self._count[key] -= 1
            if not self._count[key]:
                del self._count[key]
            self._changed.set()
            self._changed = anyio.Event()

    async def wait(self, grace: float) -> None:
        """Until every request read is settled, or ``grace`` seconds."""
        with anyio.move_on_after(grace):
            while self._count:
                await self._changed.wait()


class _Answers:
    """The SDK server's write stream: each answer it sends settles its request."""

    def __init__(self, inner: Any, pending: _Pending, answered_once: anyio.Event | None) -> None:
        self._inner, self._pending, self._answered_once = inner, pending, answered_once

    async def send(self, item: Any, /) -> None:
        await self._inner.send(item)
        message = getattr(item, "message", None)
        if getattr(message, "method", None) is None and getattr(message, "id", None) is not None:
            self._pending.settled(message.id)
            if self._answered_once is not None:
                self._answered_once.set()

    async def aclose(self) -> None:  # the server closes it when it ends: stdio_server's writer finishes
        await self._inner.aclose()

    async def __aenter__(self) -> _Answers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Requests:
    """The SDK server's read stream: the transport's items, with a line the SDK could not read
    answered here, and the end of input held back until every request read has been answered.

    ``printf '…' | mcp-setup mcp`` closes stdin right after the last request; without this,
    the server would stop at EOF and drop the answers still being worked on. It wraps the
    streams (no task or stream of its own between them: a message takes no extra loop pass).
    """

    def __init__(self, inner: Any, answers: _Answers, pending: _Pending, lines: deque[str], grace: float) -> None:
        self._inner, self._answers, self._pending, self._lines, self._grace = inner, answers, pending, lines, grace

    @property
    def last_context(self) -> Any:  # the sender's context, as the SDK reads it off a context stream
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                await self._pending.wait(self._grace)
                raise
            raw = self._lines.popleft() if self._lines else None
            if not isinstance(item, Exception):
                break
            code, req_id = _bad_line_answer(raw)  # a line the SDK could not read: answered here
            logger.warning(
                "stdio: a request line could not be read (%s); answered %s",
                type(item).__name__,
                code if code is not None else "nothing (a notification)",
            )
            if code is not None:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await self._answers.send(_error_message(code, req_id))
        message = getattr(item, "message", None)
        method = getattr(message, "method", None)
        if method is not None and getattr(message, "id", None) is not None:
            self._pending.read(message.id)
        elif method == "notifications/cancelled":
            # A cancelled request is never answered: the end of input must not wait for it.
            cancelled = cancelled_request_id_from_params(getattr(message, "params", None))
            if cancelled is not None:
                self._pending.settled(cancelled)
        return item

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Requests:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _answered_streams(
    read_stream: Any,
    write_stream: Any,
    grace: float = 60.0,
    answered_once: anyio.Event | None = None,
    lines: deque[str] | None = None,
) -> tuple[_Requests, _Answers]:
    """The SDK server's streams over stdio_server's: every request read is answered before the
    end of input ends the server (see :class:`_Requests`)."""
    pending = _Pending()
    answers = _Answers(write_stream, pending, answered_once)
    return _Requests(read_stream, answers, pending, lines if lines is not None else deque(), grace), answers


def end_servers_now(settings: Settings) -> None:
    """End every installed server this process started, at once (an interrupt: no time to ask
    them to stop). What it recorded in the process ledger is what it started."""
    from setup_agent.launch import ProcessLedger

    # No wait: a killed group is gone in a moment, and the teardown that follows waits on each.
    ProcessLedger(Path(settings.home).expanduser() / "procs").end_mine(timeout=0)


async def run_stdio(
    settings: Settings,
    log_handler: logging.Handler | None = None,
    *,
    build: Callable[[Settings], Runtime] | None = None,
) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin.

    The client's ``initialize`` is answered at once. The core is loaded on the first request
    that needs it (a tool call, or a listing before the store exists); until then the tool
    list is read from the store's file and its change counter watched with the standard
    library (idle memory). With ``mcp_core="after-initialize"`` it loads right
    after the initialize answer has gone out (or after a second of silence). Tool calls wait
    for it; installed servers start on their first call.
    """
    db_file = None if settings.database_url else Path(settings.home).expanduser() / SQLITE_FILE_NAME
    face = McpFace(
        early_catalog=(lambda: read_sqlite_catalog(db_file)) if db_file is not None else None,
        gateway_tools=settings.gateway_tools,
        # Set in this process's environment, it decides (a client's entry may set it for that client).
        tools_budget=settings.tools_budget if "tools_budget" in settings.model_fields_set else None,
        tools_page_size=settings.tools_page_size,
        early_recent=(lambda: read_sqlite_recent(db_file)) if db_file is not None else None,
        early_budget=(lambda: _early_budget(db_file, settings)) if db_file is not None else None,
    )
    answered_once = anyio.Event()
    holder: list[Runtime] = []

    async def load() -> None:
        if settings.mcp_core == "first-call" and db_file is not None:
            await _watch_until_core_wanted(face, db_file)
        else:
            with anyio.move_on_after(_LOAD_AFTER_IDLE_SECONDS):
                await answered_once.wait()
        # The answer is handed to the SDK's writer thread; give it a moment to reach stdout
        # before the import below takes the GIL for most of a second.
        await anyio.sleep(_WRITER_HEADSTART_SECONDS)
        try:
            if build is None:
                from app.runtime import build_runtime
                from setup_agent.secrets import install_log_redaction

                runtime = await asyncio.to_thread(build_runtime, settings)
                if log_handler is not None:
                    install_log_redaction(runtime.redactor, log_handler)
            else:
                runtime = build(settings)
        except Exception as exc:
            logger.exception("mcp-setup could not start")
            face.failed_to_start(exc)
            return
        holder.append(runtime)
        face.provide(runtime)
        await runtime.start(eager=False)  # servers start on their first call

    out: _PipeOut | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(load)
            stdin = await _cancellable_stdin()
            if stdin is not None:
                out = await _pipe_stdout()
            async with stdio_server(stdin=stdin, stdout=out) as (read_stream, write_stream):
                streams = _answered_streams(
                    read_stream, write_stream, answered_once=answered_once, lines=getattr(stdin, "lines", None)
                )
                await face.server.run(*streams, face.initialization_options())
            tg.cancel_scope.cancel()
    finally:
        face.close()
        for runtime in holder:
            await runtime.aclose()
        if out is not None:
            out.restore()
