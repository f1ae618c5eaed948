"""The launch: where a :class:`~setup_agent.launch.spec.ResolvedLaunch` becomes what runs.

Up to here every secret is a masked :class:`~setup_agent.secrets.SecretValue`; this module is the
one place in the core that reveals a value for a start (:func:`_filled`), and nothing it makes
prints one (every ``repr`` names keys only).

- A local server (stdio, or a package that serves HTTP): :func:`local_command` fills the
  templates, builds the exact environment (the host's allowlist plus the server's values,
  ``transport.minimal_environment``), finds the command on that environment's PATH (a missing
  runner is ``runtime_missing``), runs the server's own program in place of its runner where the
  download phase noted what the runner installed (``direct.py``: no ``npm exec`` or ``uv`` left
  running beside it; the runner otherwise) and wraps it in the sandbox. The :class:`LocalCommand` it returns
  starts the process (:meth:`LocalCommand.spawn`, for the probe and live connections through our
  stdio transport, and for a local HTTP package through ``connector.serving_process``) or
  replaces the calling process with it (:meth:`LocalCommand.become`, ``mcp-setup run``). Every
  sandboxed start gets its network here too (``server_net.py``): its own namespace and a proxy
  listener under the server's policy, which the :class:`LocalCommand` owns: the proxy serves from
  the spawn and stops at :meth:`LocalCommand.aclose` (``async with`` it), after the process.
- A remote (streamable HTTP or SSE), and the address a local HTTP package serves on:
  :func:`remote_endpoint`, its URL and headers filled; the connector opens the HTTP transport with
  them, and a sign-in (OAuth) is made for that URL.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn

import anyio
from anyio.abc import Process

from setup_agent.errors import CommandNotFound, InvalidInput, RuntimeMissing, SandboxUnavailable
from setup_agent.secrets import SecretValue

from .direct import DirectStarts, direct_start
from .net_record import NetRecord
from .runners import BUNDLED, MISSING_BUNDLE, find_runner, runner_env
from .sandbox import Sandbox, sandboxed
from .server_net import ServerNet, server_network
from .spec import Filled, ResolvedLaunch, fill
from .transport import minimal_environment

__all__ = ["RUNTIME_HINTS", "Endpoint", "LocalCommand", "check_command", "local_command", "remote_endpoint"]

#: Runners we know, with how to get them: a missing one is ``runtime_missing``, not
#: ``command_not_found``.
#: (Node and uv come with mcp-setup: a missing one is a broken install, said by ``MISSING_BUNDLE``.)
RUNTIME_HINTS = {
    "docker": "Install Docker and start its engine: https://docs.docker.com/get-docker/.",
    "dnx": "Install the .NET 10 SDK (it brings dnx): https://dotnet.microsoft.com/download.",
    "python3": "Install Python 3: your package manager or https://www.python.org.",
    "python": "Install Python 3: your package manager or https://www.python.org.",
}


def check_command(command: str, env: Mapping[str, str]) -> str:
    """Resolve ``command`` on the child's PATH (else the runner bundled with mcp-setup, also in
    place of a system Node too old for the servers: setup_agent/launch/runners.py), or raise
    RuntimeMissing / CommandNotFound."""
    found = find_runner(command, env.get("PATH"))  # a too-old system Node is passed over
    if found:
        return found
    name = Path(command).name
    if name in BUNDLED:  # none on the system, and mcp-setup's own is missing
        raise RuntimeMissing(
            f"This server needs {name}, which is not on this machine. {MISSING_BUNDLE[BUNDLED[name]]}.",
            details={"runtime": name},
        )
    if name in RUNTIME_HINTS:
        raise RuntimeMissing(
            f"This server needs {name}, which is not installed on this machine. {RUNTIME_HINTS[name]}",
            details={"runtime": name},
        )
    raise CommandNotFound(f"The command {command!r} was not found on this machine.", details={"command": command})


def _filled(resolved: ResolvedLaunch) -> Filled:
    """The launch's templates with its values revealed: the only reveal for a start."""
    plain = {k: v.reveal() if isinstance(v, SecretValue) else v for k, v in resolved.values.items()}
    return fill(resolved.spec, plain, dirname=resolved.bundle_dir)


@dataclass(frozen=True)
class LocalCommand:
    """A local server's command line, environment and working dir, sandbox applied, with the
    network it owns (None: nothing of ours between it and the network); ``async with`` it, or
    :meth:`aclose` it once the process is gone."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    #: What the server sees as its ``argv[0]``: the entry's own command when it is not wrapped.
    argv0: str
    net: ServerNet | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return f"LocalCommand(command={self.command!r}, args=<{len(self.args)} items>, env=<keys {sorted(self.env)}>)"

    @property
    def record(self) -> NetRecord | None:
        """What it reached or tried through the proxy (None: not proxied)."""
        return self.net.record if self.net is not None else None

    async def spawn(self) -> Process:
        """Start it in its own process group (the caller stops the group), with pipes for stdio;
        its proxy serves from here on."""
        return await self._open(subprocess.PIPE)

    async def _open(self, stdio: int | IO[Any] | None) -> Process:
        process = await anyio.open_process(
            [self.command, *self.args],
            env=dict(self.env),
            cwd=self.cwd,
            start_new_session=True,
            stdin=stdio,
            stdout=stdio,
            stderr=stdio,
            pass_fds=self.net.pass_fds if self.net is not None else (),
        )
        if self.net is not None:
            try:
                await self.net.started()
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    said = await _stopped(process)
                if isinstance(exc, SandboxUnavailable) and said:
                    raise SandboxUnavailable(f"{exc} It said: {said}") from None
                raise
        return process

    async def aclose(self) -> None:
        """Stop its proxy listener (and close the hand-off channel); safe more than once."""
        if self.net is not None:
            with anyio.CancelScope(shield=True):
                await self.net.aclose()

    async def __aenter__(self) -> LocalCommand:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def exec(self) -> NoReturn:
        """Replace this process with it (``mcp-setup run``: the client speaks to the server itself)."""
        if self.cwd is not None:
            os.chdir(self.cwd)
        os.execve(self.command, [self.argv0, *self.args], self.env)

    def become(self) -> int:
        """``mcp-setup run``: replace this process with it (:meth:`exec`), or, when its proxy lives
        in this process, run it on this process's stdin, stdout and stderr until it exits (signals
        passed on to it) and return its exit code."""
        if self.net is None:
            self.exec()
        return anyio.run(self._attached)

    async def _attached(self) -> int:
        async with self:
            process = await self._open(None)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
                async with anyio.create_task_group() as tg:

                    async def pass_on() -> None:
                        async for signum in signals:
                            with suppress(ProcessLookupError, PermissionError):
                                os.killpg(process.pid, signum)

                    tg.start_soon(pass_on)
                    code = await process.wait()
                    tg.cancel_scope.cancel()
        return code if code >= 0 else 128 - code


async def _stopped(process: Process) -> str:
    """Kill a start whose network could not be set up; what it said on stderr, if anything."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()
    said = b""
    if process.stderr is not None:
        with anyio.move_on_after(1), suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            said = await process.stderr.receive(4096)
    return said.decode("utf-8", "replace").strip()[:500]


def local_command(
    resolved: ResolvedLaunch,
    *,
    sandbox: Sandbox | None,
    host_env: Mapping[str, str] | None = None,
    record: NetRecord | None = None,
    direct: DirectStarts | None = None,
) -> LocalCommand:
    """The command line that starts ``resolved`` here: values filled, the exact environment, the
    command found on its PATH (or, for a runner whose install ``direct`` noted, the server's own
    program: ``direct.py``), wrapped in ``sandbox`` (None: none) with its network (the proxy's
    record is ``record``, or a new one). Raises ``runtime_missing`` / ``command_not_found`` /
    ``sandbox_unavailable`` before anything starts."""
    filled = _filled(resolved)
    if not filled.command:
        raise InvalidInput("This server has no command to start here.")
    env = minimal_environment(filled.env, host_env=host_env)
    found = check_command(filled.command, env)
    env = runner_env(env, found)  # a bundled npx finds the node beside it
    # Its network is the runner's (the registries granted as the consent showed them, should a
    # later start need the runner again); the sandbox shows it the runner's cache views.
    net = server_network(sandbox, found, resolved, record)
    shows = sandbox.shows_cached if sandbox is not None else None
    own = direct_start(direct, resolved.spec, found, filled.args, env, shows)
    program, program_args, env = (own.command, own.args, own.env) if own is not None else (found, filled.args, env)
    try:
        ports = net.connect_ports if net is not None else None
        if ports is not None and net is not None:  # Landlock: the proxy's variables, its port only
            env = {**env, **net.environment()}
        command, args, env = sandboxed(
            sandbox, program, program_args, env, resolved, connect_ports=ports, runner=(found, filled.args)
        )
        if net is not None:
            command, *args = net.wrap([command, *args])
    except BaseException:
        if net is not None:
            net.close()
        raise
    argv0 = filled.command if command == found else command  # the direct program: its own path
    return LocalCommand(command, args, env, resolved.cwd, argv0, net)


@dataclass(frozen=True)
class Endpoint:
    """Where a remote (or a local HTTP package) is reached, with the headers every request carries."""

    url: str
    headers: dict[str, str]

    def __repr__(self) -> str:
        return f"Endpoint(url=<hidden>, headers=<keys {sorted(self.headers)}>)"


def remote_endpoint(resolved: ResolvedLaunch) -> Endpoint:
    """``resolved``'s URL (its values percent-encoded) and headers, filled."""
    filled = _filled(resolved)
    if not filled.url:
        raise InvalidInput("This server has no address to connect to.")
    return Endpoint(filled.url, filled.headers)
