"""Launch specs: from a registry package to what to run.

A :class:`LaunchSpec` is what gets persisted for an installed server, so it holds no secret:
values arrive at spawn time through :func:`materialize`. Templates use ``${NAME}`` for a
user-supplied key and ``${__dirname}`` for the server's install dir (MCPB); ``$$`` is a
literal ``$``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

from setup_agent.errors import InvalidInput

__all__ = ["LaunchSpec", "ResolvedLaunch", "materialize", "template_keys"]

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
    """A spec with every value filled in: only ever held in memory, masked in ``repr``."""

    transport: str
    command: str | None
    args: list[str]
    env: dict[str, str]
    url: str | None
    headers: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    grants: tuple[str, ...] = ()
    network: bool = True
    bundle_dir: str | None = None  # an MCPB's unpacked bundle (``${__dirname}``): its own, like cwd
    #: Absolute paths written literally in the entry's arguments (a local script): read-only in the
    #: sandbox, shown in the consent's command line. Never a value: a value may be the agent's.
    literal_paths: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"ResolvedLaunch(transport={self.transport!r}, command={self.command!r}, "
            f"args=<{len(self.args)} items>, env=<keys {sorted(self.env)}>, url=<hidden>, "
            f"headers=<keys {sorted(self.headers)}>)"
        )


def materialize(
    spec: LaunchSpec,
    values: Mapping[str, str],
    *,
    dirname: str | None = None,
    cwd: str | None = None,
) -> ResolvedLaunch:
    """Fill the spec's templates from ``values`` (revealed secrets and plain values)."""
    scope = dict(values)
    if dirname is not None:
        scope["__dirname"] = dirname
    elif spec.needs_install_dir:
        raise InvalidInput("This server needs its install directory, and none was given.")
    missing: set[str] = set()
    command = _fill(spec.command, scope, missing) if spec.command else None
    args = [_fill(a, scope, missing) for a in spec.args]
    env = {k: _fill(v, scope, missing) for k, v in spec.env.items()}
    url = _fill(spec.url, scope, missing, in_url=True) if spec.url else None
    headers = {k: _fill(v, scope, missing) for k, v in spec.headers.items()}
    if missing:
        names = ", ".join(sorted(missing))
        raise InvalidInput(f"No value was given for {names}; supply it in env_refs (secret) or env.")
    return ResolvedLaunch(
        spec.transport,
        command,
        args,
        env,
        url,
        headers,
        cwd,
        tuple(spec.sandbox_grants),
        spec.sandbox_network,
        dirname if spec.needs_install_dir else None,
        tuple(a for a in spec.args if a.startswith("/") and not _TEMPLATE.search(a)),
    )
