"""The ``mcp_setup_*`` tools: search, get, request a secret, test, install, list, remove, authorize.

:meth:`SetupService.call` is where a tool call enters the core: the raw arguments are bounded and
shown to the guard, then parsed once into the tool's model (``tool_requests.py``); each handler
takes that typed request and returns its JSON result. Errors the agent can act on are
:class:`~setup_agent.errors.SetupError`; ``call`` turns them into tool results
``{"ok": false, "error": {code, message}}``. Every result and error passes the redactor on the
way out. Calls are logged with key names only.

This is the façade every face calls; the steps live in their own modules: the size bounds and
the no-echo rule (``tool_args.py``), the call's context and progress (``call_context.py``),
what a launch needs (``preparation.py``), test and install (``installer.py``), MCPB manifests
(``bundle_manifests.py``) and prefetch (``prefetch.py``).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from registry_clients.hub import RegistryHub
from registry_clients.models import PackageOption, RequiredKey
from setup_agent.errors import InvalidInput, NotFound, SetupError
from setup_agent.gateway import ConnectionManager, ToolsBudget
from setup_agent.launch import (
    DEFAULT_PREFERENCE,
    ArtifactDigests,
    BundleCache,
    Fetcher,
    Prefetches,
    choose_package,
    describe_packages,
    make_scratch_dir,
    network_state,
    required_keys_from_manifest,
    runner_which,
)
from setup_agent.oauth import GRANT_KEY, SignIns
from setup_agent.secrets import GuessGuard, PromptBroker, Redactor, SecretRefStore
from setup_agent.store import Store, context_cost
from setup_agent.translation import translate

from .bundle_manifests import BundleManifests
from .call_context import CallContext, Progress
from .consent import ConsentBroker
from .installer import Installer
from .preparation import Preparer
from .probe import Prober
from .search_cards import with_runtime_verdict
from .tool_args import check_bounds, describe_args, scrubbed, without_echo
from .tool_requests import (
    AuthorizeRequest,
    GetRequest,
    InstallRequest,
    ListRequest,
    RemoveRequest,
    SearchRequest,
    SecretRequest,
    TestRequest,
)
from .tool_specs import TOOL_NAMES, TOOL_REQUESTS

if TYPE_CHECKING:
    import httpx

__all__ = ["CallContext", "SetupService", "TOOL_NAMES"]

logger = logging.getLogger(__name__)


class SetupService:
    def __init__(
        self,
        *,
        refs: SecretRefStore,
        redactor: Redactor,
        broker: PromptBroker,
        hub: RegistryHub,
        store: Store,
        prober: Prober,
        connections: ConnectionManager,
        package_preference: tuple[str, ...] = DEFAULT_PREFERENCE,
        which: Callable[[str], str | None] = runner_which,
        http: httpx.AsyncClient | None = None,
        scratch_root: Path | None = None,
        user_home: Path | None = None,
        consents: ConsentBroker | None = None,
        oauth: SignIns | None = None,
        admit: Callable[[str, str | None], None] | None = None,
        fetcher: Fetcher | None = None,
        bundle_cache: BundleCache | None = None,
        provided_values: Mapping[str, str] | None = None,
        guard: GuessGuard | None = None,
        budget: ToolsBudget | None = None,
    ) -> None:
        self.refs = refs
        #: Refuses (and counts) a call whose arguments hold a protected value: a
        #: server that reflects a setting would otherwise answer a guess through the redactor.
        self.guard = guard
        #: MCPB bundles by sha256 (setup_agent/launch/bundle_cache.py): prefetched, and reused by test/install.
        self.bundle_cache = bundle_cache
        self.fetcher = fetcher  # None: no download phase (the probe's deadline covers the download)
        self.redactor = redactor
        self.broker = broker
        self.hub = hub
        self.store = store
        self.prober = prober
        self.connections = connections
        self.package_preference = package_preference
        self.which = which
        self.http = http
        self.scratch_root = scratch_root
        self.user_home = user_home
        self.consents = consents  # None: no consent step (a core used without a face)
        self.oauth = oauth
        self.admit = admit  # admission (setup_agent/setup/providers.py), checked by the Preparer
        self.manifests = BundleManifests(
            bundle_cache=bundle_cache, http=http, scratch_root=scratch_root, user_home=user_home
        )
        self.prefetches = Prefetches(
            hub=hub,
            store=store,
            fetcher=fetcher,
            bundle_cache=bundle_cache,
            package_preference=package_preference,
            which=which,
        )
        self.preparer = Preparer(
            refs=refs,
            hub=hub,
            store=store,
            manifests=self.manifests,
            package_preference=package_preference,
            which=which,
            user_home=user_home,
            oauth=oauth,
            admit=admit,
            provided_values=dict(provided_values or {}),
        )
        self.installer = Installer(
            refs=refs,
            redactor=redactor,
            store=store,
            prober=prober,
            connections=connections,
            preparer=self.preparer,
            manifests=self.manifests,
            consents=consents,
            fetcher=fetcher,
            scratch_root=scratch_root,
            digests=ArtifactDigests(http) if http is not None else None,
            budget=budget,
        )

    # -- dispatch ---------------------------------------------------------------------
    async def call(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext | None = None) -> dict:
        """Run tool ``name``: ``{"ok": true, …}``, or ``{"ok": false, "error": …}`` for a SetupError.

        Unknown tool names raise KeyError: that is a protocol error for the face to report.
        """
        handler = self._handlers()[name]
        model = TOOL_REQUESTS[name]
        args = dict(arguments or {})
        ctx = ctx or CallContext()
        logger.info("tool %s called (%s)", name, describe_args(args))
        try:
            principal = ctx.principal or ctx.installed_by
            if self.guard is not None:
                self.guard.ensure_unlocked(principal)
            check_bounds(args)  # before the guard reads them, and before they are parsed
            if self.guard is not None:
                self.guard.check(principal, args, where="setup")
            request = model.parse(args)  # the one parse: handlers take the typed request
        except Exception as exc:  # our own words only (a refused argument is never quoted)
            err = translate(exc)
            if type(err) is SetupError:
                logger.exception("tool %s crashed reading its arguments", name)
            logger.info("tool %s refused: %s", name, err.code)
            return {"ok": False, "error": err.to_dict()}
        try:
            result = await handler(request, ctx)
        except SetupError as exc:
            logger.info("tool %s failed: %s", name, exc.code)
            return {
                "ok": False,
                "error": self.redactor.redact_obj(without_echo(exc, args, known=self.hub.sources)),
            }
        except Exception as exc:
            err = translate(exc)
            if type(err) is SetupError:
                logger.exception("tool %s crashed", name)
            return {
                "ok": False,
                "error": self.redactor.redact_obj(without_echo(err, args, known=self.hub.sources)),
            }
        if "ok" not in result:
            result = {"ok": True, **result}  # every answer says whether it worked, the same way
        return self.redactor.redact_obj(result)

    def _handlers(self) -> dict[str, Callable[[Any, CallContext], Awaitable[dict]]]:
        return {
            "mcp_setup_search": self.search,
            "mcp_setup_get": self.get,
            "mcp_setup_request_secret": self.request_secret,
            "mcp_setup_test_connection": self.test_connection,
            "mcp_setup_install_and_connect": self.install_and_connect,
            "mcp_setup_list_servers": self.list_servers,
            "mcp_setup_remove": self.remove,
            "mcp_setup_authorize": self.authorize,
        }

    # -- tools ------------------------------------------------------------------------
    async def search(self, request: SearchRequest, ctx: CallContext) -> dict:
        query = request.query
        try:
            result = await self.hub.search(query, page=request.page, page_size=request.page_size, source=request.source)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        out: dict[str, Any] = {
            "servers": [with_runtime_verdict(s.public(), self.which) for s in result.servers],
            "total_pages": result.total_pages,
        }
        if result.errors:
            out["errors"] = [scrubbed(e.model_dump(), query) for e in result.errors]
        if result.did_you_mean:  # the registries' own words: no text of the agent's beyond what matched them
            out["did_you_mean"] = list(result.did_you_mean)
        return out

    async def get(self, request: GetRequest, ctx: CallContext) -> dict:
        detail = await self.preparer.detail(request.qualified_name, request.source)
        existing = await asyncio.to_thread(self.store.servers.get_by_name, detail.qualified_name)
        try:
            chosen: PackageOption | None = choose_package(
                detail.packages, None, preference=self.package_preference, which=self.which
            )
        except SetupError:
            chosen = None
        if chosen is not None and (self.fetcher or self.bundle_cache) is not None and existing is None:
            self.prefetches.package(chosen)  # the package install would choose
        packages = describe_packages(detail.packages, which=self.which)
        notes: list[str] = []
        warnings: list[dict[str, Any]] = []
        for item, pkg in zip(packages, detail.packages):
            keys = list(pkg.required_keys)
            if pkg.type == "mcpb":
                # The option install would choose is read even when remote (one download, sha256
                # checked, cached): install then never asks for a key that get did not list.
                manifest = await self.manifests.cheap_manifest(
                    pkg, allow_file=detail.source == "local", remote=pkg is chosen
                )
                if manifest is not None:
                    keys = required_keys_from_manifest(manifest, keys, home=self.user_home)
                    warnings.extend(self.manifests.argv_warnings(pkg, manifest, keys))
                elif pkg is chosen:
                    notes.append(
                        "The bundle could not be read yet, so its own settings are not listed; "
                        "mcp_setup_test_connection downloads it and says what is missing."
                    )
            fill = self.preparer.fillable(pkg, keys)
            item["keys"] = [self._public_key(k, fill) for k in keys]
        chosen_keys: list[dict[str, Any]] = next(
            (i["keys"] for i, p in zip(packages, detail.packages) if p is chosen), []
        )
        out: dict[str, Any] = {
            "detail": detail.model_dump(mode="json", exclude={"raw", "packages"}, exclude_none=True),
            "installed": existing is not None,
            "package": chosen.id if chosen else None,
            "required_env_keys": chosen_keys,
            "packages": packages,
        }
        if warnings:
            out["warnings"] = warnings
        if existing is not None:
            out["server_id"] = existing.server_id
            out["installed_as"] = existing.slug  # the short name the person's commands take
            offers = await asyncio.to_thread(self.store.pins.offers)  # store I/O off the event loop, as above
            hidden: frozenset[str] = getattr(offers.get(existing.server_id), "hidden_tools", frozenset())
            kept = [t for t in existing.tools if t.get("name") not in hidden]
            out["context"] = context_cost(kept, existing.slug, existing.title or "")
            if hidden:
                out["context"]["left_out_by_user"] = len(hidden)  # unticked in the consent: held back
                out["left_out_by_user"] = sorted(hidden)  # their names, as the install result gives them
        if detail.status:
            out["status"] = detail.status
            notes.append(
                "The registry marks this server deleted; install refuses it."
                if detail.status == "deleted"
                else f"The registry marks this server {detail.status}; install refuses it unless "
                "allow_deprecated is true."
            )
        if notes:
            out["notes"] = notes
        return out

    def _public_key(self, key: RequiredKey, fill: set[str]) -> dict[str, Any]:
        out = key.public()
        if key.name in fill:
            out["required"] = False
            out["provided"] = True
            out["note"] = (
                f"mcp-setup fills this in with its configured {str(key.provided_by).capitalize()} API key: do not request it."
            )
        return out

    async def prefetches_settled(self) -> None:
        """Wait until no prefetch runs (tests and the bench; callers bound it)."""
        await self.prefetches.settled()

    async def request_secret(self, request: SecretRequest, ctx: CallContext) -> dict:
        server = request.server
        if server:
            await self.preparer.refuse_installed(server)  # no prompt for a server that is already there
        pending = self.broker.open(request.key_name, request.prompt, server)
        if server:
            self.prefetches.server(server)  # while the user types
        out: dict[str, Any] = {"ref": pending.ref, "prompt_id": pending.prompt_id}
        if ctx.present_prompt is not None:
            out.update(await ctx.present_prompt(pending))
        out.setdefault("status", "answered" if self.refs.is_ready(pending.ref) else "pending")
        return out

    async def test_connection(self, request: TestRequest, ctx: CallContext) -> dict:
        return await self.installer.test(request, ctx)

    async def install_and_connect(
        self, request: InstallRequest, ctx: CallContext, *, replaces: str | None = None
    ) -> dict:
        """``replaces`` (``mcp-setup update`` only; a tool call never sets it): the installed server
        the new one replaces in the same commit."""
        return await self.installer.install(request, ctx, replaces=replaces)

    async def list_servers(self, request: ListRequest, ctx: CallContext, *, full: bool = False) -> dict:
        """The installed servers, small enough for an agent's context: names, state and tool names.
        ``request.server`` lists that one with its tools' descriptions and schemas; ``full`` (the
        page's cards, never a tool call) every server so."""
        if request.wait_seconds:
            await self.connections.wait_all_settled(request.wait_seconds)
        servers = await asyncio.to_thread(self.store.servers.list)
        if request.server is not None:
            servers = [await asyncio.to_thread(self._installed, request.server)]
            full = True
        offers = await asyncio.to_thread(self.store.pins.offers)
        net_mechanism = await asyncio.to_thread(self.network_mechanism) if full else None
        out = []
        for s in servers:
            st = self.connections.status(s.server_id)
            hidden: frozenset[str] = getattr(
                offers.get(s.server_id), "hidden_tools", frozenset()
            )  # left out by the user
            # Only the approved forms (pins.py): the live list may hold what the user has not seen.
            tools = [t for t in s.tools if t.get("name") not in hidden]
            item: dict[str, Any] = {
                "server_id": s.server_id,
                "qualified_name": s.qualified_name,
                "title": s.title,
                "slug": s.slug,
                "status": st.status if s.enabled else "disabled",  # "disabled": turned off by the person
                "package_type": s.package_type,
                "installed_by": s.installed_by,
                "tool_count": len(tools),
                "tools": tools if full else [t.get("name") for t in tools],
            }
            if full:
                item.update(
                    enabled=s.enabled,
                    installed_at=s.installed_at.isoformat(),
                    version=s.version,
                    keep_running=bool(s.launch_spec.get("keep_running")),  # never stopped when idle
                    sampling=s.sampling,  # may it ask the person's AI to write text (the card's control)
                )
                if (net := network_state(s.launch_spec, net_mechanism)) is not None:  # "only these" on the card
                    item["network"] = net.public()
            if st.reason:
                item["reason"] = st.reason
            if hidden:
                item["left_out_by_user"] = sorted(hidden)  # not listed, not callable
            if (change := s.tools_change()) is not None:  # names only; approved out of band
                item["tools_change"] = {"state": change["state"], "summary": change["summary"]}
                if change["state"] == "changed" and s.enabled:
                    item["status"] = "tools_changed"
            out.append(item)
        return {"servers": out}

    def network_mechanism(self) -> str:
        """What holds a sandboxed server's network to mcp-setup's proxy here (found once)."""
        sandbox = self.prober.sandbox
        return sandbox.network_isolation().mechanism if sandbox is not None else "none"

    def _installed(self, name: str) -> Any:
        """The installed server ``name`` means (slug, qualified name or id)."""
        found = self.store.servers.catalog().server(name)
        server = self.store.servers.get(found.server_id) if found is not None else None
        if server is None:
            raise NotFound(
                "No installed server has this slug, qualified name or server_id. mcp_setup_list_servers lists them."
            )
        return server

    async def remove(self, request: RemoveRequest, ctx: CallContext) -> dict:
        server = await asyncio.to_thread(self._installed, request.name)
        server_id = server.server_id
        revoked = await self._revoke_sign_in(server_id)
        try:
            removed = await asyncio.to_thread(self.store.servers.get, server_id)
            await self.connections.remove(server_id, actor=ctx.installed_by)
        except NotFound:
            raise NotFound("No installed server has this server_id. mcp_setup_list_servers lists them.") from None
        if self.consents is not None and removed is not None:  # an approval never outlives a Remove
            self.consents.forget(removed.qualified_name)
        return {"removed": True, **({"signed_out": True} if revoked else {})}

    async def authorize(self, request: AuthorizeRequest, ctx: CallContext) -> dict:
        """Sign in to a remote server with OAuth in the user's browser; the agent gets a ref."""
        if self.oauth is None:
            raise InvalidInput("OAuth sign-in is not available in this mcp-setup.")
        workdir = make_scratch_dir(self.scratch_root, "auth")
        try:
            prepared = await self.preparer.prepare(
                request, workdir, Progress(CallContext(), self.redactor, "authorize", None)
            )
        finally:
            await asyncio.to_thread(shutil.rmtree, workdir, True)
        url = self.preparer.remote_url(prepared.spec, prepared.values)
        return await self.oauth.authorize(
            qualified_name=prepared.detail.qualified_name,
            url=url,
            present=ctx.present_authorization,
            client_id=request.client_id,
        )

    async def _revoke_sign_in(self, server_id: str) -> bool:
        if self.oauth is None:
            return False
        try:
            values = await asyncio.to_thread(self.store.values.env_values, server_id)
            grant = values.get(GRANT_KEY)
            return bool(grant) and await self.oauth.revoke(grant.reveal())  # type: ignore[union-attr]
        except SetupError:
            return False  # an unknown server is reported by remove itself

    async def set_enabled(self, server_id: str, enabled: bool, *, actor: str = "user") -> dict:
        """Enable or disable an installed server (not an agent tool: faces for people call it).

        A disabled server keeps its rows and secrets; it stops and its tools leave every face's
        list (the gateway sees the change through the store)."""
        server = await asyncio.to_thread(lambda: self.store.servers.set_enabled(server_id, enabled, actor=actor))
        if enabled:
            await self.connections.connect(server, wait=False)
        else:
            await self.connections.disconnect(server_id)
        return {"server_id": server_id, "enabled": server.enabled}

    async def set_keep_running(self, server_id: str, keep: bool, *, actor: str = "user") -> dict:
        """Whether an installed server is never stopped when idle (not an agent tool: faces for
        people call it). The gateway reads it from the store at its next idle check."""
        server = await asyncio.to_thread(lambda: self.store.servers.set_keep_running(server_id, keep, actor=actor))
        return {"server_id": server_id, "keep_running": bool(server.launch_spec.get("keep_running"))}
