"""The download phase in the sandbox: ``npm exec`` or ``uvx``/``uv`` filling its runner's cache
runs like a server does, in bubblewrap (or Landlock) with a network of its own, but:

- its only destinations are the package registries its runner is configured for
  (``registries.py``). Strict: a package's install script that tries any other host is refused
  by the proxy; a registry the person configured is allowed even on this computer or a private
  network (it is theirs), PyPI and npm's own only at public addresses;
- it may write only its private scratch dir (its ``HOME`` inside) and the caches it fills
  (``Sandbox.download_views``: npm's cache; uv's and its Pythons'); the user's home, ``.npmrc``
  included, stays hidden (the registries it names are passed on as ``npm_config_registry`` and,
  for a scoped package's own, ``npm_config_@scope:registry``);
- it is given the credentials of its registries, and only those (``registry_credentials.py``):
  the lines of the user's (and npm's global) npmrc for the package's registry host, written into
  a private npmrc in its ``HOME``; the index's user name and password (in its URL, ``UV_INDEX_<NAME>_*``, a private
  netrc holding the index host's entry). A server's start never gets them.

OCI pulls are the container engine's and are not wrapped; nor is anything with no sandbox
(``MCP_SETUP_SANDBOX=off``, or no mechanism here), which runs as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from setup_agent.errors import SandboxUnavailable

from .net_policy import NetPolicy
from .net_record import NetRecord
from .registries import runner_registries
from .registry_credentials import RegistryCredentials, registry_credentials
from .runners import find_runner, runner_env, runner_name
from .sandbox import Profile, Sandbox
from .server_net import ServerNet

__all__ = ["DownloadLaunch", "download_launch"]

logger = logging.getLogger(__name__)

#: The runners whose download is sandboxed here (by their command's name).
SANDBOXED = ("npm", "npx", "uv", "uvx")


@dataclass
class DownloadLaunch:
    """What starts one download: its command line and environment, and the network it owns
    (None: nothing of ours between it and the network); ``pass_fds`` go to the spawn."""

    argv: list[str]
    env: dict[str, str]
    net: ServerNet | None = None
    policy: NetPolicy | None = None
    record: NetRecord = field(default_factory=NetRecord)
    #: The credentials found for its registries (given to it when sandboxed; the runner reads
    #: the user's own files otherwise): what its output is scrubbed of, and how a 401 is told.
    credentials: RegistryCredentials = field(default_factory=lambda: RegistryCredentials(""))

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self.net.pass_fds if self.net is not None else ()


def download_launch(
    sandbox: Sandbox | None, argv: Sequence[str], env: Mapping[str, str], work: Path, host_env: Mapping[str, str]
) -> DownloadLaunch:
    """The sandboxed command line of a download (``argv``, run in its private dir ``work``), or
    ``argv`` as it is where nothing sandboxes it (module docstring). Raises
    :class:`~setup_agent.errors.SandboxUnavailable` when the setting forces a sandbox that does
    not work here: the download does not run then, as no server would."""
    if not argv or runner_name(argv[0]) not in SANDBOXED:
        return DownloadLaunch(list(argv), dict(env))
    credentials = registry_credentials(argv[0], argv[1:], host_env)
    unchanged = DownloadLaunch(list(argv), dict(env), credentials=credentials)
    if sandbox is None:
        return unchanged
    missing = sandbox.required_but_missing()
    if missing:
        raise SandboxUnavailable(missing, details={"sandbox": sandbox.mode})
    if sandbox.mechanism == "none":
        return unchanged
    command = find_runner(argv[0], env.get("PATH"))
    if command is None:
        return unchanged  # the spawn fails as it did: the start says the runner is missing
    command = os.path.abspath(command)
    policy, named = runner_registries(command, argv[1:], host_env)
    inner = {**runner_env(dict(env), command), **named}
    isolation = sandbox.network_isolation()
    record = NetRecord()
    net = (
        ServerNet(isolation, sandbox.net_proxy(), policy, record, forwards=policy.loopback_grants())
        if isolation.mechanism != "none"
        else None
    )
    try:
        ports = net.connect_ports if net is not None else None
        if net is not None and ports is not None:  # Landlock: the proxy's variables, its port only
            inner.update(net.environment())
        profile = Profile(work, network=True, connect_ports=tuple(ports) if ports is not None else None)
        wrapped, args, inner = sandbox.wrap_download(command, argv[1:], inner, profile)
        inner.update(credentials.write(profile.home))  # its HOME, made by the wrap: private
        out = [wrapped, *args]
        if net is not None:
            out = net.wrap(out)
    except BaseException:
        if net is not None:
            net.close()
        raise
    logger.info(
        "download of a %s package sandboxed (%s), to %s only",
        runner_name(command),
        isolation.mechanism,
        ", ".join(sorted(map(str, policy.only))) or "nowhere",
    )
    return DownloadLaunch(out, inner, net, policy, record, credentials)
