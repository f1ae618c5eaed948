"""A lock file of installed servers: what ``mcp-setup export`` writes and
``mcp-setup apply`` reads, and the comparisons apply refuses a difference by.

The file is JSON (``"format": "mcp-setup-lock", "version": 1``), one entry per server::

    {"qualified_name": "io.github.acme/notes", "registry": "official", "version": "1.2.0",
     "package": {"type": "npm", "identifier": "@acme/notes-mcp"},
     "artifact": {"kind": "npm integrity", "digest": "sha512-…"},     # null digest: not recorded
     "launch": {…the launch spec: ${KEY} templates, never values…},
     "sandbox": {"grants": ["/home/me/notes"], "network": true},
     "tools": {"hash": "<sha256 of the pinned list>", "approved": {"search": "<sha256 of its definition>", …},
               "left_out": ["delete_note"]},                           # unticked by the user (optional)
     "secrets": ["ACME_TOKEN"],                                          # names only, never values
     "settings": {"ACME_URL": "https://notes.acme.example"},            # the non-secret values
     "enabled": true}

A server that came from no registry (imported from a client's config, or written by hand) is a
*launch-spec entry*: ``"registry": null`` and ``"source"`` saying where it came from
(``"import:claude-desktop"``); its ``launch`` is what runs, and ``package`` may be left out.
``apply`` tests and installs it from that launch. A file written before this (its ``registry``
holding such a source) reads the same way.

Reading never refuses the whole file for one entry: :func:`parse_lock` returns the entries it
can use and, for each one it cannot, a sentence naming it and what is wrong.

Secret values are never in it: secret slots are names, and ``settings`` holds only the values
stored as not secret. Everything here is pure (no store, no network): the faces read and write
the file, and compare what the registry and the server offer with it through these functions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from setup_agent.errors import LockFileInvalid, LockMismatch
from setup_agent.launch import LaunchSpec, digest_kind
from setup_agent.store import InstalledServer, canonical_json, tools_hash

__all__ = [
    "LOCK_FORMAT",
    "LOCK_VERSION",
    "REGISTRIES",
    "LockedServer",
    "ParsedLock",
    "check_digest",
    "check_launch",
    "check_tools",
    "differences",
    "lock_document",
    "locked_server",
    "parse_lock",
    "tool_hashes",
]

LOCK_FORMAT = "mcp-setup-lock"
LOCK_VERSION = 1
REGISTRIES = ("official", "smithery", "local")
_SANDBOX_FIELDS = ("sandbox_grants", "sandbox_network", "sandbox_net")
_MAX_SERVERS = 500
_NO_DIGEST = {
    "oci": "an image named by a tag has no digest in its registry entry",
    "remote": "a remote server has no artifact (its URL is in the launch)",
    "nuget": "NuGet packages are not digested by mcp-setup",
}


@dataclass(frozen=True)
class LockedServer:
    """One server of a lock file."""

    qualified_name: str
    registry: str | None  # None: a launch-spec entry (imported, hand-made), installed from ``launch``
    version: str | None
    package_type: str
    identifier: str
    digest: str | None
    launch: dict[str, Any]  # the launch spec without its sandbox fields (those are ``grants``, ``network``)
    grants: tuple[str, ...] = ()
    network: bool = True
    tools_hash: str | None = None
    tools: dict[str, str] = field(default_factory=dict)  # tool name -> sha256 of its pinned definition
    left_out: tuple[str, ...] = ()  # the tools the user unticked: apply leaves them out too
    secrets: tuple[str, ...] = ()
    settings: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    oauth: bool = False  # signs in with OAuth: apply cannot do that step for the user
    title: str | None = None
    digest_note: str | None = None
    #: Where a launch-spec entry came from (``import:claude-desktop``); None for a registry's.
    source: str | None = None

    @property
    def from_launch(self) -> bool:
        """Installed from its own launch spec, not looked up in a registry."""
        return self.registry is None

    def spec(self) -> LaunchSpec:
        """The launch spec as installed (sandbox fields included)."""
        sandbox = {"sandbox_grants": list(self.grants), "sandbox_network": self.network}
        return LaunchSpec.model_validate({**self.launch, **sandbox})

    def public(self) -> dict[str, Any]:
        artifact: dict[str, Any] = {"kind": digest_kind(self.package_type), "digest": self.digest}
        if self.digest is None:
            artifact["note"] = self.digest_note or _NO_DIGEST.get(self.package_type, "not recorded at install")
        package = {"type": self.package_type, **({"identifier": self.identifier} if self.identifier else {})}
        out: dict[str, Any] = {
            "qualified_name": self.qualified_name,
            "registry": self.registry,
            **({"source": self.source} if self.from_launch else {}),
            "version": self.version,
            "package": package,
            "artifact": artifact,
            "launch": self.launch,
            "sandbox": {"grants": list(self.grants), "network": self.network},
            "tools": {
                "hash": self.tools_hash,
                "approved": dict(sorted(self.tools.items())),
                **({"left_out": list(self.left_out)} if self.left_out else {}),
            },
            "secrets": list(self.secrets),
            "settings": dict(sorted(self.settings.items())),
            "enabled": self.enabled,
        }
        if self.title:
            out["title"] = self.title
        if self.oauth:
            out["oauth"] = True
        return out


def tool_hashes(tools: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{name: sha256 of the tool's canonical JSON}``."""
    return {
        str(t.get("name")): hashlib.sha256(canonical_json(dict(t)).encode("utf-8", "surrogatepass")).hexdigest()
        for t in tools
    }


def locked_server(
    server: InstalledServer,
    settings: Mapping[str, str],
    secrets: Sequence[str],
    *,
    oauth: bool,
    left_out: Sequence[str] = (),
) -> LockedServer:
    """The lock entry of an installed server; ``settings`` its non-secret values, ``secrets`` the
    names of its secret slots (both as the face chose to write them: see app/cli/lock_export.py)."""
    spec = dict(server.launch_spec)
    grants = tuple(str(p) for p in spec.get("sandbox_grants") or ())
    network = bool(spec.get("sandbox_network", True))
    launch = {k: v for k, v in spec.items() if k not in _SANDBOX_FIELDS}
    digest = server.artifact_digest
    note = None
    if digest is None and server.package_type == "mcpb" and spec.get("file_sha256"):
        digest = f"sha256:{str(spec['file_sha256']).lower()}"  # the launch spec records the bundle's sha256
    elif digest is None and server.package_type in ("npm", "pypi"):
        note = (
            "not recorded: installed before mcp-setup recorded digests; apply takes this exact version and records it"
        )
    pinned = server.pinned_tools
    registry = server.source if server.source in REGISTRIES else None  # else: a launch-spec entry
    return LockedServer(
        qualified_name=server.qualified_name,
        registry=registry,
        source=None if registry else server.source,
        version=server.version,
        package_type=server.package_type,
        identifier=str(spec.get("identifier") or ""),
        digest=digest,
        launch=launch,
        grants=grants,
        network=network,
        tools_hash=server.pinned_hash if pinned else None,
        tools=tool_hashes(pinned),
        left_out=tuple(sorted(n for n in set(left_out) if any(t.get("name") == n for t in pinned))),
        secrets=tuple(sorted(secrets)),
        settings=dict(settings),
        enabled=server.enabled,
        oauth=oauth,
        title=server.title,
        digest_note=note,
    )


def lock_document(entries: Sequence[LockedServer], *, exported_at: str, generator: str) -> dict[str, Any]:
    return {
        "format": LOCK_FORMAT,
        "version": LOCK_VERSION,
        "exported_at": exported_at,
        "generator": generator,
        "servers": [e.public() for e in entries],
    }


# -- reading --------------------------------------------------------------------------------


def _bad(where: str, what: str) -> LockFileInvalid:
    return LockFileInvalid(f"The lock file is not usable: {where}: {what}.")


def _unusable(where: str, what: str) -> LockFileInvalid:
    """One entry that cannot be used (the others still are)."""
    return LockFileInvalid(f"The lock file's {where} cannot be used: {what}; it was left out.")


@overload
def _str(obj: Mapping[str, Any], key: str, where: str) -> str: ...
@overload
def _str(obj: Mapping[str, Any], key: str, where: str, *, optional: bool) -> str | None: ...
def _str(obj: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > 2000:
        raise _unusable(where, f'"{key}" must be a non-empty string')
    return value


def _str_map(value: Any, where: str, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _unusable(where, f'"{key}" must be an object of strings')
    return dict(value)


@dataclass(frozen=True)
class ParsedLock:
    """What a lock file holds: the entries apply can use, and a sentence for each it cannot."""

    servers: list[LockedServer]
    problems: list[str] = field(default_factory=list)


def parse_lock(text: str) -> ParsedLock:
    """The servers of a lock file, and a sentence for each entry that cannot be used (the others
    still can); :class:`LockFileInvalid` naming what is wrong when the file as a whole is not one."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        line = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise LockFileInvalid(f"The lock file is not JSON{line}: was it written by `mcp-setup export`?") from None
    if not isinstance(doc, dict) or doc.get("format") != LOCK_FORMAT:
        raise LockFileInvalid(
            f'This is not an mcp-setup lock file (no "format": "{LOCK_FORMAT}"): write one with `mcp-setup export`.'
        )
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _bad("the top level", '"version" must be a whole number')
    if version > LOCK_VERSION:
        raise LockFileInvalid(
            f"The lock file is version {version}, newer than this mcp-setup reads (version {LOCK_VERSION}): "
            "update mcp-setup on this machine, or export the file again with this machine's version."
        )
    servers = doc.get("servers")
    if not isinstance(servers, list) or len(servers) > _MAX_SERVERS:
        raise _bad("the top level", f'"servers" must be a list of at most {_MAX_SERVERS} servers')
    out: list[LockedServer] = []
    problems: list[str] = []
    for i, item in enumerate(servers, 1):
        try:
            entry = _entry(item, i)
        except LockFileInvalid as exc:
            problems.append(exc.message)
            continue
        if any(e.qualified_name == entry.qualified_name for e in out):
            problems.append(f"The lock file lists {entry.qualified_name} twice: server {i} was left out.")
            continue
        out.append(entry)
    return ParsedLock(out, problems)


def _entry(item: Any, n: int) -> LockedServer:
    where = f"server {n}"
    if not isinstance(item, dict):
        raise _unusable(where, "must be an object")
    name = _str(item, "qualified_name", where)
    where = f"server {n} ({name})"
    registry = _str(item, "registry", where, optional=True)
    source = _str(item, "source", where, optional=True)
    if registry is not None and registry not in REGISTRIES and ":" in registry:
        registry, source = None, registry  # written before launch-spec entries had a "source" of their own
    if registry is not None and registry not in REGISTRIES:
        raise LockFileInvalid(
            f"The lock file names an unknown registry for {name}: {registry!r} "
            f"(mcp-setup knows {', '.join(REGISTRIES)}); it was left out."
        )
    if registry is None:
        source = source or "hand-made"
    package = item.get("package")
    if package is None and registry is None:
        package = {"type": "stdio"}
    if not isinstance(package, dict):
        raise _unusable(where, '"package" must be an object')
    artifact = item.get("artifact") or {}
    if not isinstance(artifact, dict):
        raise _unusable(where, '"artifact" must be an object')
    launch = item.get("launch")
    if not isinstance(launch, dict):
        raise _unusable(where, '"launch" must be an object')
    launch = {k: v for k, v in launch.items() if k not in _SANDBOX_FIELDS}
    sandbox = item.get("sandbox") or {}
    grants = sandbox.get("grants", []) if isinstance(sandbox, dict) else None
    network = sandbox.get("network", True) if isinstance(sandbox, dict) else None
    if not isinstance(grants, list) or not all(isinstance(g, str) for g in grants) or not isinstance(network, bool):
        raise _unusable(where, '"sandbox" must be {"grants": [folders], "network": true|false}')
    try:
        LaunchSpec.model_validate({**launch, "sandbox_grants": grants, "sandbox_network": network})
    except ValueError:
        raise _unusable(where, '"launch" is not a launch spec mcp-setup can run') from None
    tools = item.get("tools") or {}
    if not isinstance(tools, dict):
        raise _unusable(where, '"tools" must be an object')
    left_out = tools.get("left_out") or []
    if not isinstance(left_out, list) or not all(isinstance(n, str) and n for n in left_out):
        raise _unusable(where, '"tools.left_out" must be a list of tool names')
    secrets = item.get("secrets") or []
    if not isinstance(secrets, list) or not all(isinstance(s, str) and s for s in secrets):
        raise _unusable(where, '"secrets" must be a list of setting names')
    enabled = item.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _unusable(where, '"enabled" must be true or false')
    return LockedServer(
        qualified_name=name,
        registry=registry,
        version=_str(item, "version", where, optional=True),
        package_type=_str(package, "type", where) or "",
        identifier=_str(package, "identifier", where, optional=registry is None) or "",
        digest=_str(artifact, "digest", where, optional=True),
        launch=launch,
        grants=tuple(grants),
        network=network,
        tools_hash=_str(tools, "hash", where, optional=True),
        tools=_str_map(tools.get("approved"), where, "tools.approved"),
        left_out=tuple(sorted(set(left_out))),
        secrets=tuple(secrets),
        settings=_str_map(item.get("settings"), where, "settings"),
        enabled=enabled,
        oauth=item.get("oauth") is True,
        title=_str(item, "title", where, optional=True),
        source=source,
    )


# -- comparisons ------------------------------------------------------------------------------


def check_digest(locked: LockedServer, found: str | None) -> None:
    """Refuse an artifact whose digest differs from the file's (a file without one accepts any)."""
    if locked.digest is not None and found != locked.digest:
        raise LockMismatch(
            f"{locked.qualified_name} {locked.version}: the artifact differs from the lock file: expected "
            f"{digest_kind(locked.package_type)} {locked.digest}, found {found or 'none'} in the registry "
            f"{locked.registry}. Nothing of it was run.",
            details={"expected": locked.digest, "found": found},
        )


def check_launch(locked: LockedServer, spec: LaunchSpec) -> None:
    """Refuse a launch (before the user's sandbox choice) that differs from the file's."""
    found, expected = _normal(spec.model_dump(mode="json")), _normal(locked.launch)
    fields = sorted(k for k in set(found) | set(expected) if found.get(k) != expected.get(k))
    if fields:
        parts = [f"{k}: expected {json.dumps(expected.get(k))}, found {json.dumps(found.get(k))}" for k in fields[:6]]
        raise LockMismatch(
            f"{locked.qualified_name}: the launch differs from the lock file ({'; '.join(parts)}). "
            "Nothing of it was run.",
            details={"fields": fields},
        )


def check_tools(locked: LockedServer, tools: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a tool list that differs from the file's approved one, naming the tools that differ."""
    if locked.tools_hash is None:
        return
    found = tools_hash(tools)
    if found == locked.tools_hash:
        return
    now = tool_hashes(tools)
    added = sorted(set(now) - set(locked.tools))
    removed = sorted(set(locked.tools) - set(now))
    changed = sorted(n for n in set(now) & set(locked.tools) if now[n] != locked.tools[n])
    parts = [
        f"{word}: {', '.join(names[:20])}"
        for word, names in (("added", added), ("removed", removed), ("changed", changed))
        if names
    ]
    raise LockMismatch(
        f"{locked.qualified_name}: the tool list differs from the lock file ({'; '.join(parts) or 'order or form'}; "
        f"expected tools hash {locked.tools_hash}, found {found}). It was not installed.",
        details={"added": added, "removed": removed, "changed": changed},
    )


def _normal(launch: Mapping[str, Any]) -> dict[str, Any]:
    spec = LaunchSpec.model_validate({k: v for k, v in launch.items() if k not in _SANDBOX_FIELDS})
    return {k: v for k, v in spec.model_dump(mode="json").items() if k not in _SANDBOX_FIELDS}


def differences(locked: LockedServer, here: LockedServer) -> list[str]:
    """How the entry of an installed server (``here``) differs from the file's; empty: installed identically."""
    out = []
    if here.version != locked.version:
        out.append(f"version {here.version} here, {locked.version} in the file")
    if locked.digest and here.digest and here.digest != locked.digest:
        out.append(f"artifact {here.digest} here, {locked.digest} in the file")
    if _normal(here.launch) != _normal(locked.launch) or (here.grants, here.network) != (locked.grants, locked.network):
        out.append("another launch or sandbox")
    if locked.tools_hash and here.tools_hash != locked.tools_hash:
        out.append("another approved tool list")
    if set(here.left_out) != set(locked.left_out):
        out.append("other tools left out")
    if set(here.secrets) != set(locked.secrets):
        out.append("other secret settings")
    names = set(here.settings) | set(locked.settings)
    changed = sorted(k for k in names if here.settings.get(k) != locked.settings.get(k))
    if changed:
        out.append(f"other values of {', '.join(changed)}")
    return out
