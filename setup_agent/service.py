"""The ``mcp_setup_*`` tools: search, get, request a secret, test, install, list, remove.

Each handler takes the tool's JSON arguments and returns its JSON result. Errors the agent
can act on are :class:`~setup_agent.errors.SetupError`; :meth:`SetupService.call` turns them
into tool results ``{"ok": false, "error": {code, message}}``. Every result and error passes
the redactor on the way out. Calls are logged with key names only.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets as _random
import shutil
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry_clients.hub import RegistryHub
from registry_clients.models import Detail, PackageOption, RequiredKey

from .adoption import Keep, Parked
from .bundle import fetch_bundle, unpack_bundle
from .connections import ConnectionManager
from .consent import ConsentBroker, ConsentPresenter, ConsentWarning, build_consent_request, obtain_consent
from .errors import (
    AlreadyInstalled, ArgvSecret, DeprecatedEntry, DownloadTimeout, InvalidInput, NotFound, SecretNotAllowed, SetupError,
    translate,
)  # fmt: skip
from .bundle_cache import BundleCache
from .fetch import Fetcher
from .launch import LaunchSpec, materialize
from .manifest import (
    Manifest,
    argv_secret_keys,
    move_argv_secrets,
    read_manifest,
    required_keys_from_manifest,
    spec_from_manifest,
)
from .oauth import GRANT_KEY, GrantAuth, SignIns
from .packages import DEFAULT_PREFERENCE, build_spec, choose_package, describe_packages, unset_keys
from .pins import relabel
from .probe import ProbeResult, Prober, make_scratch_dir
from .procs import claim_dir
from .prompts import PendingPrompt, PromptBroker
from .redact import Redactor
from .search_cards import with_runtime_verdict
from .stderr_lines import StderrLines
from .secrets import SecretRefStore
from .store import Store
from .tool_specs import TOOL_NAMES

__all__ = ["CallContext", "SetupService", "TOOL_NAMES"]

logger = logging.getLogger(__name__)


#: A face's way of showing a secret prompt to the user. It may wait for the answer (URL
#: elicitation) and returns extra fields for the tool result (e.g. ``{"url": ...}``).
Presenter = Callable[[PendingPrompt], Awaitable[dict[str, Any]]]

#: Hears the stages of a test or install: ``{"type": "progress", "stage", "status", "server",
#: "action", "code"?, "message"?, "tools"?}``. Stages: resolving, downloading, starting,
#: handshake, tools_listed, installing, connected.
ProgressHook = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class CallContext:
    """Who is calling, how this face shows secret prompts, and who hears progress."""

    installed_by: str = "agent"
    present_prompt: Presenter | None = None
    on_progress: ProgressHook | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The user consented (out of band, never through the agent) to a launch that puts a
    #: secret on the command line; without it such a launch is refused with ``argv_secret``.
    #: Set by a face for a person's own command (never from a tool argument); an approval in
    #: the consent step, which shows that warning, allows it too.
    allow_argv_secret: bool = False
    #: How this face asks the user to approve a launch (see setup_agent/consent.py).
    present_consent: ConsentPresenter | None = None
    #: Shows an OAuth sign-in (server, url, authorization_server, scopes, message) to the user;
    #: returns ``{"status": "pending", …}`` when it does not wait (see setup_agent/oauth.py).
    present_authorization: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None


class _Progress:
    """Emits progress events for one call and remembers the stage a failure belongs to."""

    def __init__(self, ctx: CallContext, redactor: Redactor, action: str, server: str | None) -> None:
        self.ctx, self.redactor, self.base = ctx, redactor, {"type": "progress", "action": action, "server": server}
        self.stage = "resolving"

    async def __call__(self, stage: str, status: str, **extra: Any) -> None:
        self.stage = stage
        if self.ctx.on_progress is None:
            return
        try:
            await self.ctx.on_progress(self.redactor.redact_obj({**self.base, "stage": stage, "status": status, **extra}))
        except Exception:  # a progress listener never breaks a call
            logger.exception("progress listener failed")

    async def failed(self, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            return
        err = exc if isinstance(exc, SetupError) else translate(exc)
        stage = self.stage
        if stage == "starting" and err.code in ("rejected", "protocol_error", "timeout", "unreachable"):
            stage = "handshake"  # it started, then failed to speak MCP
        await self(stage, "failed", code=err.code, message=err.message)


@dataclass
class _Prepared:
    detail: Detail
    package: PackageOption
    spec: LaunchSpec
    keys: list[RequiredKey]
    values: dict[str, str]
    bundle_dir: Path | None
    auth: GrantAuth | None = None  # an OAuth sign-in (oauth_ref)
    #: Secret keys the launch still puts on the command line (visible in ``ps``): the warning
    #: a consent step shows; empty when none, or when they were moved into the environment.
    argv_secret_keys: list[str] = field(default_factory=list)

    def warnings(self) -> list[ConsentWarning]:
        """What the consent step must show and the user accept explicitly."""
        if not self.argv_secret_keys:
            return []
        keys = ", ".join(self.argv_secret_keys)
        return [
            ConsentWarning(
                "argv_secret",
                f"This server takes {keys} on its command line, where other users of this computer can see it "
                "(for example with ps) while it runs.",
            )
        ]

    def refuse_argv_secrets(self, ctx: CallContext, *, consented: bool = False) -> None:
        if self.argv_secret_keys and not (ctx.allow_argv_secret or consented):
            keys = ", ".join(self.argv_secret_keys)
            raise ArgvSecret(
                f"This server takes {keys} on its command line, where other local users can see it, and "
                "it cannot be moved into the environment. It runs only if the user consents to that.",
                details={"keys": list(self.argv_secret_keys)},
            )


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
        which: Callable[[str], str | None] = shutil.which,
        http: Any = None,
        scratch_root: Path | None = None,
        user_home: Path | None = None,
        consents: ConsentBroker | None = None,
        oauth: SignIns | None = None,
        admit: Callable[[str, str | None], None] | None = None,
        fetcher: Fetcher | None = None,
        bundle_cache: BundleCache | None = None,
    ) -> None:
        self.refs = refs
        #: MCPB bundles by sha256 (setup_agent/bundle_cache.py): prefetched, and reused by test/install.
        self.bundle_cache = bundle_cache
        self.fetcher = fetcher  # None: no download phase (the probe's deadline covers the download)
        self._prefetches: set[asyncio.Task[None]] = set()
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
        #: Admission (setup_agent/providers.py): ``admit(qualified_name, repository_url)`` raises
        #: ``not_admitted`` for a server that may not be tested or installed; None admits all.
        self.admit = admit
        # One lock per server name: two installs of the same name never race, and a server
        # that hangs in its test holds up no other install.
        self._install_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # MCPB manifests already fetched (and sha256-checked), by (url, sha256): `get` reports
        # a bundle's own settings from here once a test, install or cheap fetch has read it.
        self._manifests: dict[tuple[str, str | None], Manifest] = {}

    # -- dispatch ---------------------------------------------------------------------
    async def call(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext | None = None) -> dict:
        """Run tool ``name``; a SetupError comes back as ``{"ok": false, "error": …}``.

        Unknown tool names raise KeyError: that is a protocol error for the face to report.
        """
        handler = self._handlers()[name]
        args = dict(arguments or {})
        ctx = ctx or CallContext()
        logger.info("tool %s called (%s)", name, _describe_args(args))
        try:
            result = await handler(args, ctx)
        except SetupError as exc:
            logger.info("tool %s failed: %s", name, exc.code)
            return {"ok": False, "error": self.redactor.redact_obj(_without_echo(exc.to_dict(), args))}
        except Exception as exc:
            err = translate(exc)
            if type(err) is SetupError:
                logger.exception("tool %s crashed", name)
            return {"ok": False, "error": self.redactor.redact_obj(_without_echo(err.to_dict(), args))}
        return self.redactor.redact_obj(result)

    def _handlers(self) -> dict[str, Callable[[dict, CallContext], Awaitable[dict]]]:
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
    async def search(self, args: dict, ctx: CallContext) -> dict:
        query = _opt_str(args, "query")
        if query is not None and len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"query is too long (at most {MAX_QUERY_CHARS} characters).")
        page = _int(args, "page", 1, lo=1, hi=10_000)
        page_size = _int(args, "page_size", 10, lo=1, hi=100)
        source = _opt_name(args, "source")
        try:
            result = await self.hub.search(query, page=page, page_size=page_size, source=source)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        out: dict[str, Any] = {
            "servers": [with_runtime_verdict(s.public(), self.which) for s in result.servers],
            "total_pages": result.total_pages,
        }
        if result.errors:
            out["errors"] = [_scrubbed(e.model_dump(), query) for e in result.errors]
        return out

    async def get(self, args: dict, ctx: CallContext) -> dict:
        name = _req_name(args, "qualified_name")
        detail = await self._detail(name, _opt_name(args, "source"))
        existing = await asyncio.to_thread(self.store.get_by_name, detail.qualified_name)
        try:
            chosen: PackageOption | None = choose_package(
                detail.packages, None, preference=self.package_preference, which=self.which
            )
        except SetupError:
            chosen = None
        if chosen is not None and (self.fetcher or self.bundle_cache) is not None and existing is None:
            self._prefetch_package(chosen)  # the package install would choose (#17 item 2)
        packages = describe_packages(detail.packages, which=self.which)
        notes: list[str] = []
        warnings: list[dict[str, Any]] = []
        for item, pkg in zip(packages, detail.packages):
            keys = list(pkg.required_keys)
            if pkg.type == "mcpb":
                # The option install would choose is read even when remote (one download, sha256
                # checked, cached): install then never asks for a key that get did not list.
                manifest = await self._cheap_manifest(pkg, allow_file=detail.source == "local", remote=pkg is chosen)
                if manifest is not None:
                    keys = required_keys_from_manifest(manifest, keys, home=self.user_home)
                    warnings.extend(self._argv_warnings(pkg, manifest, keys))
                elif pkg is chosen:
                    notes.append("The bundle could not be read yet, so its own settings are not listed; "
                                 "mcp_setup_test_connection downloads it and says what is missing.")
            item["keys"] = [k.public() for k in keys]
        chosen_keys = next((i["keys"] for i, p in zip(packages, detail.packages) if p is chosen), [])
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
        if detail.status:
            out["status"] = detail.status
            notes.append(f"The registry marks this server {detail.status}; install refuses it unless "
                         "allow_deprecated is true.")
        if notes:
            out["notes"] = notes
        return out

    def _prefetch(self, name: str) -> None:
        """In the background: find the package an install of ``name`` would choose, and fetch it."""
        if self.fetcher is None and self.bundle_cache is None:
            return

        async def run() -> None:
            try:
                detail = await self.hub.get(name)
                if await asyncio.to_thread(self.store.get_by_name, detail.qualified_name) is None:
                    self._prefetch_package(
                        choose_package(detail.packages, None, preference=self.package_preference, which=self.which)
                    )
            except Exception as exc:  # noqa: BLE001 - a prefetch that fails changes nothing
                logger.debug("no prefetch for a server: %s", type(exc).__name__)

        task = asyncio.create_task(run(), name="mcp-setup-prefetch")
        self._prefetches.add(task)
        task.add_done_callback(self._prefetches.discard)

    async def prefetches_settled(self) -> None:
        """Wait until no prefetch runs (tests and the bench; callers bound it)."""
        while self._prefetches:
            await asyncio.gather(*list(self._prefetches), return_exceptions=True)
        if self.fetcher is not None:
            await self.fetcher.settled()
        if self.bundle_cache is not None:
            await self.bundle_cache.settled()

    def _prefetch_package(self, package: PackageOption) -> None:
        if package.type == "mcpb":
            if self.bundle_cache is not None and self.bundle_cache.prefetch(package.identifier, package.file_sha256):
                logger.info("prefetching the bundle of the server the user is setting up")
            return
        try:
            spec = build_spec(package)
        except SetupError:
            return
        if self.fetcher is not None and self.fetcher.prefetch(spec):
            logger.info("prefetching the %s package of the server the user is setting up", package.type)

    def _argv_warnings(self, package: PackageOption, manifest: Manifest, keys: list[RequiredKey]) -> list[dict[str, Any]]:
        """Does this bundle's launch put a secret on the command line (visible in ``ps``)?"""
        secret = {k.name for k in keys if k.secret}
        try:
            spec = spec_from_manifest(manifest, build_spec(package), home=self.user_home)
            in_argv = argv_secret_keys(move_argv_secrets(spec, secret), secret)
        except SetupError as exc:
            return [{"code": exc.code, "package": package.id, "message": exc.message}]
        if not in_argv:
            return []
        return [{
            "code": "argv_secret", "package": package.id, "keys": in_argv,
            "message": f"This bundle puts {', '.join(in_argv)} on its command line, where other local "
            "users can see it; it can be installed only if the user consents to that.",
        }]  # fmt: skip

    async def _cheap_manifest(self, package: PackageOption, *, allow_file: bool, remote: bool = False) -> Manifest | None:
        """The bundle's manifest when it is cached, cheap to fetch (a ``file://`` or loopback URL),
        or ``remote`` is asked for (the option install would choose): fetched with its sha256
        check into a scratch dir that is removed at once, and cached. Other remote options are
        not downloaded by ``get``: their own settings are known after their first test (and
        the consent step shows them before anything runs)."""
        cache_key = (package.identifier, package.file_sha256)
        if cache_key in self._manifests:
            return self._manifests[cache_key]
        url = package.identifier.lower()
        if not remote and not (url.startswith("file://") or url.startswith(("http://127.0.0.1", "http://localhost"))):
            return None
        scratch = make_scratch_dir(self.scratch_root, "get")
        try:
            archive = await self._bundle_archive(package, scratch, allow_file=allow_file)
            bundle_dir = await asyncio.to_thread(unpack_bundle, archive, scratch / "bundle")
            manifest = await asyncio.to_thread(read_manifest, bundle_dir)
        except SetupError:
            return None  # install reports it properly
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)
        self._manifests[cache_key] = manifest
        return manifest

    async def _refuse_installed(self, name: str) -> None:
        existing = await asyncio.to_thread(self.store.get_by_name, name)
        if existing is not None:
            raise AlreadyInstalled(
                f"{existing.qualified_name} is already installed (server_id {existing.server_id}). "
                "Remove it with mcp_setup_remove first to install it again.",
                details={"server_id": existing.server_id},
            )

    async def request_secret(self, args: dict, ctx: CallContext) -> dict:
        key_name = _req_str(args, "key_name")
        prompt_text = _req_str(args, "prompt")
        server = _opt_name(args, "server")
        if server:
            await self._refuse_installed(server)  # no prompt for a server that is already there
        pending = self.broker.open(key_name, prompt_text, server)
        if server:
            self._prefetch(server)  # while the user types (#17 item 2)
        out: dict[str, Any] = {"ref": pending.ref, "prompt_id": pending.prompt_id}
        if ctx.present_prompt is not None:
            out.update(await ctx.present_prompt(pending))
        out.setdefault("status", "answered" if self.refs.is_ready(pending.ref) else "pending")
        return out

    async def test_connection(self, args: dict, ctx: CallContext) -> dict:
        progress = _Progress(ctx, self.redactor, "mcp_setup_test_connection", _name_or_none(args.get("qualified_name")))
        # An install may adopt the tested process (#17): it then runs in a reserved install dir.
        reserved = self.connections.install_dir("srv_" + _random.token_hex(6)) if self.prober.parking.enabled else None
        workdir = reserved or make_scratch_dir(self.scratch_root, "test")
        parked = False
        try:
            if reserved is not None:
                await asyncio.to_thread(claim_dir, reserved)
            prepared = await self._prepare(args, workdir, progress)
            await self._consent(prepared, ctx, "test")
            result = await self._probe(prepared, progress, keep=reserved)
            parked = result.parked  # the parked session owns its dir now
        except BaseException as exc:
            await progress.failed(exc)
            raise
        finally:
            if not parked:
                await asyncio.to_thread(shutil.rmtree, workdir, True)
        return {
            "ok": True,
            "tools": result.tools,
            "package": prepared.package.id,
            "version": prepared.package.version,
            "protocol_version": result.protocol_version,
        }

    async def install_and_connect(self, args: dict, ctx: CallContext) -> dict:
        name = _req_name(args, "qualified_name")
        progress = _Progress(ctx, self.redactor, "mcp_setup_install_and_connect", name)
        try:
            return await self._install(name, args, ctx, progress)
        except BaseException as exc:
            await progress.failed(exc)
            raise

    def _install_lock(self, name: str) -> asyncio.Lock:
        lock = self._install_locks.get(name)
        if lock is None:
            lock = self._install_locks[name] = asyncio.Lock()
        return lock

    async def _install(self, name: str, args: dict, ctx: CallContext, progress: _Progress) -> dict:
        async with self._install_lock(name):
            existing = await asyncio.to_thread(self.store.get_by_name, name)
            if existing is not None:
                raise AlreadyInstalled(
                    f"{name} is already installed (server_id {existing.server_id}). "
                    "Remove it with mcp_setup_remove first to install it again.",
                    details={"server_id": existing.server_id},
                )
            server_id = "srv_" + _random.token_hex(6)
            install_dir = self.connections.install_dir(server_id)
            # Reserve the refs first (#10 item 7): a concurrent install cannot use them too;
            # a failure releases them so they stay usable.
            env_refs = _str_map(args, "env_refs")
            claim = self.refs.claim(env_refs)
            adopted: Parked | None = None
            try:
                await asyncio.to_thread(claim_dir, install_dir)  # owner-marked: a crash's debris is swept
                prepared = await self._prepare(args, install_dir, progress, lazy_bundle=self.prober.parking.enabled)
                await self._consent(prepared, ctx, "install")
                adopted = self._adopt(prepared)
                if adopted is not None:  # the tested process goes on, in the dir it was tested in (#17)
                    await asyncio.to_thread(shutil.rmtree, install_dir, True)
                    server_id, install_dir, result = adopted.server_id, adopted.workdir, adopted.result
                    # The tools the tested process listed: a face shows them as for a fresh start.
                    await progress("tools_listed", "done", tools=[
                        {"name": t["name"], "description": t["description"]} for t in result.tools
                    ])  # fmt: skip
                else:
                    if prepared.spec.needs_install_dir and prepared.bundle_dir is None:  # lazy, not adopted
                        prepared.bundle_dir, _ = await self._fetch_bundle(prepared.package, prepared.detail, install_dir, progress)
                    result = await self._probe(prepared, progress)
                await progress("installing", "started")
                # A value that came through a secret prompt (a ref) is secret for life, whatever
                # the registry says (#10 item 1): stored as secret, so every connect hides it.
                secret_keys = {n for k in prepared.keys if k.secret for n in (k.name, *k.aliases)} | set(env_refs)
                # Hidden while the refs are still live: after consume only a connect knows the values.
                probed_tools = self.redactor.redact_obj(result.tools)
                env = {k: (v, k in secret_keys) for k, v in prepared.values.items()}
                if prepared.auth is not None:  # the sign-in as it is now (the test may have renewed it)
                    env[GRANT_KEY] = (prepared.auth.grant.model_dump_json(), True)
                self.connections.expect(server_id)  # a store sync must not start it meanwhile (#17)
                server = await asyncio.to_thread(
                    self.store.install,
                    server_id=server_id,
                    qualified_name=prepared.detail.qualified_name,
                    source=prepared.detail.source,
                    version=prepared.package.version or prepared.detail.version,
                    package_type=prepared.package.type,
                    launch_spec=prepared.spec.model_dump(mode="json"),
                    installed_by=ctx.installed_by,
                    tools_hash=result.tools_hash,
                    env=env,
                    title=prepared.detail.display_name,
                    tools=relabel(probed_tools, {ref: f"[secret:{key}]" for key, ref in env_refs.items()}),  # the pin
                )
            except BaseException:
                self.refs.release(claim)
                self.connections.expect(server_id, False)
                if adopted is not None:
                    await adopted.close()
                await asyncio.to_thread(shutil.rmtree, install_dir, True)
                raise
            self.refs.consume({**env_refs, **({GRANT_KEY: args["oauth_ref"]} if prepared.auth is not None else {})})
        await progress("installing", "done", server_id=server.server_id)
        status = await self.connections.connect(server, adopt=adopted)
        await progress("connected", "done" if status.status == "connected" else "failed", server_id=server.server_id)
        out = {"server_id": server.server_id, "status": status.status, "tools": status.tools or probed_tools}
        if status.reason:
            out["reason"] = status.reason
        return out

    async def list_servers(self, args: dict, ctx: CallContext) -> dict:
        wait = args.get("wait_seconds", 0)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 120:
            raise InvalidInput("wait_seconds must be a number from 0 to 120.")
        if wait:
            await self.connections.wait_all_settled(float(wait))
        servers = await asyncio.to_thread(self.store.list)
        out = []
        for s in servers:
            st = self.connections.status(s.server_id)
            item: dict[str, Any] = {
                "server_id": s.server_id,
                "qualified_name": s.qualified_name,
                "title": s.title,
                "slug": s.slug,
                "enabled": s.enabled,
                "status": st.status if s.enabled else "disabled",
                # Only the approved forms (pins.py): the live list may hold what the user has not seen.
                "tools": list(s.tools),
                "installed_by": s.installed_by,
                "installed_at": s.installed_at.isoformat(),
                "version": s.version,
                "package_type": s.package_type,
            }
            if st.reason:
                item["reason"] = st.reason
            if (change := s.tools_change()) is not None:  # names only; approved out of band
                item["tools_change"] = {"state": change["state"], "summary": change["summary"]}
                if change["state"] == "changed" and s.enabled:
                    item["status"] = "tools_changed"
            out.append(item)
        return {"servers": out}

    async def remove(self, args: dict, ctx: CallContext) -> dict:
        server_id = _req_name(args, "server_id")
        revoked = await self._revoke_sign_in(server_id)
        try:
            await self.connections.remove(server_id, actor=ctx.installed_by)
        except NotFound:
            raise NotFound("No installed server has this server_id. mcp_setup_list_servers lists them.") from None
        return {"removed": True, **({"signed_out": True} if revoked else {})}

    async def authorize(self, args: dict, ctx: CallContext) -> dict:
        """Sign in to a remote server with OAuth in the user's browser; the agent gets a ref."""
        if self.oauth is None:
            raise InvalidInput("OAuth sign-in is not available in this mcp-setup.")
        workdir = make_scratch_dir(self.scratch_root, "auth")
        try:
            prepared = await self._prepare(args, workdir, _Progress(CallContext(), self.redactor, "authorize", None))
        finally:
            await asyncio.to_thread(shutil.rmtree, workdir, True)
        url = self._remote_url(prepared.spec, prepared.values)
        return await self.oauth.authorize(
            qualified_name=prepared.detail.qualified_name,
            url=url,
            present=ctx.present_authorization,
            client_id=_opt_str(args, "client_id"),
        )

    async def _revoke_sign_in(self, server_id: str) -> bool:
        if self.oauth is None:
            return False
        try:
            values = await asyncio.to_thread(self.store.env_values, server_id)
            grant = values.get(GRANT_KEY)
            return bool(grant) and await self.oauth.revoke(grant.reveal())  # type: ignore[union-attr]
        except SetupError:
            return False  # an unknown server is reported by remove itself

    @staticmethod
    def _remote_url(spec: LaunchSpec, values: dict[str, str]) -> str:
        if spec.transport == "stdio":
            raise InvalidInput("Only remote servers (streamable HTTP or SSE) sign in with OAuth; choose its remote package.")
        url = materialize(spec, values).url
        assert url
        return url

    async def set_enabled(self, server_id: str, enabled: bool, *, actor: str = "user") -> dict:
        """Enable or disable an installed server (not an agent tool: faces for people call it).

        A disabled server keeps its rows and secrets; it stops and its tools leave every face's
        list (the gateway sees the change through the store)."""
        server = await asyncio.to_thread(lambda: self.store.set_enabled(server_id, enabled, actor=actor))
        if enabled:
            await self.connections.connect(server, wait=False)
        else:
            await self.connections.disconnect(server_id)
        return {"server_id": server_id, "enabled": server.enabled}

    # -- shared steps -----------------------------------------------------------------
    async def _detail(self, name: str, source: str | None, version: str | None = None) -> Detail:
        try:  # a version is asked for only when given (``mcp-setup update --version``)
            return await self.hub.get(name, source=source, **({"version": version} if version else {}))
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        except Exception as exc:  # upstream text may reflect the name: keep only our own words
            err = translate(exc)
            if type(err) is SetupError:
                raise
            err.message = _scrub(err.message, name)
            raise err from None

    async def _prepare(self, args: dict, workdir: Path, progress: _Progress, *, lazy_bundle: bool = False) -> _Prepared:
        name = _req_name(args, "qualified_name")
        env_refs = _str_map(args, "env_refs")
        env = _str_map(args, "env")
        allow_deprecated = args.get("allow_deprecated", False)
        if not isinstance(allow_deprecated, bool):
            raise InvalidInput("allow_deprecated must be true or false.")
        await self._refuse_installed(name)  # before any download, prompt or spawn
        await progress("resolving", "started")
        detail = await self._detail(name, _opt_name(args, "source"), _opt_name(args, "version"))
        if detail.qualified_name != name:
            await self._refuse_installed(detail.qualified_name)
        if detail.status and not allow_deprecated:
            raise DeprecatedEntry(
                f"The registry marks {detail.qualified_name} {detail.status}. Pick another server, or pass "
                "allow_deprecated: true if the user wants it anyway.",
                details={"status": detail.status},
            )
        if self.admit is not None:  # before any download, prompt or spawn
            self.admit(detail.qualified_name, detail.repository_url)
        package = choose_package(
            detail.packages, _opt_name(args, "package"), preference=self.package_preference, which=self.which
        )
        keys = list(package.required_keys)
        bundle_dir: Path | None = None
        manifest = None
        await progress("resolving", "done", package=package.id)
        if package.type == "mcpb":
            manifest = self._manifests.get((package.identifier, package.file_sha256)) if lazy_bundle and package.file_sha256 else None
            if manifest is None:  # lazy: a bundle already checked is fetched only if no tested process is adopted
                bundle_dir, manifest = await self._fetch_bundle(package, detail, workdir, progress)
            keys = required_keys_from_manifest(manifest, keys, home=self.user_home)
        values = self._values(keys, env_refs, env)
        # Optional settings left unset (and flags set false): their inputs are left out entirely.
        omit = unset_keys(keys, values)
        spec = build_spec(package, omit=omit)
        if manifest is not None:
            spec = spec_from_manifest(manifest, spec, home=self.user_home, omit=omit)
        secret = {k.name for k in keys if k.secret}
        spec = move_argv_secrets(spec, secret)
        auth = None
        oauth_ref = _opt_str(args, "oauth_ref")
        if oauth_ref is not None:
            if self.oauth is None:
                raise InvalidInput("OAuth sign-in is not available in this mcp-setup.")
            auth = self.oauth.auth_for_ref(oauth_ref, detail.qualified_name, self._remote_url(spec, values))
        return _Prepared(
            detail, package, spec, keys, values, bundle_dir, auth=auth, argv_secret_keys=argv_secret_keys(spec, secret)
        )

    async def _fetch_bundle(
        self, package: PackageOption, detail: Detail, workdir: Path, progress: _Progress
    ) -> tuple[Path, Manifest]:
        await progress("downloading", "started")
        await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
        archive = await self._bundle_archive(package, workdir, allow_file=detail.source == "local")
        bundle_dir = await asyncio.to_thread(unpack_bundle, archive, workdir / "bundle")
        await asyncio.to_thread(archive.unlink)
        manifest = await asyncio.to_thread(read_manifest, bundle_dir)
        self._manifests[(package.identifier, package.file_sha256)] = manifest
        await progress("downloading", "done")
        return bundle_dir, manifest

    async def _bundle_archive(self, package: PackageOption, dest: Path, *, allow_file: bool) -> Path:
        """The bundle at ``dest/bundle.mcpb``, sha256-checked: from the cache when it holds it."""
        if self.bundle_cache is not None:
            return await self.bundle_cache.fetch(package.identifier, package.file_sha256, dest, allow_file=allow_file)
        return await fetch_bundle(package.identifier, package.file_sha256, dest, http=self.http, allow_file=allow_file)

    def _values(self, keys: list[RequiredKey], env_refs: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        by_name = {k.name: k for k in keys}
        canonical = {k.name: k.name for k in keys} | {a: k.name for k in keys for a in k.aliases}
        unknown = sorted((set(env_refs) | set(env)) - set(canonical))
        if unknown:
            known = ", ".join(sorted(by_name)) or "none"
            # Never the unknown names themselves: what matched nothing is the agent's guess (#10 item 2).
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
        missing = [k for k in keys if k.required and k.default is None and k.name not in given]
        if missing:
            parts = [
                f"{k.name} (secret: request it with mcp_setup_request_secret)" if k.secret else k.name
                for k in missing
            ]
            raise InvalidInput(f"Missing required settings: {', '.join(parts)}.", details={"missing": [k.name for k in missing]})
        resolved = self.refs.resolve(env_refs)
        # An optional argument's default is the server's own: it is shown, never passed.
        values = {k.name: k.default for k in keys if k.default is not None and not k.off_unless_set}
        values.update({canonical[k]: v for k, v in env.items()})
        values.update({canonical[k]: v.reveal() for k, v in resolved.items()})
        for key in keys:  # one value, every name: the bundle's templates use the alias
            if key.name in values:
                values.update({alias: values[key.name] for alias in key.aliases})
        return values

    async def _consent(self, prepared: _Prepared, ctx: CallContext, action: str) -> None:
        """The user's out-of-band approval; their destination settings replace the agent's."""
        request = build_consent_request(
            server=prepared.detail.qualified_name,
            version=prepared.package.version or prepared.detail.version,
            spec=prepared.spec,
            keys=prepared.keys,
            values=prepared.values,
            action=action,
            warnings=prepared.warnings(),
        )
        decision = await obtain_consent(self.consents, request, ctx.present_consent)
        if decision is not None:
            prepared.values.update(decision.settings)
        # An approval means the user accepted every warning shown (the broker insists on it).
        prepared.refuse_argv_secrets(ctx, consented=decision is not None)

    def _adoption_key(self, prepared: _Prepared) -> str:
        version = prepared.package.version or prepared.detail.version
        spec = prepared.spec.model_dump(mode="json")
        return self.prober.parking.key(prepared.detail.qualified_name, version, spec, prepared.values)

    def _adopt(self, prepared: _Prepared) -> Parked | None:
        """The session a passing test of exactly this left running, if any (#17 item 1)."""
        if not self.prober.parking.enabled or prepared.auth is not None:
            return None
        return self.prober.parking.adopt(self._adoption_key(prepared))

    async def _fetch(self, prepared: _Prepared, progress: _Progress) -> None:
        """The download phase (#17 item 3): its own deadline and progress; the start's deadline
        then counts from its end. A failed fetch is not an error: the start says what is wrong."""
        if self.fetcher is None or self.fetcher.is_warm(prepared.spec):
            return
        await progress("downloading", "started")

        async def tick(elapsed: float, fetched: int) -> None:
            await progress("downloading", "progress", elapsed_seconds=round(elapsed, 1), fetched=fetched)

        try:
            state = await self.fetcher.fetch(prepared.spec, tick)
        except TimeoutError:
            raise DownloadTimeout(
                f"Downloading the package took longer than {self.fetcher.timeout:g} seconds "
                "(MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS). Try again: what arrived stays in the cache."
            ) from None
        await progress("downloading", "done", **({"fetched": state.fetched, "ok": state.ok} if state else {}))

    async def _probe(self, prepared: _Prepared, progress: _Progress, keep: Path | None = None) -> ProbeResult:
        await self._fetch(prepared, progress)

        # While it starts, the page shows the time spent against the deadline and the server's
        # latest stderr line, redacted (#12 item 4).
        async def on_stage(stage: str, status: str) -> None:
            late = {"deadline_seconds": self.prober.timeout} if (stage, status) == ("starting", "started") else {}
            await progress(stage, status, **late)

        async def on_line(line: str) -> None:
            if progress.stage == "starting":  # lines after the handshake are not "while it starts"
                await progress("starting", "output", stderr_line=line)

        lines = StderrLines(on_line, self.redactor.redact)
        try:
            result = await self.prober.probe(
                prepared.spec,
                prepared.values,
                dirname=str(prepared.bundle_dir) if prepared.bundle_dir else None,
                on_stage=on_stage,
                on_stderr=lines,
                keep=Keep(self._adoption_key(prepared), keep) if keep is not None else None,
                **({"auth": prepared.auth} if prepared.auth is not None else {}),
            )
        finally:
            lines.close()
        await progress("tools_listed", "done", tools=[{"name": t["name"], "description": t["description"]} for t in result.tools])
        return result


# -- argument helpers ---------------------------------------------------------------------


#: A name the agent gives (server names, ids, sources, package ids, setting names) may be echoed
#: in a result only when it matches this and is at most this long (#10 item 2): anything else
#: is "an invalid name", never quoted, so an error cannot carry a guess back through the redactor.
NAME_PATTERN = re.compile(r"[A-Za-z0-9@_][A-Za-z0-9@._/:+\-]{0,199}")
MAX_NAME_CHARS = 200
MAX_QUERY_CHARS = 200
_INVALID_NAME = "an invalid name"


def _valid_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS and NAME_PATTERN.fullmatch(value) is not None


def _name_or_none(value: object) -> str | None:
    """``value`` if it is a valid name (stripped), else None: for labels such as progress events."""
    if isinstance(value, str) and _valid_name(value.strip()):
        return value.strip()
    return None


def _req_name(args: dict, name: str) -> str:
    value = _req_str(args, name)
    if not _valid_name(value):
        raise InvalidInput(
            f"{name} is {_INVALID_NAME}: use letters, digits and @ _ . / : + - (at most {MAX_NAME_CHARS} characters)."
        )
    return value


def _opt_name(args: dict, name: str) -> str | None:
    value = _opt_str(args, name)
    if value is not None and not _valid_name(value):
        raise InvalidInput(
            f"{name} is {_INVALID_NAME}: use letters, digits and @ _ . / : + - (at most {MAX_NAME_CHARS} characters)."
        )
    return value


def _scrub(message: str, text: str | None) -> str:
    """``message`` (built from upstream words) without the agent's ``text`` in it, by the
    redactor's length rules (under 4 characters nothing to hide, under 8 whole tokens only)."""
    if not text or not isinstance(message, str) or len(text) < 4:
        return message
    from urllib.parse import quote, quote_plus

    alts = []
    for form in sorted({text, quote(text, safe=""), quote_plus(text), quote(text)}, key=len, reverse=True):
        alt = re.escape(form)
        alts.append(alt if len(form) >= 8 else rf"(?<![A-Za-z0-9_]){alt}(?![A-Za-z0-9_])")
    return re.sub("|".join(alts), _YOUR_INPUT, message, flags=re.IGNORECASE)


#: The arguments whose text an error may otherwise quote (their values are the agent's).
_ECHOED_ARGS = ("qualified_name", "source", "package", "server_id", "server", "query", "key_name")
_YOUR_INPUT = "(the name you gave)"


def _without_echo(error: dict[str, Any], args: dict) -> dict[str, Any]:
    """``error`` with the agent's own strings taken out of its text, always (not only when one
    holds a secret, which would itself answer the guess), by the redactor's length rules."""
    # Longer texts were refused unquoted before anything could echo them (names, query: 200).
    texts = [v.strip() for k in _ECHOED_ARGS if isinstance(v := args.get(k), str) and 0 < len(v.strip()) <= 1000]

    def clean(obj: Any) -> Any:
        if isinstance(obj, str):
            for text in sorted(texts, key=len, reverse=True):
                obj = _scrub(obj, text)
            return obj
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return clean(error) if texts else error


def _scrubbed(error: dict[str, Any], text: str | None) -> dict[str, Any]:
    if isinstance(error.get("message"), str):
        error = {**error, "message": _scrub(error["message"], text)}
    return error


def _req_str(args: dict, name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} is required and must be a non-empty string.")
    return value.strip()


def _opt_str(args: dict, name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string.")
    return value.strip()


def _int(args: dict, name: str, default: int, *, lo: int, hi: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidInput(f"{name} must be a whole number from {lo} to {hi}.")
    return value


def _str_map(args: dict, name: str) -> dict[str, str]:
    value = args.get(name) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidInput(f"{name} must be an object mapping setting names to strings.")
    return dict(value)


def _describe_args(args: dict) -> str:
    """Key names only: never a value of env or env_refs."""
    parts = []
    for key, value in args.items():
        if key in ("env", "env_refs") and isinstance(value, dict):
            parts.append(f"{key} keys={sorted(value)}")
        elif key in ("qualified_name", "source", "package", "server_id", "key_name", "query", "page", "page_size"):
            parts.append(f"{key}={value!r}")
        else:
            parts.append(f"{key}=…")
    return ", ".join(parts)
