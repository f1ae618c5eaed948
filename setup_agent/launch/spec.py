"""Launch specs: from a registry package to what to run.

A :class:`LaunchSpec` is what gets persisted for an installed server, so it holds no secret:
values arrive at start time. :func:`materialize` binds a spec to its values, its working dir and
its bundle dir as a :class:`ResolvedLaunch`, in which a secret is still a masked
:class:`~setup_agent.secrets.SecretValue`; the templates are filled (:func:`fill`) only by the
launch itself (``start.py``), as the process starts. Templates use ``${NAME}`` for a
user-supplied key and ``${__dirname}`` for the server's install dir (MCPB); ``$$`` is a literal
``$``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

from setup_agent.errors import InvalidInput
from setup_agent.secrets import SecretValue

if TYPE_CHECKING:
    from .net_policy import NetPolicy

__all__ = ["Filled", "LaunchSpec", "ResolvedLaunch", "Value", "Values", "fill", "materialize", "template_keys"]

#: A setting's value on its way to a start: a plain string the agent or the user gave and may
#: see (a region, a folder), or a secret, masked until the launch reveals it (``start.py``).
Value = str | SecretValue
Values = Mapping[str, Value]

_TEMPLATE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


class LaunchSpec(BaseModel):
    transport: Literal["stdio", "streamable-http", "sse"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    package_type: str = "stdio"
    identifier: str = ""
    version: str | None = None
    file_sha256: str | None = None
    runner: str | None = None  # npx, uvx, docker, dnx, node, python3 … (None for remotes)
    needs_install_dir: bool = False  # MCPB: ${__dirname} is the unpacked bundle
    #: The sandbox's widening the user chose in the consent (setup_agent/launch/sandbox.py): paths
    #: the server may read and write besides its own folder, and whether it has a network.
    sandbox_grants: list[str] = Field(default_factory=list)
    sandbox_network: bool = True
    #: Files of the user's home that the command line names and the user ticked in the consent:
    #: read-only in the sandbox. Any other file of the home an entry names is kept from the server.
    sandbox_reads: list[str] = Field(default_factory=list)
    #: The person's network policy for it (``NetPolicy.to_dict()``: granted ``host:port``s, strict
    #: "only these"); empty: the default (the public internet, nothing local). ``sandbox_network``
    #: false is "no network" whatever this says.
    sandbox_net: dict[str, Any] = Field(default_factory=dict)
    #: The person's choice that it is never stopped when idle (``mcp-setup enable NAME --keep-running``).
    keep_running: bool = False

    def keys(self) -> set[str]:
        """Every user key the spec's templates name."""
        found: set[str] = set()
        for text in [*self.args, *self.env.values(), *self.headers.values(), self.url or "", self.command or ""]:
            found |= template_keys(text)
        found.discard("__dirname")
        return found


def template_keys(text: str) -> set[str]:
    return {m.group(1) for m in _TEMPLATE.finditer(text) if m.group(1)}


#: Inside a URL a value is percent-encoded but for characters that keep a host or port whole.
_URL_SAFE = ":@!$'()*+,;="


def _fill(text: str, values: Mapping[str, str], missing: set[str], *, in_url: bool = False) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return "$"
        if name not in values:
            missing.add(name)
            return ""
        value = values[name]
        return quote(value, safe=_URL_SAFE) if in_url and name != "__dirname" else value

    return _TEMPLATE.sub(sub, text)


@dataclass(frozen=True)
class ResolvedLaunch:
    """A spec bound to its values and its dirs, ready to start: every value it names is given,
    secrets still masked. Only the launch (``start.py``) fills it in; its ``repr`` names keys only."""

    spec: LaunchSpec
    values: Values = field(default_factory=dict)
    cwd: str | None = None
    #: The unpacked bundle of an MCPB (``${__dirname}``): its own, like ``cwd``.
    bundle_dir: str | None = None

    @property
    def transport(self) -> str:
        return self.spec.transport

    @property
    def grants(self) -> tuple[str, ...]:
        return tuple(self.spec.sandbox_grants)

    @property
    def network(self) -> bool:
        return self.spec.sandbox_network

    @property
    def chosen_reads(self) -> tuple[str, ...]:
        """Files of the user's home the user let it read (ticked in the consent)."""
        return tuple(self.spec.sandbox_reads)

    @property
    def policy(self) -> NetPolicy:
        """Where the server may connect, as the person decided (``none`` without a network)."""
        from .net_policy import NetPolicy

        if not self.spec.sandbox_network:
            return NetPolicy.none()
        return NetPolicy.from_dict(self.spec.sandbox_net) if self.spec.sandbox_net else NetPolicy.default()

    @property
    def literal_paths(self) -> tuple[str, ...]:
        """Absolute paths written literally in the entry's arguments (a local script): read-only in
        the sandbox, shown in the consent's command line. Never a value: a value may be the agent's."""
        return tuple(a for a in self.spec.args if a.startswith("/") and not _TEMPLATE.search(a))

    @property
    def local(self) -> bool:
        """A process starts here (a stdio server, or a local package that serves HTTP)."""
        return bool(self.spec.command)

    def __repr__(self) -> str:
        return (
            f"ResolvedLaunch(transport={self.transport!r}, command={self.spec.command!r}, "
            f"values=<keys {sorted(self.values)}>, cwd={self.cwd!r})"
        )


@dataclass(frozen=True)
class Filled:
    """A spec's templates filled with plain values: what a process or a remote receives. Only the
    launch makes one from a :class:`ResolvedLaunch`; it is held in memory only, masked in ``repr``."""

    command: str | None
    args: list[str]
    env: dict[str, str]
    url: str | None
    headers: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"Filled(command={self.command!r}, args=<{len(self.args)} items>, env=<keys {sorted(self.env)}>, "
            f"url=<hidden>, headers=<keys {sorted(self.headers)}>)"
        )


def _missing(spec: LaunchSpec, given: set[str]) -> None:
    missing = spec.keys() - given
    if missing:
        names = ", ".join(sorted(missing))
        raise InvalidInput(f"No value was given for {names}; supply it in env_refs (secret) or env.")


def materialize(
    spec: LaunchSpec,
    values: Values,
    *,
    dirname: str | None = None,
    cwd: str | None = None,
) -> ResolvedLaunch:
    """``spec`` bound to ``values`` (plain or masked), its bundle dir ``dirname`` (MCPB) and its
    working dir ``cwd``; a template without a value is ``invalid_input`` here, before any start."""
    if dirname is None and spec.needs_install_dir:
        raise InvalidInput("This server needs its install directory, and none was given.")
    _missing(spec, set(values))
    return ResolvedLaunch(spec, dict(values), cwd, dirname if spec.needs_install_dir else None)


def fill(spec: LaunchSpec, values: Mapping[str, str], *, dirname: str | None = None) -> Filled:
    """Fill the spec's templates from plain ``values`` (a URL's values percent-encoded)."""
    scope = dict(values)
    if dirname is not None:
        scope["__dirname"] = dirname
    elif spec.needs_install_dir:
        raise InvalidInput("This server needs its install directory, and none was given.")
    _missing(spec, set(scope))
    unfilled: set[str] = set()
    return Filled(
        _fill(spec.command, scope, unfilled) if spec.command else None,
        [_fill(a, scope, unfilled) for a in spec.args],
        {k: _fill(v, scope, unfilled) for k, v in spec.env.items()},
        _fill(spec.url, scope, unfilled, in_url=True) if spec.url else None,
        {k: _fill(v, scope, unfilled) for k, v in spec.headers.items()},
    )
