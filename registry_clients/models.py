"""The normalized model every source (official registry, Smithery, local catalog) maps to.

The tools in the core never branch on the source: they see :class:`Summary`,
:class:`Detail`, :class:`PackageOption` and :class:`RequiredKey` only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Argument",
    "Detail",
    "PackageOption",
    "PackageType",
    "RequiredKey",
    "SearchPage",
    "SourceError",
    "Summary",
    "TransportType",
]

PackageType = Literal["npm", "pypi", "oci", "nuget", "mcpb", "remote"]
TransportType = Literal["stdio", "streamable-http", "sse"]
KeyKind = Literal["env", "header", "url_variable", "argument", "user_config"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=False)


class RequiredKey(_Model):
    """A value the user (or agent) must supply before the server can run.

    ``name`` is what ``env_refs`` / ``env`` are keyed by. ``secret`` keys must come as refs.
    ``in_argv`` marks a secret that the package wants on its command line, where other
    local users can see it (``ps``).
    """

    name: str
    description: str = ""
    secret: bool = False
    required: bool = True
    default: str | None = None
    choices: list[str] | None = None
    kind: KeyKind = "env"
    in_argv: bool = False
    format: str | None = None
    placeholder: str | None = None
    secret_guessed: bool = False  # secret by the name rule, not by the publisher's isSecret
    note: str | None = None  # a warning about this key (e.g. a placeholder left in a fixed value)
    off_unless_set: bool = False  # an optional argument: its default is shown, never applied
    aliases: list[str] = Field(default_factory=list)  # other names install accepts for this key
    # A value mcp-setup itself holds ("smithery": the configured Smithery API key); not in public().
    provided_by: str | None = None

    def public(self) -> dict[str, Any]:
        """The tool-facing shape: ``{name, description, secret, required, default?}`` plus extras."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "secret": self.secret,
            "required": self.required,
        }
        if self.default is not None:
            out["default"] = self.default
        if self.choices:
            out["choices"] = list(self.choices)
        if self.format:
            out["format"] = self.format
        if self.placeholder:
            out["placeholder"] = self.placeholder
        if self.kind != "env":
            out["kind"] = self.kind
        if self.secret and self.secret_guessed:
            out["secret_guessed"] = True
        if self.aliases:
            out["aliases"] = list(self.aliases)
        warnings = [self.note] if self.note else []
        if self.in_argv:
            warnings.append("passed on the command line, where other local users can see it")
        if warnings:
            out["warning"] = "; ".join(warnings)
        return out


class Argument(_Model):
    """A runtime or package argument, as in the official server.json (``positional`` / ``named``).

    ``value`` may hold ``{var}`` placeholders naming entries of ``variables`` (official
    format). ``key`` is the RequiredKey name that feeds this argument when the argument's
    value itself comes from the user (no fixed ``value``).
    """

    type: Literal["positional", "named"] = "positional"
    name: str | None = None
    value: str | None = None
    value_hint: str | None = None
    default: str | None = None
    required: bool = False
    secret: bool = False
    repeated: bool = False
    description: str = ""
    key: str | None = None
    flag: bool = False  # a named argument without a value: present (bare) only when its key is "true"


class PackageOption(_Model):
    """One way to run a server: a package for a runner, an MCPB bundle, or a remote URL.

    ``id`` is stable within its Detail (``"npm"``, ``"oci"``, ``"remote"``, and a ``:N``
    suffix when a type occurs more than once); the tools' ``package`` argument takes it,
    or the bare type.
    """

    id: str
    type: PackageType
    identifier: str
    version: str | None = None
    file_sha256: str | None = None
    registry_base_url: str | None = None
    runtime_hint: str | None = None
    transport: TransportType = "stdio"
    url: str | None = None  # remotes, and streamable-http/sse packages
    headers: dict[str, str] = Field(default_factory=dict)  # values may hold {var}
    runtime_arguments: list[Argument] = Field(default_factory=list)
    package_arguments: list[Argument] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # env var name -> "{KEY}" template or fixed value
    required_keys: list[RequiredKey] = Field(default_factory=list)


class Summary(_Model):
    qualified_name: str
    display_name: str
    description: str = ""
    version: str | None = None
    source: str  # "official", "smithery", "local"
    package_types: list[str] = Field(default_factory=list)
    remote: bool = False
    verified: bool | None = None
    homepage: str | None = None
    status: str | None = None  # registry status when not "active": "deprecated", "deleted"
    # Keys the easiest way to run it asks for (the package needing the fewest required keys);
    # None when the source's search result does not say (Smithery).
    key_count: int | None = None
    secret_key_count: int | None = None

    def public(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Detail(Summary):
    packages: list[PackageOption] = Field(default_factory=list)
    repository_url: str | None = None
    is_latest: bool | None = None
    published_at: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    def summary(self) -> Summary:
        out = Summary(**{k: getattr(self, k) for k in Summary.model_fields})
        if out.key_count is None and self.packages:
            needed = min(
                ([k for k in pkg.required_keys if k.required] for pkg in self.packages), key=len
            )  # the first package wins a tie
            out.key_count = len(needed)
            out.secret_key_count = sum(1 for k in needed if k.secret)
        return out

    def required_keys(self, package_id: str | None = None) -> list[RequiredKey]:
        """Keys for one package, or the union over all packages (first description wins)."""
        seen: dict[str, RequiredKey] = {}
        for pkg in self.packages:
            if package_id is not None and pkg.id != package_id:
                continue
            for key in pkg.required_keys:
                seen.setdefault(key.name, key)
        return list(seen.values())


class SourceError(_Model):
    source: str
    message: str


class SearchPage(_Model):
    servers: list[Summary] = Field(default_factory=list)
    total_pages: int = 0
    errors: list[SourceError] = Field(default_factory=list)
    # The query with its typos corrected, when a word of it matched nothing as typed
    # (registry_clients.ranking.Ranked.did_you_mean): only words of the registries' own text.
    did_you_mean: list[str] = Field(default_factory=list)
