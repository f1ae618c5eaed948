"""One local server start's network: its proxy listener, the hand-off into its own namespace,
its policy and its record, started with the process and stopped with it.

:func:`server_network` decides, for a start (:func:`~setup_agent.launch.start.local_command`),
which of the sandbox's network mechanisms applies (:mod:`~setup_agent.launch.net_isolation`):

- ``bwrap-netns``: the server runs in a network namespace of its own (no ``--share-net``) behind
  the bootstrap (:class:`~setup_agent.launch.netns.NetnsBridge`), which hands its proxy socket
  (and each granted loopback port's) to mcp-setup's :class:`~setup_agent.launch.net_proxy.NetProxy`;
- ``landlock-net``: a proxy listener on the host's loopback, the server's TCP connections held to
  its port (``Profile.connect_ports``) and the proxy variables in its environment;
- nothing (None): no sandbox or one without network rules (the faces say so), a server with no
  network at all (the sandbox alone cuts it), a container (its engine's network), or a local
  package that serves HTTP (mcp-setup reaches it on the host's loopback, so it keeps the host's
  network).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .net_isolation import NetIsolation
from .net_policy import REASONS, Endpoint, NetPolicy
from .net_proxy import NetProxy, PolicySource, ProxyListener
from .net_record import Attempt, NetRecord
from .netns import NetnsBridge
from .netns_bootstrap import proxy_environment
from .registries import runner_registries
from .runners import runner_name

if TYPE_CHECKING:
    from .sandbox import Sandbox
    from .spec import ResolvedLaunch

__all__ = ["HANDOUT_TIMEOUT", "ServerNet", "refused_words", "server_network", "with_registries"]

logger = logging.getLogger(__name__)

#: Seconds a new namespace has to hand out its proxy socket (the bootstrap takes milliseconds;
#: a dead one ends the channel at once).
HANDOUT_TIMEOUT = 30.0

_CONTAINER_RUNNERS = ("docker", "podman")


class ServerNet:
    """The network side of one start (module docstring); :meth:`started` after the spawn,
    :meth:`aclose` when the process is gone (safe before a spawn, and more than once)."""

    def __init__(
        self,
        isolation: NetIsolation,
        proxy: NetProxy,
        policy: PolicySource,
        record: NetRecord,
        *,
        forwards: Sequence[Endpoint] = (),
        timeout: float = HANDOUT_TIMEOUT,
    ) -> None:
        self.isolation, self.proxy, self.policy, self.record = isolation, proxy, policy, record
        #: Granted loopback services by port: forwarded into its namespace (bwrap), or ports it may
        #: connect to directly (Landlock).
        self._forwards = {e.port: e for e in forwards}
        self._timeout = timeout
        self._listeners: list[ProxyListener] = []
        self.bridge: NetnsBridge | None = None
        self._host_socket: socket.socket | None = None
        if isolation.mechanism == "bwrap-netns":
            self.bridge = NetnsBridge(forwards=list(self._forwards))
        else:
            # protocol named: asyncio turns Nagle off only on a socket that says TCP (else each small
            # write after the first on a connection can wait ~40 ms for the delayed ACK)
            self._host_socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            self._host_socket.bind(("127.0.0.1", 0))
            self._host_socket.listen()

    @property
    def mechanism(self) -> str:
        return self.isolation.mechanism

    @property
    def host_port(self) -> int | None:
        """Landlock: the proxy's port on the host's loopback (the one port the server may connect to)."""
        return int(self._host_socket.getsockname()[1]) if self._host_socket is not None else None

    @property
    def connect_ports(self) -> list[int] | None:
        """Landlock: the TCP ports it may connect to (the proxy's, each granted loopback service's:
        its clients reach those directly, as ``NO_PROXY`` says); None in a namespace of its own."""
        port = self.host_port
        return [port, *self._forwards] if port is not None else None

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self.bridge.pass_fds if self.bridge is not None else ()

    def environment(self) -> dict[str, str]:
        """Variables the server's environment gets here (Landlock; in a namespace the bootstrap sets them)."""
        port = self.host_port
        return proxy_environment(port) if port is not None else {}

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The sandbox's command line, in a namespace of its own behind the bootstrap (bwrap)."""
        return self.bridge.into_bwrap(argv) if self.bridge is not None else list(argv)

    async def started(self) -> None:
        """Right after the spawn: the proxy serves the server's sockets. Raises
        :class:`~setup_agent.errors.SandboxUnavailable` when its namespace handed out nothing."""
        if self.bridge is not None:
            self.bridge.spawned()
            sockets = await self.bridge.sockets(self._timeout)
            self._listeners.append(await self.proxy.serve(sockets.proxy, self.policy, self.record))
            for port, group in sockets.forwards.items():
                for sock in group:
                    self._listeners.append(
                        await self.proxy.forward(sock, self._forwards[port], self.policy, self.record)
                    )
        elif self._host_socket is not None:
            sock, self._host_socket = self._host_socket, None
            self._listeners.append(await self.proxy.serve(sock, self.policy, self.record))

    def close(self) -> None:
        """Close what no listener serves yet (the hand-off channel, an unserved host socket)."""
        if self.bridge is not None:
            self.bridge.close()
        if self._host_socket is not None:
            self._host_socket.close()

    async def aclose(self) -> None:
        self.close()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            with contextlib.suppress(Exception):
                await listener.aclose()


def server_network(
    sandbox: Sandbox | None, command: str, resolved: ResolvedLaunch, record: NetRecord | None
) -> ServerNet | None:
    """The network for a start of ``resolved`` (``command``: the resolved runner), or None where
    nothing of ours stands between it and the network (module docstring)."""

    if sandbox is None or Path(command).name in _CONTAINER_RUNNERS or resolved.transport != "stdio":
        return None
    if sandbox.mechanism == "none":
        return None
    policy = with_registries(resolved.policy, resolved.spec.args, runner_name(command), sandbox.host_env)
    if policy.mode == "none":
        return None  # the sandbox's own "no network"
    isolation = sandbox.network_isolation()
    if isolation.mechanism == "none":
        return None
    forwards = policy.loopback_grants()
    return ServerNet(
        isolation, sandbox.net_proxy(), policy, record if record is not None else NetRecord(), forwards=forwards
    )


#: A runner's options that name the package registry it reads from (npx, uvx).
_REGISTRY_OPTIONS = ("--registry", "--default-index", "--index-url", "--index", "--extra-index-url")
#: The registries a runner reads from by default, by name (the consent shows the runner).
RUNNER_REGISTRIES: dict[str, tuple[str, ...]] = {
    "npx": ("registry.npmjs.org:443",),
    "npm": ("registry.npmjs.org:443",),
    "uvx": ("pypi.org:443", "files.pythonhosted.org:443"),
    "uv": ("pypi.org:443", "files.pythonhosted.org:443"),
}


def with_registries(
    policy: NetPolicy, args: Sequence[str], runner: str = "", host_env: Mapping[str, str] | None = None
) -> NetPolicy:
    """``policy`` with the package registries of the start granted: the runner's default ones
    by name, those the command line names (``npx --registry=URL``, ``uvx --default-index
    URL``) and those the person configured (``host_env``'s variables, their ``.npmrc``:
    ``registries.py``): the runner reads package metadata there on a start (a registry on this
    computer or the person's network too)."""
    if policy.mode == "none":
        return policy
    found: set[Endpoint] = {Endpoint.parse(e) for e in RUNNER_REGISTRIES.get(runner, ())}
    if host_env is not None:
        found |= runner_registries(runner, args, host_env)[0].granted
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in _REGISTRY_OPTIONS:
            continue
        url = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        with contextlib.suppress(Exception):
            found |= NetPolicy.only_urls([url]).only
    return dataclasses.replace(policy, granted=policy.granted | found) if found else policy


def refused_words(attempt: Attempt, server: str) -> str:
    """A refusal told to the person, with the one step that allows it (``mcp-setup allow``)."""
    return (
        f"{server} tried to connect to {attempt.destination}, and mcp-setup refused it "
        f"({REASONS.get(attempt.reason, attempt.reason)}). If it needs it: mcp-setup allow {server} {attempt.destination}"
    )
