"""Our own stdio transport for MCP servers, with the process handling the SDK leaves out.

Compared with ``mcp.client.stdio.stdio_client`` it:

- is given the process by the launch (``start.py``), which gives it an **exact** environment
  (no inherited variables but the allowlist here, :func:`minimal_environment`, and the server's);
- runs the server in its own process group and, on teardown, always kills the whole
  group, so a server that exits on EOF but leaves a grandchild leaves nothing behind;
- keeps a bounded in-memory tail of stderr (never a file: stderr may echo a secret) and
  counts stdout lines that are not JSON-RPC, for the probe's error report;
- lets the caller pick the teardown grace;
- records the process group in a :class:`~setup_agent.launch.procs.ProcessLedger` when given one
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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import Process
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from .procs import ProcessLedger

__all__ = ["ProcessWatch", "minimal_environment", "proxy_credentials", "stdio_transport"]

logger = logging.getLogger(__name__)

# How this machine reaches the internet, which a server (and npx/uvx fetching it) needs behind a
# TLS-intercepting or mandatory proxy: where the extra CA certificates are (Node, OpenSSL, Python
# requests/pip, curl, npm, uv) and the proxy settings (both spellings; tools differ in which they
# read). None of it is a secret about the user's servers, except that a proxy URL may carry
# credentials (http://user:password@proxy): those are handed to the Redactor at start-up
# (``proxy_credentials``, app/runtime.py), so a server echoing its environment or an error quoting
# the URL shows a placeholder. Index URLs (PIP_INDEX_URL, UV_INDEX_URL, npm_config_registry) are not
# passed: they often embed tokens and are not needed to reach the public registries.
CA_ENV = (
    "NODE_EXTRA_CA_CERTS",
    "NODE_USE_SYSTEM_CA",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
    "npm_config_cafile",
    "NPM_CONFIG_CAFILE",
)
PROXY_ENV = tuple(
    name for base in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY") for name in (base, base.lower())
)
ENV_ALLOWLIST = (
    ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR")
    + CA_ENV
    + PROXY_ENV
    + (("SYSTEMROOT", "PATHEXT", "APPDATA", "LOCALAPPDATA", "USERPROFILE") if sys.platform == "win32" else ())
)
STDERR_TAIL_BYTES = 8192


def minimal_environment(extra: Mapping[str, str], *, host_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host's allowlisted variables plus ``extra``: never the rest of our environment."""
    source = os.environ if host_env is None else host_env
    env = {k: source[k] for k in ENV_ALLOWLIST if k in source and not source[k].startswith("()")}
    env.update(extra)
    return env


def proxy_credentials(host_env: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """``(value, placeholder)`` for each credential inside a proxy URL the servers inherit.

    For ``http://user:p%40ss@proxy:3128``: the userinfo ``user:p%40ss``, the password as written
    and decoded (``p@ss``); a userinfo without a password (a token as the user name) is the
    credential itself. Register them with the Redactor before any server starts."""
    for name in PROXY_ENV:
        value = host_env.get(name) or ""
        if name.upper() == "NO_PROXY" or "@" not in value:  # NO_PROXY is a list of hosts, not a URL
            continue
        try:
            parts = urlsplit(value if "://" in value else "http://" + value)
        except ValueError:
            continue
        userinfo = parts.netloc.rpartition("@")[0]
        if not userinfo:
            continue
        placeholder = f"[secret:{name}]"
        yield userinfo, placeholder
        user, _, password = userinfo.partition(":")
        for part in (password or user, unquote(password or user)):
            if part:
                yield part, placeholder


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
    spawn: Callable[[], Awaitable[Process]],
    *,
    watch: ProcessWatch | None = None,
    grace: float = 0.5,
    term_grace: float = 0.5,
    ledger: ProcessLedger | None = None,
) -> AsyncIterator[TransportStreams]:
    """Start the server (``spawn``: the launch's, ``start.LocalCommand.spawn``, in its own process
    group with pipes) and speak newline-delimited JSON-RPC to it.

    With a ``ledger``, the process group is recorded while it lives (see :mod:`setup_agent.launch.procs`).
    Raises ``FileNotFoundError`` / ``PermissionError`` when the command cannot start.
    """
    watch = watch if watch is not None else ProcessWatch()
    process = await spawn()
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
