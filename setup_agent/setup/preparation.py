"""What a test, install or sign-in runs, worked out from its typed request before anything
runs (:class:`Preparer`): the registry entry (refused when installed, deprecated or not
admitted), the package chosen for this machine, its keys (an MCPB bundle's own from its
manifest), the values (refs resolved, aliases filled; a secret stays a masked
:class:`~setup_agent.secrets.SecretValue` until the launch), the launch spec (secrets moved off
the command line where they can be) and an OAuth sign-in. The result is a :class:`Prepared`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from registry_clients.hub import RegistryHub
from registry_clients.models import Detail, PackageOption, RequiredKey
from registry_clients.required_keys import smithery_hosted
from setup_agent.errors import AlreadyInstalled, ArgvSecret, DeprecatedEntry, InvalidInput, SecretNotAllowed, SetupError
from setup_agent.launch import (
    DEFAULT_PREFERENCE,
    LaunchSpec,
    Value,
    Values,
    apply_repair,
    argv_secret_keys,
    build_spec,
    choose_package,
    granted_paths,
    materialize,
    move_argv_secrets,
    remote_endpoint,
    required_keys_from_manifest,
    runner_which,
    spec_from_manifest,
    unset_keys,
)
from setup_agent.oauth import GrantAuth, SignIns
from setup_agent.secrets import SecretRefStore, SecretValue
from setup_agent.store import Store
from setup_agent.translation import translate

from .bundle_manifests import BundleManifests
from .call_context import CallContext, Progress
from .consent import ConsentWarning
from .tool_args import scrub
from .tool_requests import LaunchRequest

__all__ = ["ALLOW_ARGV_SECRET", "Prepared", "Preparer"]


#: How a person allows a launch that puts a secret on the command line while consent is off.
ALLOW_ARGV_SECRET = (
    "To allow it, the user turns consent on (MCP_SETUP_CONSENT=ask, the default) and approves "
    "this server's warning when asked: on the mcp-setup page, or with `mcp-setup approve` in a terminal."
)


@dataclass
class Prepared:
    detail: Detail
    package: PackageOption
    spec: LaunchSpec
    keys: list[RequiredKey]
    #: Every setting's value: plain where the agent or the user gave it in clear (``env``, a
    #: default, a destination edited at consent), masked where it is a secret (a ref's, one
    #: mcp-setup provides): the launch alone reveals those.
    values: dict[str, Value]
    bundle_dir: Path | None
    auth: GrantAuth | None = None  # an OAuth sign-in (oauth_ref)
    #: Secret keys the launch still puts on the command line (visible in ``ps``): the warning
    #: a consent step shows; empty when none, or when they were moved into the environment.
    argv_secret_keys: list[str] = field(default_factory=list)
    #: The repair code applied to the launch (a known failure's fix), or None.
    repair: str | None = None
    #: Files of the person's home its command line names that nobody let it read (consent off):
    #: the sandbox keeps them from it, and the result says how the person can grant them.
    kept_home_files: list[str] = field(default_factory=list)
    #: Secret keys whose prompt the person has not answered yet: the consent is asked first (it
    #: shows what will run with them), then the call stops with ``secret_pending`` until they have.
    #: Their values here are blank placeholders, never launched.
    unanswered: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"Prepared(server={self.detail.qualified_name!r}, package={self.package.id!r}, "
            f"values=<keys {sorted(self.values)}>, auth={'yes' if self.auth is not None else 'no'})"
        )

    def plain_values(self) -> dict[str, str]:
        """The values given in clear (what a consent may show); a secret's is left out."""
        return {k: v for k, v in self.values.items() if isinstance(v, str)}

    def warnings(self) -> list[ConsentWarning]:
        """What the consent step must show and the user accept explicitly."""
        out = []
        if self.repair is not None:
            command = " ".join([self.spec.command or "", *self.spec.args]).strip()
            out.append(
                ConsentWarning(
                    "repaired_launch",
                    f"mcp-setup changed how this server is started, to repair a known failure ({self.repair}): "
                    f"it runs {command}",
                )
            )
        if not self.argv_secret_keys:
            return out
        keys = ", ".join(self.argv_secret_keys)
        return [
            *out,
            ConsentWarning(
                "argv_secret",
                f"This server takes {keys} on its command line, where other users of this computer can see it "
                "(for example with ps) while it runs.",
            ),
        ]

    def refuse_argv_secrets(self, ctx: CallContext, *, consented: bool = False) -> None:
        if self.argv_secret_keys and not (ctx.allow_argv_secret or consented):
            keys = ", ".join(self.argv_secret_keys)
            # Only reached with consent turned off (an approval would have shown the warning).
            raise ArgvSecret(
                f"This server takes {keys} on its command line, where other local users can see it, and "
                "it cannot be moved into the environment. It runs only if the user consents to that, and "
                f"consent is turned off here. {ALLOW_ARGV_SECRET}",
                details={"keys": list(self.argv_secret_keys), "allow": ALLOW_ARGV_SECRET},
            )


@dataclass(kw_only=True, eq=False)
class Preparer:
    """Turns a test's, install's or sign-in's arguments into a :class:`Prepared` launch."""

    refs: SecretRefStore
    hub: RegistryHub
    store: Store
    manifests: BundleManifests
    package_preference: tuple[str, ...] = DEFAULT_PREFERENCE
    which: Callable[[str], str | None] = runner_which
    user_home: Path | None = None
    oauth: SignIns | None = None
    #: Admission (setup_agent/setup/providers.py): ``admit(qualified_name, repository_url)`` raises
    #: ``not_admitted`` for a server that may not be tested or installed; None admits all.
    admit: Callable[[str, str | None], None] | None = None
    #: Values mcp-setup itself holds, by ``RequiredKey.provided_by`` (``{"smithery": key}``): a key
    #: provided so is filled in unless the user gave one, and never requested.
    provided_values: Mapping[str, str] = field(default_factory=dict)

    async def detail(self, name: str, source: str | None, version: str | None = None) -> Detail:
        try:  # a version is asked for only when given (``mcp-setup update --version``)
            return await self.hub.get(name, source=source, version=version or None)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        except Exception as exc:  # upstream text may reflect the name: keep only our own words
            err = translate(exc)
            if type(err) is SetupError:
                raise
            err.message = scrub(err.message, name)
            raise err from None

    async def prepare(
        self,
        request: LaunchRequest,
        workdir: Path,
        progress: Progress,
        *,
        oauth_ref: str | None = None,
        lazy_bundle: bool = False,
        replacing: str | None = None,
    ) -> Prepared:
        """``oauth_ref``: a sign-in to use (a test's or install's; a sign-in itself has none)."""
        name = request.qualified_name
        await self.refuse_installed(name, replacing)  # before any download, prompt or spawn
        await progress("resolving", "started")
        detail = await self.detail(name, request.source, request.version)
        if detail.qualified_name != name:
            await self.refuse_installed(detail.qualified_name, replacing)
        if detail.status == "deleted":  # allow_deprecated unlocks deprecated entries, never deleted ones
            raise DeprecatedEntry(
                f"The registry marks {detail.qualified_name} deleted (withdrawn by its publisher or the "
                "registry), so it cannot be installed. Pick another server.",
                details={"status": detail.status},
            )
        if detail.status and not request.allow_deprecated:
            raise DeprecatedEntry(
                f"The registry marks {detail.qualified_name} {detail.status}. Pick another server, or pass "
                "allow_deprecated: true if the user wants it anyway.",
                details={"status": detail.status},
            )
        if self.admit is not None:  # before any download, prompt or spawn
            self.admit(detail.qualified_name, detail.repository_url)
        package = choose_package(detail.packages, request.package, preference=self.package_preference, which=self.which)
        keys = list(package.required_keys)
        bundle_dir: Path | None = None
        manifest = None
        await progress("resolving", "done", package=package.id)
        if package.type == "mcpb":
            manifest = self.manifests.known(package) if lazy_bundle and package.file_sha256 else None
            if manifest is None:  # lazy: a bundle already checked is fetched only if no tested process is adopted
                bundle_dir, manifest = await self.manifests.fetch(
                    package, workdir, progress, allow_file=detail.source == "local"
                )
            keys = required_keys_from_manifest(manifest, keys, home=self.user_home)
        unanswered = self.refs.unanswered(request.env_refs)  # asked after the consent, which shows what runs
        values = self.values(
            keys, request.env_refs, request.env, fill=self.fillable(package, keys), unanswered=unanswered
        )
        # Optional settings left unset (and flags set false): their inputs are left out entirely.
        omit = unset_keys(keys, values)
        spec = build_spec(package, omit=omit)
        if manifest is not None:
            spec = spec_from_manifest(manifest, spec, home=self.user_home, omit=omit)
        secret = {k.name for k in keys if k.secret}
        spec = move_argv_secrets(spec, secret)
        # The paths the user's settings name (a directory, a file): the sandbox's widening, in the consent.
        spec = spec.model_copy(update={"sandbox_grants": granted_paths(keys, values, spec.args)})
        repair = request.repair  # a known failure's repaired launch, shown at consent
        if repair is not None:
            spec = apply_repair(spec, repair)
        self.refuse_foreign_destination(keys, values, spec)
        auth = None
        if oauth_ref is not None:
            if self.oauth is None:
                raise InvalidInput("OAuth sign-in is not available in this mcp-setup.")
            auth = self.oauth.auth_for_ref(oauth_ref, detail.qualified_name, self.remote_url(spec, values))
        return Prepared(
            detail,
            package,
            spec,
            keys,
            values,
            bundle_dir,
            auth=auth,
            argv_secret_keys=argv_secret_keys(spec, secret),
            repair=repair,
            unanswered=sorted(unanswered),
        )

    def fillable(self, package: PackageOption, keys: list[RequiredKey]) -> set[str]:
        """The keys mcp-setup fills in itself for ``package``: a value it holds (the Smithery API
        key) whose only use is the remote's ``Authorization: Bearer`` header. A server that also
        puts it anywhere else (its URL, another header, a setting passed on to the server) is
        asked for it like for any other key."""
        wanted = [k for k in keys if k.provided_by in self.provided_values]
        if not wanted or package.type != "remote":
            return set()
        try:
            spec = build_spec(package)
        except SetupError:
            return set()
        return {key.name for key in wanted if _bearer_only(spec, key)}

    def values(
        self,
        keys: list[RequiredKey],
        env_refs: dict[str, str],
        env: dict[str, str],
        *,
        fill: Collection[str] = (),
        unanswered: Collection[str] = (),
    ) -> dict[str, Value]:
        """The launch's values: the agent's plain ``env``, its refs resolved to masked values,
        mcp-setup's own for ``fill``, each under every alias of its key. A ref of ``unanswered``
        (its prompt not answered yet) counts as given, with a blank placeholder."""
        by_name = {k.name: k for k in keys}
        canonical = {k.name: k.name for k in keys} | {a: k.name for k in keys for a in k.aliases}
        unknown = sorted((set(env_refs) | set(env)) - set(canonical))
        if unknown:
            known = ", ".join(sorted(by_name)) or "none"
            # Never the unknown names themselves: what matched nothing is the agent's guess.
            raise InvalidInput(
                f"{len(unknown)} name{'s' if len(unknown) > 1 else ''} in env/env_refs {'are' if len(unknown) > 1 else 'is'} "
                f"not a setting of this server (its settings: {known})."
            )
        for key in env:
            if by_name[canonical[key]].secret:
                raise SecretNotAllowed(
                    f"{key} is a secret: pass it in env_refs as a ref from mcp_setup_request_secret, never in env.",
                    key=key,
                )
        both = set(env) & set(env_refs)
        if both:
            raise InvalidInput(f"{', '.join(sorted(both))} given both in env and env_refs; give each once.")
        given: dict[str, str] = {}
        for key in [*env, *env_refs]:
            if canonical[key] in given:
                raise InvalidInput(
                    f"{given[canonical[key]]} and {key} name the same setting; give it once, under either name."
                )
            given[canonical[key]] = key
        provided = {
            k.name: SecretValue(self.provided_values[k.provided_by])
            for k in keys
            if k.name in fill
            and k.provided_by is not None
            and k.provided_by in self.provided_values
            and k.name not in given
        }
        missing = [
            k for k in keys if k.required and k.default is None and k.name not in given and k.name not in provided
        ]
        if missing:
            parts = [
                f"{k.name} (secret: request it with mcp_setup_request_secret)" if k.secret else k.name for k in missing
            ]
            raise InvalidInput(
                f"Missing required settings: {', '.join(parts)}.", details={"missing": [k.name for k in missing]}
            )
        resolved = self.refs.resolve({k: r for k, r in env_refs.items() if k not in unanswered})
        resolved.update({k: SecretValue("") for k in env_refs if k in unanswered})
        # An optional argument's default is the server's own: it is shown, never passed.
        values: dict[str, Value] = {k.name: k.default for k in keys if k.default is not None and not k.off_unless_set}
        values.update({canonical[k]: v for k, v in env.items()})
        values.update({canonical[k]: v for k, v in resolved.items()})
        values.update(provided)
        for setting in keys:  # one value, every name: the bundle's templates use the alias
            if setting.name in values:
                values.update(dict.fromkeys(setting.aliases, values[setting.name]))
        return values

    def refuse_foreign_destination(self, keys: list[RequiredKey], values: Values, spec: LaunchSpec) -> None:
        """A value mcp-setup holds (the Smithery API key) goes only to its own service's hosts,
        whatever the URL's variables were set to."""
        filled = [
            k
            for k in keys
            if k.provided_by is not None
            and k.provided_by in self.provided_values
            and _same(values.get(k.name), SecretValue(self.provided_values[k.provided_by]))
        ]
        if not filled:
            return
        if not all(_bearer_only(spec, k) for k in filled):  # an update may bring a launch that uses it elsewhere
            raise InvalidInput(
                "This server would receive mcp-setup's Smithery API key somewhere else than as its sign-in "
                "token, so it is not sent. Ask the user for the key this server needs."
            )
        url = self.remote_url(spec, values) if spec.transport != "stdio" else None
        if url is None or not smithery_hosted(url):
            raise InvalidInput(
                "This server's address is not on smithery.ai, and mcp-setup sends the Smithery API key only to "
                "Smithery. Set its address back to its smithery.ai one."
            )

    async def refuse_installed(self, name: str, replacing: str | None = None) -> None:
        """Refuse a name already installed (but the server an update replaces: ``replacing``)."""
        existing = await asyncio.to_thread(self.store.servers.get_by_name, name)
        if existing is not None and existing.server_id != replacing:
            raise AlreadyInstalled(
                f"{existing.qualified_name} is already installed (server_id {existing.server_id}). "
                "Remove it with mcp_setup_remove first to install it again.",
                details={"server_id": existing.server_id},
            )

    @staticmethod
    def remote_url(spec: LaunchSpec, values: Values) -> str:
        """The address a remote is reached at, as the launch fills it in (``remote_endpoint``): a
        sign-in is made for it, and mcp-setup's own key goes only to its service's hosts."""
        if spec.transport == "stdio":
            raise InvalidInput(
                "Only remote servers (streamable HTTP or SSE) sign in with OAuth; choose its remote package."
            )
        return remote_endpoint(materialize(spec, values)).url


def _same(given: Value | None, own: SecretValue) -> bool:
    """Is ``given`` (masked or plain) mcp-setup's own value ``own``? Compared in constant time, unread."""
    return (SecretValue(given) if isinstance(given, str) else given) == own


def _bearer_only(spec: LaunchSpec, key: RequiredKey) -> bool:
    """Is ``key`` used by ``spec`` only as its one ``Authorization: Bearer ${key}`` header?"""
    auth = [v for h, v in spec.headers.items() if h.lower() == "authorization"]
    elsewhere = [
        spec.url or "",
        spec.command or "",
        *spec.args,
        *spec.env.values(),
        *(v for h, v in spec.headers.items() if h.lower() != "authorization"),
    ]
    names = [key.name, *key.aliases]
    return auth == ["Bearer ${" + key.name + "}"] and not any(
        "${" + n + "}" in text for n in names for text in elsewhere
    )
