"""Our own stdio transport for MCP servers, with the process handling the SDK leaves out.

Compared with ``mcp.client.stdio.stdio_client`` it:

- passes an **exact** environment (no inherited variables but the ones given);
- runs the server in its own process group and, on teardown, always kills the whole
  group, so a server that exits on EOF but leaves a grandchild leaves nothing behind;
- keeps a bounded in-memory tail of stderr (never a file: stderr may echo a secret) and
  counts stdout lines that are not JSON-RPC, for the probe's error report;
- lets the caller pick the teardown grace;
- records the process group in a :class:`~setup_agent.procs.ProcessLedger` when given one
  (the entry is dropped once the group is gone), so a crash of ours cannot orphan it.

The transport is an async context manager yielding the SDK's ``(read, write)`` streams, so
``mcp.Client(transport)`` drives it like any other.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import Process
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from .procs import ProcessLedger

__all__ = ["ProcessWatch", "minimal_environment", "stdio_transport"]

logger = logging.getLogger(__name__)

ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR") + (
    ("SYSTEMROOT", "PATHEXT", "APPDATA", "LOCALAPPDATA", "USERPROFILE") if sys.platform == "win32" else ()
)
STDERR_TAIL_BYTES = 8192


def minimal_environment(
    extra: Mapping[str, str], *, host_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The host's allowlisted variables plus ``extra``: never the rest of our environment."""
    source = os.environ if host_env is None else host_env
    env = {k: source[k] for k in ENV_ALLOWLIST if k in source and not source[k].startswith("()")}
    env.update(extra)
    return env


@dataclass
class ProcessWatch:
    """What the caller may want to know about the process, filled as it runs."""

    pid: int | None = None
    returncode: int | None = None
    exited: anyio.Event = field(default_factory=anyio.Event)
    bad_lines: int = 0
    first_bad_line: str | None = None
    bad_line_seen: anyio.Event = field(default_factory=anyio.Event)
    _stderr: deque[bytes] = field(default_factory=deque)
    _stderr_size: int = 0
    on_stderr: Callable[[bytes], None] | None = None  # e.g. a server's rolling log file

    def add_stderr(self, chunk: bytes) -> None:
        if self.on_stderr is not None:
            self.on_stderr(chunk)
        self._stderr.append(chunk)
        self._stderr_size += len(chunk)
        while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr) > 1:
            self._stderr_size -= len(self._stderr.popleft())

    def stderr_tail(self, limit: int = 2000) -> str:
        text = b"".join(self._stderr).decode("utf-8", "replace")
        return text[-limit:].strip()


async def _read_stderr(process: Process, watch: ProcessWatch) -> None:
    assert process.stderr is not None
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in process.stderr:
            watch.add_stderr(chunk)


async def _wait_exit(process: Process, watch: ProcessWatch) -> None:
    # Poll returncode rather than process.wait(): on asyncio, wait() also waits for pipe EOF,
    # and a grandchild holding the pipes would make an exited server look alive.
    while process.returncode is None:
        await anyio.sleep(0.02)
    watch.returncode = process.returncode
    watch.exited.set()


def _kill_group(pgid: int, sig: int) -> bool:
    """Signal the group; False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_alive(pgid: int) -> bool:
    return _kill_group(pgid, 0)


async def _stop(process: Process, watch: ProcessWatch, grace: float, term_grace: float) -> None:
    """Close stdin, give the server ``grace`` to exit, then SIGTERM/SIGKILL its whole group."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    pgid = process.pid
    if grace > 0:
        with anyio.move_on_after(grace):
            await watch.exited.wait()
    if sys.platform == "win32":  # pragma: no cover
        with suppress(ProcessLookupError):
            process.kill()
        return
    if not watch.exited.is_set() and _kill_group(pgid, signal.SIGTERM):
        with anyio.move_on_after(term_grace):
            await watch.exited.wait()
    # Whatever is left of the group (a grandchild, a SIGTERM-ignoring server) dies now.
    _kill_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(2.0):
        await watch.exited.wait()
    # Wait (bounded) until the kernel has no member of the group left.
    with anyio.move_on_after(2.0):
        while _group_alive(pgid):
            await anyio.sleep(0.01)


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    watch: ProcessWatch | None = None,
    grace: float = 0.5,
    term_grace: float = 0.5,
    ledger: ProcessLedger | None = None,
) -> AsyncIterator[TransportStreams]:
    """Spawn ``command`` with exactly ``env`` and speak newline-delimited JSON-RPC to it.

    With a ``ledger``, the process group is recorded while it lives (see :mod:`setup_agent.procs`).
    Raises ``FileNotFoundError`` / ``PermissionError`` when the command cannot start.
    """
    watch = watch if watch is not None else ProcessWatch()
    process = await anyio.open_process(
        [command, *args],
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    watch.pid = process.pid
    entry = ledger.record(process.pid) if ledger is not None and sys.platform != "win32" else None

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = b""
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    lines = (buffer + chunk).split(b"\n")
                    buffer = lines.pop()
                    for raw in lines:
                        line = raw.decode("utf-8", "replace").strip()
                        if not line:
                            continue
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except ValueError:
                            watch.bad_lines += 1
                            if watch.first_bad_line is None:
                                watch.first_bad_line = line[:200]
                                watch.bad_line_seen.set()
                            continue
                        try:
                            await read_writer.send(SessionMessage(message))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(_read_stderr, process, watch)
        tg.start_soon(_wait_exit, process, watch)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop(process, watch, grace, term_grace)
                if ledger is not None and not _group_alive(process.pid):
                    ledger.forget(entry)
                for stream in (process.stdout, process.stderr):
                    if stream is not None:
                        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                            await stream.aclose()
            tg.cancel_scope.cancel()
