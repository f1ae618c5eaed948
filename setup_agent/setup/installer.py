"""Test and install, step by step: a test prepares the launch, asks the user's consent, runs
the download phase and probes the server (parking a passing session for its install); an
install does the same under a lock per server name (or adopts the parked session), writes the
store in one transaction and connects. Any failure before the commit leaves no rows and no
install dir, and releases the refs it claimed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets as _random
import shutil
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from setup_agent.errors import DownloadTimeout, ProbeError
from setup_agent.gateway import ConnectionManager, ToolsBudget, estimated_tokens, stored_catalog
from setup_agent.launch import (
    ArtifactDigests,
    Fetcher,
    StderrLines,
    claim_dir,
    explain_failure,
    make_scratch_dir,
    seen_destinations,
)
from setup_agent.oauth import GRANT_KEY
from setup_agent.principals import asker_words
from setup_agent.secrets import Redactor, SecretRefStore
from setup_agent.store import Store, context_cost, relabel, sampling_of

from .adoption import Keep, Parked
from .bundle_manifests import BundleManifests
from .call_context import CallContext, Progress
from .consent import ConsentBroker, ConsentDecision, build_consent_request, obtain_consent
from .consent_choices import choices_for
from .per_member import per_member_keys
from .preparation import Prepared, Preparer
from .probe import Prober, ProbeResult, StageHook
from .sandbox_choice import apply_sandbox_choice
from .shared_consents import consent_requester
from .tool_requests import InstallRequest, TestRequest
from .tool_specs import FACE_TOKENS

__all__ = ["Installer"]

_TESTED_KEPT = 64  # launches whose tested tools an install's consent can show

#: Why a file of the home its command line names is not readable with consent off, and how to grant it.
KEPT_HOME = (
    "It cannot read {files}: its command line names them, but they are in the person's home folder and, "
    "with consent off (MCP_SETUP_CONSENT=never-ask), nobody let it. To let it, the person turns consent on "
    "(MCP_SETUP_CONSENT=ask), installs it again (removing it first if it is installed) and ticks them in "
    "the consent."
)


def kept_home(prepared: Prepared) -> dict[str, Any]:
    """A result's ``home_files_kept`` (none when nothing was kept)."""
    if not prepared.kept_home_files:
        return {}
    files = prepared.kept_home_files
    return {"home_files_kept": {"files": files, "message": KEPT_HOME.format(files=", ".join(files))}}


@dataclass(kw_only=True, eq=False)
class Installer:
    """Runs ``mcp_setup_test_connection`` and ``mcp_setup_install_and_connect``."""

    refs: SecretRefStore
    redactor: Redactor
    store: Store
    prober: Prober
    connections: ConnectionManager
    preparer: Preparer
    manifests: BundleManifests
    consents: ConsentBroker | None = None  # None: no consent step (a core used without a face)
    fetcher: Fetcher | None = None  # None: no download phase (the probe's deadline covers the download)
    scratch_root: Path | None = None
    #: The registry's digest of the artifact, recorded at install (None: not recorded).
    digests: ArtifactDigests | None = None
    #: The context budget, which an install's consent weighs the server's tools against (None: not said).
    budget: ToolsBudget | None = None
    # One lock per server name: two installs of the same name never race, and a server
    # that hangs in its test holds up no other install.
    _install_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = field(
        default_factory=weakref.WeakValueDictionary, init=False, repr=False
    )
    #: The tools a passing test listed (redacted), by its consent's fingerprint: the install of
    #: the same launch shows them in its consent, to be unticked. Bounded.
    _tested_tools: dict[str, list[dict[str, Any]]] = field(default_factory=dict, init=False, repr=False)
    #: What a passing test's proxy saw, by the same fingerprint: the install's consent lists it.
    _tested_net: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    async def test(self, request: TestRequest, ctx: CallContext) -> dict:
        progress = Progress(ctx, self.redactor, "mcp_setup_test_connection", request.qualified_name)
        # An install may adopt the tested process: it then runs in a reserved install dir.
        reserved = self.connections.install_dir("srv_" + _random.token_hex(6)) if self.prober.parking.enabled else None
        workdir = reserved or make_scratch_dir(self.scratch_root, "test")
        parked = False
        try:
            if reserved is not None:
                await asyncio.to_thread(claim_dir, reserved)
            prepared = await self.preparer.prepare(request, workdir, progress, oauth_ref=request.oauth_ref)
            if ctx.check_prepared is not None:
                await ctx.check_prepared(prepared)
            launch = await self._consent(prepared, ctx, "test")
            self._answered(prepared, request.env_refs)  # asked after the consent: the person saw what runs first
            result = await self._probe(prepared, progress, keep=reserved)
            parked = result.parked  # the parked session owns its dir now
            self._remember_tools(launch, result.tools, result.net)
        except BaseException as exc:
            await progress.failed(exc)
            raise
        finally:
            if not parked:
                await asyncio.to_thread(shutil.rmtree, workdir, True)
        return {
            "ok": True,
            "tools": result.tools,
            "context": context_cost(result.tools, label=prepared.detail.display_name or ""),
            "package": prepared.package.id,
            "version": prepared.package.version,
            "protocol_version": result.protocol_version,
            # Whether the key itself was checked (a read-only call), or said plainly that it was not.
            **({"key_check": result.key_check.to_dict()} if result.key_check is not None else {}),
            **kept_home(prepared),
        }

    async def install(self, request: InstallRequest, ctx: CallContext, *, replaces: str | None = None) -> dict:
        """``replaces``: the installed server id this install replaces in its commit (``mcp-setup
        update``, never an agent's argument): it stays installed until then."""
        progress = Progress(ctx, self.redactor, "mcp_setup_install_and_connect", request.qualified_name)
        try:
            return await self._install(request, ctx, progress, replaces)
        except BaseException as exc:
            await progress.failed(exc)
            raise

    def _install_lock(self, name: str) -> asyncio.Lock:
        lock = self._install_locks.get(name)
        if lock is None:
            lock = self._install_locks[name] = asyncio.Lock()
        return lock

    async def _install(
        self, request: InstallRequest, ctx: CallContext, progress: Progress, replaces: str | None
    ) -> dict:
        name = request.qualified_name
        async with self._install_lock(name):
            await self.preparer.refuse_installed(name, replaces)  # again, now that no other install of it runs
            server_id = "srv_" + _random.token_hex(6)
            install_dir = self.connections.install_dir(server_id)
            # Reserve the refs first: a concurrent install cannot use them too;
            # a failure releases them so they stay usable.
            env_refs = request.env_refs
            claim = self.refs.claim(env_refs)
            adopted: Parked | None = None
            try:
                await asyncio.to_thread(claim_dir, install_dir)  # owner-marked: a crash's debris is swept
                prepared = await self.preparer.prepare(
                    request,
                    install_dir,
                    progress,
                    oauth_ref=request.oauth_ref,
                    lazy_bundle=self.prober.parking.enabled,
                    replacing=replaces,
                )
                member_keys = per_member_keys(
                    request.per_member, {n for k in prepared.keys for n in (k.name, *k.aliases)} | set(prepared.values)
                )
                if ctx.check_prepared is not None:
                    await ctx.check_prepared(prepared)
                consented = await self._consent(prepared, ctx, "install", update=replaces is not None)
                self._answered(prepared, env_refs)  # asked after the consent: the person saw what runs first
                hidden = self.left_out(consented) | ctx.left_out
                sampling = sampling_of((consented[1].choices if consented[1] is not None else {}).get("sampling"))
                adopted = self._adopt(prepared)
                if adopted is not None:  # the tested process goes on, in the dir it was tested in
                    await asyncio.to_thread(shutil.rmtree, install_dir, True)
                    server_id, install_dir, result = adopted.server_id, adopted.workdir, adopted.result
                    # The tools the tested process listed: a face shows them as for a fresh start.
                    await progress(
                        "tools_listed",
                        "done",
                        tools=[{"name": t["name"], "description": t["description"]} for t in result.tools],
                    )
                else:
                    if prepared.spec.needs_install_dir and prepared.bundle_dir is None:  # lazy, not adopted
                        prepared.bundle_dir, _ = await self.manifests.fetch(
                            prepared.package, install_dir, progress, allow_file=prepared.detail.source == "local"
                        )
                    result = await self._probe(prepared, progress)
                await progress("installing", "started")
                # A value that came through a secret prompt (a ref) is secret for life, whatever
                # the registry says: stored as secret, so every connect hides it.
                secret_keys = {n for k in prepared.keys if k.secret for n in (k.name, *k.aliases)} | set(env_refs)
                # Hidden while the refs are still live: after consume only a connect knows the values.
                probed_tools = self.redactor.redact_obj(result.tools)
                pin = relabel(probed_tools, {ref: f"[secret:{key}]" for key, ref in env_refs.items()})
                if ctx.check_tools is not None:
                    await ctx.check_tools(pin)
                digest = None  # the registry's digest of what ran: what a lock file records
                if self.digests is not None:
                    digest = await self.digests.resolve(prepared.spec, prepared.package.registry_base_url)
                env = {k: (v, k in secret_keys) for k, v in prepared.values.items()}
                if prepared.auth is not None:  # the sign-in as it is now (the test may have renewed it)
                    env[GRANT_KEY] = (prepared.auth.grant.model_dump_json(), True)
                self.connections.expect(server_id)  # a store sync must not start it meanwhile
                server = await asyncio.to_thread(
                    self.store.servers.install,
                    server_id=server_id,
                    qualified_name=prepared.detail.qualified_name,
                    source=prepared.detail.source,
                    version=prepared.package.version or prepared.detail.version,
                    package_type=prepared.package.type,
                    launch_spec=prepared.spec.model_dump(mode="json"),
                    installed_by=ctx.installed_by,
                    audited_as=ctx.audited_as,
                    tools_hash=result.tools_hash,
                    env=env,
                    title=prepared.detail.display_name,
                    tools=pin,
                    replaces=replaces,
                    member_keys=member_keys,  # each member's own
                    artifact_digest=digest,
                    hidden_tools=sorted(hidden),  # unticked in the consent: stored with the pin
                    sampling=sampling,  # may it ask the person's AI to write text (the consent's choice)
                )
            except BaseException:
                self.refs.release(claim)
                self.connections.expect(server_id, False)
                if adopted is not None:
                    await adopted.close()
                await asyncio.to_thread(shutil.rmtree, install_dir, True)
                raise
            used = {**env_refs, **({GRANT_KEY: request.oauth_ref} if request.oauth_ref and prepared.auth else {})}
            self.refs.consume(used)
        await progress("installing", "done", server_id=server.server_id)
        status = await self.connections.connect(server, adopt=adopted)
        await progress("connected", "done" if status.status == "connected" else "failed", server_id=server.server_id)
        tools = status.tools or probed_tools
        out: dict[str, Any] = {
            "server_id": server.server_id,
            "status": status.status,
            "tools": [t for t in tools if t.get("name") not in hidden],
        }
        out["context"] = context_cost(out["tools"], server.slug, server.title or "")  # what its tools cost a client
        out.update(kept_home(prepared))
        if left := sorted(n for n in hidden if any(t.get("name") == n for t in tools)):
            out["left_out_by_user"] = left  # the user unticked them: neither listed nor callable
            out["context"]["left_out_by_user"] = len(left)
        if status.reason:
            out["reason"] = status.reason
        return out

    async def _budget_now(self) -> dict[str, int] | None:
        """The budget and what every face lists now (mcp-setup's own tools, then every installed
        one), for the consent's line; None without a budget to weigh against."""
        if self.budget is None:
            return None
        catalog = await asyncio.to_thread(stored_catalog, self.store)
        return {"budget": self.budget.current.tokens, "listed": FACE_TOKENS + estimated_tokens(catalog.wire_tools())}

    def _answered(self, prepared: Prepared, env_refs: dict[str, str]) -> None:
        """A key whose prompt the person has not answered yet stops the call here, after its
        consent: the consent showed what will run with it, before the key is asked."""
        if prepared.unanswered:
            self.refs.resolve({k: r for k, r in env_refs.items() if k in prepared.unanswered})  # SecretPending

    async def _consent(
        self, prepared: Prepared, ctx: CallContext, action: str, *, update: bool = False
    ) -> tuple[str, ConsentDecision | None]:
        """The user's out-of-band approval; their destination settings replace the agent's.
        Returns the launch's fingerprint (without tools) and the decision (None: consent off).
        One approval per install: a test's consent also approves the install of the same launch
        (its choices, such as sampling, are asked there), which then keeps every tool the test
        listed, to be left out later on the server's card or with ``mcp-setup disable --tool``.
        An install whose test approval is gone (expired) asks anew, showing the tested tools."""

        sandbox = self.prober.sandbox
        net_mechanism = sandbox.network_isolation().mechanism if sandbox is not None else "none"
        budget = await self._budget_now()

        def request_for(tools: list[dict[str, Any]], tested: Any = None) -> Any:
            return build_consent_request(
                server=prepared.detail.qualified_name,
                version=prepared.package.version or prepared.detail.version,
                spec=prepared.spec,
                keys=prepared.keys,
                values=prepared.plain_values(),  # a secret's value is never part of a consent
                action=action,
                warnings=prepared.warnings(),
                sandbox=sandbox.mechanism if sandbox is not None else "none",
                tools=tools,
                user_home=str(home)
                if self.prober.sandbox is not None and (home := self.prober.sandbox.user_home)
                else None,
                net_mechanism=net_mechanism,
                tested=tested,
                asker=asker_words(ctx.asked_by or ctx.installed_by),
                update=update,
                covers_install=action == "test",
                budget=budget,
            )

        request = request_for([])
        launch = request.fingerprint
        if action == "install" and (tested := self._tested_tools.get(launch)):
            earlier = self.consents.decision(request) if self.consents is not None and self.consents.ask else None
            if earlier is not None:  # one approval per install: the test's, with its destinations and widening
                return self._approved(prepared, ctx, launch, earlier)
            request = request_for(tested, self._tested_net.get(launch))  # asked anew, with the tested tools
        # The choices an install asks (answers, not what is approved); a test's approval that
        # covers the install asks them there.
        request = dataclasses.replace(request, choices=choices_for("install" if request.covers_install else action))
        with consent_requester(ctx.principal or ctx.installed_by):  # a team's replicas: one consent per asker
            decision = await obtain_consent(self.consents, request, ctx.present_consent)
        return self._approved(prepared, ctx, launch, decision, action, home_files=request.home_files)

    def _approved(
        self,
        prepared: Prepared,
        ctx: CallContext,
        launch: str,
        decision: ConsentDecision | None,
        action: str = "install",
        *,
        applied: bool = False,
        home_files: Sequence[str] = (),
    ) -> tuple[str, ConsentDecision | None]:
        """Apply the person's ``decision`` (None: consent off) to the launch (``applied``: it was);
        ``home_files``: the files of the person's home its command line names."""
        if decision is not None and not applied:
            self._apply(prepared, decision)
        if decision is None:  # nobody was asked: a file of the home it names stays unbound, and the result says so
            prepared.kept_home_files = [f for f in home_files if f not in prepared.spec.sandbox_reads]
        if action == "install" and (net := self._tested_net.get(launch)) is not None:  # `show` says what it used
            seen = {"seen": seen_destinations(net.attempts())}
            prepared.spec = prepared.spec.model_copy(update={"sandbox_net": {**prepared.spec.sandbox_net, **seen}})
        # An approval means the user accepted every warning shown (the broker insists on it).
        prepared.refuse_argv_secrets(ctx, consented=decision is not None)
        return launch, decision

    def _apply(self, prepared: Prepared, decision: ConsentDecision) -> None:
        prepared.values.update(decision.settings)
        prepared.spec = apply_sandbox_choice(prepared.spec, decision.sandbox)  # the user's widening, stored
        self.preparer.refuse_foreign_destination(prepared.keys, prepared.values, prepared.spec)  # edited there too

    @staticmethod
    def left_out(consented: tuple[str, ConsentDecision | None]) -> frozenset[str]:
        """The tools the user unticked in the consent (its decision only: no agent argument)."""
        decision = consented[1]
        return decision.hidden_tools if decision is not None else frozenset()

    def _remember_tools(self, consented: tuple[str, Any], tools: list[dict[str, Any]], net: Any = None) -> None:
        launch = consented[0]
        self._tested_tools.pop(launch, None)
        self._tested_tools[launch] = self.redactor.redact_obj(tools)
        self._tested_net.pop(launch, None)
        if net is not None:
            self._tested_net[launch] = net
        while len(self._tested_tools) > _TESTED_KEPT:
            self._tested_net.pop(next(iter(self._tested_tools)), None)
            self._tested_tools.pop(next(iter(self._tested_tools)))

    def _adoption_key(self, prepared: Prepared) -> str:
        version = prepared.package.version or prepared.detail.version
        spec = prepared.spec.model_dump(mode="json")
        spec["sandbox_net"] = {k: v for k, v in spec["sandbox_net"].items() if k != "seen"}  # words, not policy
        return self.prober.parking.key(prepared.detail.qualified_name, version, spec, prepared.values)

    def _adopt(self, prepared: Prepared) -> Parked | None:
        """The session a passing test of exactly this left running, if any."""
        if not self.prober.parking.enabled or prepared.auth is not None:
            return None
        return self.prober.parking.adopt(self._adoption_key(prepared))

    async def _fetch(self, prepared: Prepared, progress: Progress) -> None:
        """The download phase: its own deadline and progress; the start's deadline
        then counts from its end. A fetch whose runner said why it failed (no network, no such
        package…) is ``download_failed`` at once; one that failed otherwise lets the start say why."""
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
        if state is not None and (error := state.error()) is not None:
            raise error  # the runner named why: the step fails now, not the start after it
        await progress("downloading", "done", **({"fetched": state.fetched, "ok": state.ok} if state else {}))

    async def _probe(self, prepared: Prepared, progress: Progress, keep: Path | None = None) -> ProbeResult:
        await self._fetch(prepared, progress)

        # While it starts, the page shows the time spent against the deadline and the server's
        # latest stderr line, redacted.
        async def on_stage(stage: str, status: str) -> None:
            late: dict[str, object] = (
                {"deadline_seconds": self.prober.timeout} if (stage, status) == ("starting", "started") else {}
            )
            if stage == "queued":
                late = {
                    "message": f"Waiting for another test to finish (at most {self.prober.max_concurrent} run at once)."
                }
            await progress(stage, status, **late)

        async def on_line(line: str) -> None:
            if progress.stage == "starting":  # lines after the handshake are not "while it starts"
                await progress("starting", "output", stderr_line=line)

        lines = StderrLines(on_line, self.redactor.redact)
        try:
            result = await self._probe_explained(prepared, on_stage, lines, keep)
        finally:
            lines.close()
        checked = {"key_check": result.key_check.to_dict()} if result.key_check is not None else {}
        await progress(
            "tools_listed",
            "done",
            tools=[{"name": t["name"], "description": t["description"]} for t in result.tools],
            **checked,
        )
        return result

    async def _probe_explained(
        self, prepared: Prepared, on_stage: StageHook, lines: StderrLines, keep: Path | None
    ) -> ProbeResult:
        """The probe; a failed start says what was launched, which part failed, and a known repair."""
        try:
            return await self.prober.probe(
                prepared.spec,
                prepared.values,
                dirname=str(prepared.bundle_dir) if prepared.bundle_dir else None,
                on_stage=on_stage,
                on_stderr=lines,
                keep=Keep(self._adoption_key(prepared), keep) if keep is not None else None,
                auth=prepared.auth,
            )
        except ProbeError as exc:
            explain_failure(exc, prepared.spec, prior=prepared.repair)
            raise
