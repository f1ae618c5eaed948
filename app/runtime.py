"""Wiring: build the core's parts from :class:`Settings`, once, for a face to use.

The core reads no environment: everything it needs is passed here. I/O seams (keyring
backend, ``which``, host environment, HTTP client) can be injected, which is how tests
run the whole product against local registries, a private keyring and a temp data dir.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from registry_clients.hub import RegistryHub, build_sources
from setup_agent.agent import ToolRegistry, load_archetypes
from setup_agent.gateway import (
    ConnectionManager,
    Gateway,
    MemberPromptReplicas,
    MemberPromptsElsewhere,
    MemberSessions,
    OnlyHere,
    RelayRules,
    ToolsBudget,
)
from setup_agent.launch import (
    DEFAULT_PREFERENCE,
    BundleCache,
    DirectStarts,
    Fetcher,
    ProcessLedger,
    Sandbox,
    proxy_credentials,
    runner_which,
    sweep_install_dirs,
    sweep_scratch,
)
from setup_agent.oauth import SignIns
from setup_agent.secrets import (
    GuardCounts,
    GuessGuard,
    PromptBroker,
    PromptsElsewhere,
    Redactor,
    SecretRefStore,
    SharedRefStore,
    Vault,
)
from setup_agent.setup import (
    ConsentBroker,
    ConsentSharing,
    Prober,
    ProviderConfig,
    PublishedLocks,
    PublishedPrompts,
    ReplicaPrompts,
    SetupService,
    StoreConsents,
    TeamConsents,
    ToolReview,
    load_provider_config,
)
from setup_agent.store import (
    CHANGES_CHANNEL,
    PENDING_CHANNEL,
    ChangeFeed,
    PendingApprovals,
    SharedApprovals,
    SharedCapabilities,
    SharedGuardCounts,
    SharedRefs,
    SharedSignIns,
    Store,
    prepare_data_dir,
    process_owner,
)

from .data_key import open_vault
from .settings import Settings, service_version

__all__ = [
    "Runtime",
    "build_runtime",
    "keyring_secret",
    "openai_options",
    "service_version",
    "sweep_leftovers",
]

KEYRING_SERVICE = "mcp-setup"


def keyring_secret(username: str, keyring_get: Callable[[str, str], str | None] | None = None) -> str | None:
    """A credential kept in the OS keyring under ``mcp-setup``/``username``; None when absent."""
    try:
        if keyring_get is None:
            import keyring

            keyring_get = keyring.get_password
        return keyring_get(KEYRING_SERVICE, username) or None
    except Exception:  # noqa: BLE001 - no keyring: no credential
        return None


def openai_options(settings: Settings, keyring_get: Callable[[str, str], str | None] | None = None) -> dict[str, Any]:
    """Options of the ``openai`` driver: ``MCP_SETUP_OPENAI_*``, the key from the keyring as fallback."""
    options: dict[str, Any] = {}
    if settings.openai_base_url:
        options["base_url"] = settings.openai_base_url
    if settings.openai_model:
        options["model"] = settings.openai_model
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    key = key or keyring_secret("openai-api-key", keyring_get)
    if key:
        options["api_key"] = key
    return options


logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    refs: SecretRefStore
    redactor: Redactor
    broker: PromptBroker
    hub: RegistryHub
    vault: Vault
    store: Store
    prober: Prober
    connections: ConnectionManager
    service: SetupService
    http: httpx.AsyncClient
    gateway: Gateway
    consents: ConsentBroker | None = None
    sign_ins: SignIns | None = None
    providers: ProviderConfig | None = None
    tool_registry: ToolRegistry | None = None  # read-only inventory (tool_registry_* methods)
    review: ToolReview | None = None  # asks the user about changed tool lists (pins.py)
    approvals: PendingApprovals | None = None  # what waits for the user, shared by every process
    guard: GuessGuard | None = None  # refused calls by principal: incidents, locks, unlock
    shared_refs: SharedRefs | None = None  # a team's database: refs any replica resolves
    shared_capabilities: SharedCapabilities | None = None  # and link keys any replica checks
    shared_approvals: SharedApprovals | None = None  # and the user's approvals, remembered
    feed: ChangeFeed | None = None  # a team's LISTEN/NOTIFY: changes and answers at once (the polling stays)

    async def start(self, *, eager: bool = True) -> None:
        """Read the catalog, then watch the store. ``eager``: connect every enabled server now
        (concurrently, in the background); otherwise each starts on its first call."""
        await self.gateway.start(eager=eager)
        if self.feed is not None:
            self.feed.start()

    async def aclose(self) -> None:
        if self.feed is not None:
            self.feed.stop()
        if self.review is not None:
            self.review.close()
        await self.gateway.aclose()
        if self.gateway.members is not None:
            await self.gateway.members.aclose()
        if self.sign_ins is not None:
            await self.sign_ins.aclose()
        await self.connections.aclose()
        await self.prober.drain()
        if self.service.fetcher is not None:
            await self.service.fetcher.aclose()
        if self.service.bundle_cache is not None:
            await self.service.bundle_cache.aclose()
        await self.hub.aclose()
        await self.http.aclose()
        self.store.close()


def sweep_leftovers(ledger: ProcessLedger, store: Store, *, install_root: Path, scratch: Path) -> None:
    """Start-up: end the server process groups of dead mcp-setup processes, and remove the
    install dirs without a committed row and the scratch dirs their owners left (a crash).
    What a live process (another face on this data dir) owns is left alone."""
    try:
        ledger.sweep()
    except OSError:
        logger.warning("could not sweep leftover server processes", exc_info=True)
    try:
        committed = {s.server_id for s in store.servers.list()}
    except Exception:  # noqa: BLE001 - without the committed rows, no install dir may be removed
        logger.warning("could not list installed servers; install dirs are not swept", exc_info=True)
    else:
        sweep_install_dirs(install_root, committed)
    sweep_scratch(scratch)


def make_direct_starts(settings: Settings) -> DirectStarts:
    """Where the download phase notes what each runner installed (``<home>/cache/starts``, in the
    data dir no server sees), for every start of this data dir: a test's, the gateway's and
    ``mcp-setup run``'s (setup_agent/launch/direct.py)."""
    return DirectStarts(Path(settings.home).expanduser() / "cache" / "starts")


def make_fetcher(
    settings: Settings, host_env: Mapping[str, str], sandbox: Sandbox, direct: DirectStarts, ledger: ProcessLedger
) -> Fetcher:
    """The download phase of this data dir's starts (setup_agent/launch/fetch.py): sandboxed as
    the servers are, to its registries only, with their logins; it notes what it installed, so
    that servers start without their runner. The runtime's, and ``mcp-setup run``'s when nothing
    was noted for its server here (``Fetcher.start_ready``)."""
    return Fetcher(
        host_env=host_env,
        timeout=settings.download_timeout_seconds,
        prefetch=settings.prefetch_packages,
        workdir=Path(settings.home).expanduser() / "scratch",
        ledger=ledger,
        sandbox=sandbox,
        direct=direct,
    )


def make_sandbox(settings: Settings, host_env: Mapping[str, str]) -> Sandbox:
    """The sandbox of this process's servers (``MCP_SETUP_SANDBOX``): nothing of the data dir,
    nor of the user's home, is shown to a server (setup_agent/launch/sandbox.py)."""
    hide = [Path(settings.home).expanduser()]
    if settings.data_key_file is not None:
        hide.append(Path(settings.data_key_file).expanduser())
    return Sandbox(settings.sandbox, hide=tuple(hide), user_home=Path.home(), host_env=dict(host_env))


def build_runtime(
    settings: Settings,
    *,
    keyring_backend: Any = None,
    which: Callable[[str], str | None] = runner_which,
    host_env: Mapping[str, str] | None = None,
    refs_timer: Callable[[], float] | None = None,
    http_transport: httpx.AsyncBaseTransport | None = None,
) -> Runtime:
    """Build every part. Call inside the event loop that will run them.

    ``http_transport`` (registries, bundles) is the HTTP seam: tests pass one that keeps them
    on this machine.

    Raises :class:`setup_agent.errors.ConfigInvalid` for a config.toml that cannot be used."""
    providers = load_provider_config(settings.config_path)  # first: a bad file stops before any work
    # The core reads no environment: the host variables a server may inherit are taken here.
    host_env = dict(os.environ) if host_env is None else host_env
    home = Path(settings.home).expanduser()
    for warning in prepare_data_dir(home):  # 0700, also when it existed looser
        logger.warning("%s", warning)
    redactor = Redactor()
    vault = open_vault(settings, keyring_backend=keyring_backend)
    store = Store.for_data_dir(home, vault, database_url=settings.database_url)
    # Consents, tool reviews and secret prompts wait for the user in the store too: every process's
    # user channels (another serve's page, `mcp-setup approve`) see and answer them.
    approvals = PendingApprovals(store, owner=process_owner())
    team = _team_backends(store, vault, approvals, ttl_seconds=settings.secret_ttl_seconds, refs_timer=refs_timer)
    refs = team.refs
    refs.add_listener(redactor.invalidate)
    redactor.add_source(refs.live_values)
    broker = PromptBroker(refs, elsewhere=team.prompts_elsewhere)
    PublishedPrompts(broker, refs, approvals, vault, ttl_seconds=settings.secret_ttl_seconds)
    # Every answer to a consent is audited: who gave it, to which launch, granting what.
    consents = ConsentBroker(
        ttl_seconds=settings.secret_ttl_seconds,
        mode=settings.consent,
        sharing=team.consents,
        audit=store.audit.record_event,
    )
    http = httpx.AsyncClient(
        timeout=settings.registry_timeout_seconds,
        follow_redirects=True,
        **({"transport": http_transport} if http_transport is not None else {}),
    )
    api_key = settings.smithery_api_key.get_secret_value() if settings.smithery_api_key else None
    api_key = api_key or keyring_secret(
        "smithery-api-key", keyring_backend.get_password if keyring_backend is not None else None
    )
    if api_key:
        redactor.register(api_key, "[secret:MCP_SETUP_SMITHERY_API_KEY]")
    for value, placeholder in proxy_credentials(host_env):  # servers inherit the proxy settings
        redactor.register(value, placeholder)
    sources, notes = build_sources(
        settings.registry_names,
        catalog_dir=settings.catalog_path,
        official_url=settings.official_registry_url,
        smithery_url=settings.smithery_url,
        smithery_api_key=api_key,
        http=http,
    )
    hub = RegistryHub(sources, timeout=settings.registry_timeout_seconds, notes=notes)
    feed = ChangeFeed(store.database.engine) if team.shared and settings.listen_notify else None
    if feed is not None:
        feed.add_listener(CHANGES_CHANNEL, store.database.changed)  # the gateway reloads: list_changed, /ws
        feed.add_listener(PENDING_CHANNEL, consents.pull)  # an answer given on another replica, applied now
        feed.add_listener(PENDING_CHANNEL, refs.pull)
    scratch = home / "scratch"
    ledger = ProcessLedger(home / "procs")
    sweep_leftovers(ledger, store, install_root=home / "servers", scratch=scratch)
    sandbox = make_sandbox(settings, host_env)
    direct = make_direct_starts(settings)
    prober = Prober(
        redactor,
        scratch_root=scratch,
        timeout=settings.probe_timeout_seconds,
        host_env=host_env,
        ledger=ledger,
        keep_for=settings.secret_ttl_seconds if settings.adopt_tested_servers else 0.0,
        sandbox=sandbox,
        direct=direct,
        max_concurrent=settings.max_concurrent_probes,
    )
    sign_ins = SignIns(
        refs, redactor, store=store, timeout=settings.secret_prompt_timeout_seconds, shared=team.sign_ins
    )
    if feed is not None:  # a sign-in's redirect may reach any replica: its answer waits in the database
        feed.add_listener(PENDING_CHANNEL, sign_ins.kick)
    bundles = BundleCache(
        home / "cache" / "bundles",
        max_bytes=settings.bundle_cache_bytes,
        http=http,
        prefetch=settings.prefetch_packages,
    )
    fetcher = make_fetcher(settings, host_env, sandbox, direct, ledger)
    review = ToolReview(store, consents)
    lockout_listeners: list[Callable[[str], Any]] = [_log_lockout]
    incident_listeners: list[Callable[[str], Any]] = [_log_incident]
    guard = GuessGuard(
        redactor,
        on_lockout=lambda principal: _lockout_listeners_call(lockout_listeners, principal),
        on_incident=lambda principal: _lockout_listeners_call(incident_listeners, principal),
        # Guesses add up in the database: over a team's replicas, and over a client's sessions here.
        counts=team.guard_counts,
        sync="every call" if team.shared else "first call",
    )
    connections = ConnectionManager(
        store,
        redactor,
        install_root=home / "servers",
        host_env=host_env,
        connect_timeout=settings.probe_timeout_seconds,
        ledger=ledger,
        auth_for=sign_ins.auth_for_installed,
        bundles=bundles,
        logs_dir=home / "logs",
        max_result_chars=settings.max_result_chars,
        sandbox=sandbox,
        fetcher=fetcher,  # a lazy start downloads as a test does
        direct=direct,
        on_tools_changed=review.ask,
        retry_wait=settings.relay_retry_wait_seconds,  # a 2025 server's question waits this long for a 2026 client
        # A server's requests relayed to a client: answers pass the guard as tool arguments do.
        relay_rules=RelayRules(
            redactor,
            check=guard.check,
            holds_secret=guard.holds_secret,
            own_origins=[settings.public_url] if settings.public_url else (),
        ),
    )
    # Incidents and locks reach `mcp-setup approve` in any terminal, which can unblock (the user only).
    locks = PublishedLocks(guard, approvals)
    incident_listeners.append(locks.incident)
    lockout_listeners.append(locks.lockout)
    budget = tools_budget(settings, store)
    service = SetupService(
        refs=refs,
        redactor=redactor,
        broker=broker,
        hub=hub,
        store=store,
        prober=prober,
        connections=connections,
        package_preference=settings.preference or DEFAULT_PREFERENCE,
        which=which,
        http=http,
        scratch_root=scratch,
        user_home=Path.home(),
        consents=consents,
        oauth=sign_ins,
        admit=providers.admit if providers.admission != "off" else None,
        fetcher=fetcher,
        bundle_cache=bundles,
        provided_values={"smithery": api_key} if api_key else None,  # Smithery-hosted remotes' smithery_api_key
        guard=guard,
        budget=budget,  # an install's consent says where its tools leave it
    )
    members = MemberSessions(  # each member's own keys and sessions
        connections,
        root=home / "members",
        ttl_seconds=settings.secret_ttl_seconds,
        wait_seconds=settings.secret_prompt_timeout_seconds,
        # A team's: a member's link may be answered on any replica; the value is stored by the one that gets it.
        replicas=team.member_prompts,
    )
    if feed is not None:
        feed.add_listener(PENDING_CHANNEL, members.prompts.kick)
    gateway = Gateway(
        store,
        connections,
        redactor,
        eager=True,
        call_timeout=settings.probe_timeout_seconds,
        idle_stop_seconds=settings.idle_stop_seconds,
        check_arguments=guard.check,
        members=members,
        lockout_listeners=lockout_listeners,
        incident_listeners=incident_listeners,  # a face adds its own (the page, the terminal)
        budget=budget,
    )
    tool_registry = ToolRegistry(
        servers=store.servers.list,
        status=connections.status,
        archetypes=load_archetypes,
        providers=providers,
        redactor=redactor,
        version=service_version(),
        policy={"consent": settings.consent},
    )
    tool_registry.add_diagnostics("audit", store.audit.counts)  # rows per event, never values
    tool_registry.add_diagnostics("audit_chain", store.audit.chain)  # rows, broken links, last hash
    tool_registry.add_diagnostics("sandbox", lambda: {"mechanism": sandbox.mechanism, "setting": sandbox.mode})
    return Runtime(
        settings,
        refs,
        redactor,
        broker,
        hub,
        vault,
        store,
        prober,
        connections,
        service,
        http,
        gateway,
        consents=consents,
        sign_ins=sign_ins,
        providers=providers,
        tool_registry=tool_registry,
        review=review,
        approvals=approvals,
        guard=guard,
        shared_refs=team.shared_refs,
        shared_capabilities=team.capabilities,
        shared_approvals=team.approvals,
        feed=feed,
    )


def tools_budget(settings: Settings, store: Store) -> ToolsBudget:
    """The context budget: ``MCP_SETUP_TOOLS_BUDGET`` when set for this process, else the one the
    person saved on the page, else the default (setup_agent/gateway/budget.py)."""
    override = settings.tools_budget if "tools_budget" in settings.model_fields_set else None
    return ToolsBudget(
        store.preferences, default=type(settings).model_fields["tools_budget"].default, override=override
    )


@dataclass(frozen=True)
class TeamBackends:
    """The parts that differ on a team's database, chosen once by its dialect: each is the shared
    implementation of its seam on PostgreSQL (any replica serves any step), this process's own
    (or None where nothing is shared) on SQLite."""

    shared: bool
    refs: SecretRefStore  # refs any replica resolves, or this process's memory (lost at restart)
    consents: ConsentSharing  # approvals remembered, a retry waiting on the consent pending, or one data dir's
    prompts_elsewhere: PromptsElsewhere | None  # the prompts of other replicas, answered here
    member_prompts: MemberPromptReplicas  # a member's link answerable here only, or on any replica
    sign_ins: SharedSignIns | None  # a sign-in's redirect may reach any replica
    guard_counts: GuardCounts  # refused calls added up over every replica, or every session here
    shared_refs: SharedRefs | None = None
    capabilities: SharedCapabilities | None = None  # link keys any replica checks
    approvals: SharedApprovals | None = None  # the user's approvals, remembered


def _team_backends(
    store: Store,
    vault: Vault,
    approvals: PendingApprovals,
    *,
    ttl_seconds: float,
    refs_timer: Callable[[], float] | None,
) -> TeamBackends:
    ref_options: dict[str, Any] = {"ttl_seconds": ttl_seconds, **({"timer": refs_timer} if refs_timer else {})}
    if store.database.engine.dialect.name != "postgresql":
        return TeamBackends(
            shared=False,
            refs=SecretRefStore(**ref_options),
            consents=StoreConsents(approvals, ttl_seconds=ttl_seconds),
            prompts_elsewhere=None,
            member_prompts=OnlyHere(),
            sign_ins=None,
            guard_counts=SharedGuardCounts(store),  # a client's guesses add up over its sessions
        )
    shared_refs = SharedRefs(store, vault)
    remembered = SharedApprovals(store)
    return TeamBackends(
        shared=True,
        refs=SharedRefStore(shared_refs, **ref_options),
        consents=TeamConsents(approvals, remembered, ttl_seconds=ttl_seconds),
        prompts_elsewhere=ReplicaPrompts(approvals, vault, shared_refs, ttl_seconds=ttl_seconds),
        member_prompts=MemberPromptsElsewhere(approvals, store),
        sign_ins=SharedSignIns(store, vault),
        guard_counts=SharedGuardCounts(store),
        shared_refs=shared_refs,
        capabilities=SharedCapabilities(store),
        approvals=remembered,
    )


def _log_incident(_principal: str) -> None:
    # The first refused call is already an incident (an agent never holds a stored secret): the
    # user hears of it at once, out of band. Never the agent.
    logger.warning(
        "An agent sent a value that mcp-setup protects in its tool arguments (a guess at a secret?). "
        "The call was refused; one more and its tool calls are blocked until you unblock them."
    )


def _log_lockout(session: str) -> None:
    # Out of band for the user: the face's log (Claude Desktop and others show a server's
    # stderr), and, in `serve`, a page notice (app/web/app.py adds a listener). Never the agent.
    logger.warning(
        "An agent sent values that mcp-setup protects in its tool arguments several times (a guessing attempt?). "
        "Its tool calls are now refused until you unblock it (`mcp-setup approve` in a terminal, or a restart)."
    )


def _lockout_listeners_call(listeners: list[Callable[[str], Any]], session: str) -> None:
    for listener in list(listeners):
        try:
            listener(session)
        except Exception:  # noqa: BLE001 - one broken listener never hides the others
            logger.exception("lockout listener failed")
