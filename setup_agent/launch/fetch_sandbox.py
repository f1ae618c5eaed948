"""The download phase in the sandbox: ``npm exec`` or ``uvx``/``uv`` filling its runner's cache
runs like a server does, in bubblewrap (or Landlock) with a network of its own, but:

- its only destinations are the package registries its runner is configured for
  (:func:`download_registries`): npm's from the command line's ``--registry=``, else
  ``npm_config_registry`` (any case), else ``registry=`` in the user's ``.npmrc``, else
  ``https://registry.npmjs.org``; uv's from the command line's index options, else
  ``UV_DEFAULT_INDEX``/``UV_INDEX_URL``/``PIP_INDEX_URL`` (and the extra indexes of
  ``UV_INDEX``/``UV_EXTRA_INDEX_URL``/``PIP_EXTRA_INDEX_URL``), PyPI (``pypi.org`` and
  ``files.pythonhosted.org``) unless a default index replaces it. Strict: a package's install
  script that tries any other host is refused by the proxy; a registry the person configured
  is allowed even on this computer or a private network (it is theirs), PyPI and npm's own
  only at public addresses;
- it may write only its private scratch dir (its ``HOME`` inside) and the caches it fills
  (``Sandbox.download_views``: npm's cache; uv's and its Pythons'); the user's home, ``.npmrc``
  included, stays hidden (the registry it names is passed on as ``npm_config_registry``).

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

from .net_policy import Endpoint, NetPolicy
from .net_record import NetRecord
from .runners import find_runner, with_runner_dir
from .sandbox import Profile, Sandbox
from .server_net import ServerNet

__all__ = ["DownloadLaunch", "download_launch", "download_registries"]

logger = logging.getLogger(__name__)

NPM_DEFAULT = "https://registry.npmjs.org/"
PYPI_DEFAULT = ("pypi.org:443", "files.pythonhosted.org:443")
#: uv's index options whose value replaces PyPI as the default index; then those that add one.
_UV_DEFAULT_OPTIONS = ("--default-index", "--index-url", "-i")
_UV_EXTRA_OPTIONS = ("--index", "--extra-index-url")
#: The same in uv's (and pip's) environment, passed on to the download.
_UV_DEFAULT_ENV = ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL")
_UV_EXTRA_ENV = ("UV_INDEX", "UV_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL")
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

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return self.net.pass_fds if self.net is not None else ()


def download_registries(
    runner: str, args: Sequence[str], host_env: Mapping[str, str]
) -> tuple[NetPolicy, dict[str, str]]:
    """The download's policy (strict: its registries only) and the variables that name those
    registries to the runner inside the sandbox, where the user's config files are hidden."""
    name = Path(runner).name
    if name in ("npm", "npx"):
        url, configured = _npm_registry(args, host_env)
        env = {"npm_config_registry": url} if configured else {}
        return _policy([url] if configured else [], [NPM_DEFAULT] if not configured else []), env
    if name in ("uv", "uvx"):
        defaults = (
            _option_values(args, _UV_DEFAULT_OPTIONS) or [host_env[v] for v in _UV_DEFAULT_ENV if host_env.get(v)][:1]
        )
        extras = _option_values(args, _UV_EXTRA_OPTIONS)
        for var in _UV_EXTRA_ENV:
            extras += host_env.get(var, "").split()
        env = {v: host_env[v] for v in (*_UV_DEFAULT_ENV, *_UV_EXTRA_ENV) if host_env.get(v)}
        policy = _policy([_index_url(u) for u in (*defaults, *extras)], [])
        if not defaults:  # PyPI stays the default index
            policy = NetPolicy.strict({*policy.only, *map(Endpoint.parse, PYPI_DEFAULT)}, policy.granted)
        return policy, env
    return NetPolicy.none(), {}


def _policy(configured: Sequence[str], public: Sequence[str]) -> NetPolicy:
    """Strict: ``public`` registries at public addresses only; ``configured`` ones (the person's
    own settings) also where they are not public."""
    mine = NetPolicy.only_urls(configured).only if configured else frozenset()
    return NetPolicy.strict({*mine, *(NetPolicy.only_urls(public).only if public else ())}, mine)


def _npm_registry(args: Sequence[str], host_env: Mapping[str, str]) -> tuple[str, bool]:
    """npm's registry for this download, and whether it is configured (not npm's default)."""
    for arg in args:
        if arg.startswith("--registry="):
            return arg.split("=", 1)[1], True
    for key, value in host_env.items():
        if key.lower() == "npm_config_registry" and value:
            return value, True
    rc = host_env.get("npm_config_userconfig") or host_env.get("NPM_CONFIG_USERCONFIG")
    home = host_env.get("HOME")
    path = Path(rc) if rc else (Path(home) / ".npmrc" if home else None)
    if path is not None:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            key, eq, value = line.partition("=")
            if eq and key.strip() == "registry" and value.strip():
                return value.strip().strip("\"'"), True
    return NPM_DEFAULT, False


def _option_values(args: Sequence[str], names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if arg in names and i + 1 < len(args):
            out.append(args[i + 1])
        elif eq and name in names:
            out.append(value)
    return out


def _index_url(value: str) -> str:
    """An index as uv takes it: a URL, or ``name=URL`` (``--index``, ``UV_INDEX``)."""
    name, eq, rest = value.partition("=")
    return rest if eq and "://" not in name else value


def download_launch(
    sandbox: Sandbox | None, argv: Sequence[str], env: Mapping[str, str], work: Path, host_env: Mapping[str, str]
) -> DownloadLaunch:
    """The sandboxed command line of a download (``argv``, run in its private dir ``work``), or
    ``argv`` as it is where nothing sandboxes it (module docstring). Raises
    :class:`~setup_agent.errors.SandboxUnavailable` when the setting forces a sandbox that does
    not work here: the download does not run then, as no server would."""
    unchanged = DownloadLaunch(list(argv), dict(env))
    if sandbox is None or not argv or Path(argv[0]).name not in SANDBOXED:
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
    policy, named = download_registries(command, argv[1:], host_env)
    inner = {**with_runner_dir(dict(env), command), **named}
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
        out = [wrapped, *args]
        if net is not None:
            out = net.wrap(out)
    except BaseException:
        if net is not None:
            net.close()
        raise
    logger.info(
        "download of a %s package sandboxed (%s), to %s only",
        Path(command).name,
        isolation.mechanism,
        ", ".join(sorted(map(str, policy.only))) or "nowhere",
    )
    return DownloadLaunch(out, inner, net, policy, record)
