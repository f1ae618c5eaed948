"""The download phase: fetch a server's package into its runner's own cache before it starts.

A first ``npx``/``uvx``/``docker`` run downloads the package (and its dependencies) before
the server even starts, which can take longer than the probe's deadline. :class:`Fetcher`
runs that download as a step of its own, with its own deadline (``download_timeout``,
``MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS``) and progress (elapsed seconds, packages or layers
fetched); the probe's start deadline then counts from the end of the download, against a
warm cache. What it runs fills only the runner's cache, never an install dir:

- npm: ``npm exec --yes --prefer-offline --package=<spec> --call :`` (what ``npx -y <spec>`` would
  install, into the same ``_npx`` cache entry; ``--registry`` kept);
- PyPI: ``uvx --from <spec> python -c <print sys.prefix>`` (uv's cache; ``--default-index`` kept);
- OCI: ``docker pull <image>``.

MCPB bundles are downloaded (and sha256-checked) by the service itself (setup_agent/launch/bundle.py),
and prefetched into setup_agent/launch/bundle_cache.py.

A *prefetch* (before the user consented) may download but never run the package's code
(:func:`prefetch_plan`): npm without install scripts, PyPI wheels only (``uv pip install
--no-build --target <throw-away dir>``, into the same uv cache the later ``uvx`` reads; a
package that needs an sdist build is not prefetched), OCI by ``docker pull``.

A fetch that fails changes nothing. When the runner's output names why (setup_agent/launch/fetch_errors.py:
nothing answers, no such host, a certificate, no such package…) the fetch stops at that line, even
while the runner would still retry, and the caller reports it as ``download_failed``; otherwise the
server's own start reports what is wrong. A fetch that succeeded is remembered for the life of the process (no second check), and a fetch of
the same package already running (a prefetch) is joined, not repeated.
:meth:`Fetcher.prefetch` starts one in the background (when a secret prompt opens, or when
``get`` names the package an install would choose).

Every run happens in a private scratch dir of its own (under ``workdir``: ``<home>/scratch``), holding a
bare ``package.json`` and ``uv.toml`` so that neither npm nor uv reads settings from a dir above
it (``/tmp`` is writable by every local user). A prefetch that made npx's cache entry and then
failed, or was cancelled, removes that entry (only its own: npx names it by the spec's sha512);
after a crash, start-up does (the scratch dir lists it, setup_agent/launch/scratch.py), and ends the
fetch's process group (recorded in the process ledger, setup_agent/launch/procs.py).

The fetch sees the host's allowlisted environment only (never a server's values), and sandboxed
the credentials of its own registries (setup_agent/launch/registry_credentials.py), which its
output is scrubbed of; its output is not shown (it may still be logged after redaction by the caller).
Where servers are sandboxed, so is the fetch (setup_agent/launch/fetch_sandbox.py): its own
network namespace behind mcp-setup's proxy, to its runner's package registries only, writing
only its private dir and the cache it fills; :attr:`FetchState.refused` lists what else it tried.

A fetch that worked notes where its runner installed the package (``direct.py``: npx's cache
entry, the prefix of uv's environment), so that a start runs the server's own program with no
runner left beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from setup_agent.errors import SandboxUnavailable

from .direct import DirectStarts
from .fetch_errors import DownloadFailure, download_failed, for_a_login, from_registry, read_failure, through_the_proxy
from .fetch_plans import PREFIX, PREFIX_MARK, FetchPlan, fetch_plan, npx_entry_name, prefetch_plan
from .fetch_sandbox import download_launch
from .procs import ProcessLedger
from .registries import npm_registries
from .runners import find_runner, runner_env
from .sandbox import Sandbox
from .scratch import ALSO_REMOVE, make_scratch_dir
from .spec import LaunchSpec
from .transport import minimal_environment

__all__ = ["FetchPlan", "FetchState", "Fetcher", "fetch_plan", "npx_entry_name", "prefetch_plan"]

logger = logging.getLogger(__name__)

#: ``await hook(elapsed_seconds, fetched)`` about once a second while a download runs.
FetchHook = Callable[[float, int], Awaitable[None]]

#: A line of the fetch's output that means one more package (npm, uv) or layer (docker) arrived.
_FETCHED = {
    "npx": re.compile(rb"http fetch GET 200 "),
    "uvx": re.compile(rb"^\s*Downloaded "),
    "docker": re.compile(rb"(?:Pull complete|Already exists)"),
}
#: A line that says how many packages a run fetched in all (uv: ``uvx`` prints no line per package,
#: ``Downloaded`` only for large files): the count is at least that.
_FETCHED_IN_ALL = {"uvx": re.compile(rb"^\s*(?:Prepared|Installed) (\d+) packages?\b")}


@dataclass
class FetchState:
    """One fetch, shared by whoever waits for it."""

    started: float
    package: tuple[str, ...] = ()
    plan: FetchPlan | None = None
    fetched: int = 0
    ok: bool | None = None
    returncode: int | None = None
    tail: bytes = b""
    #: What the runner said failed (the first final cause, else the last one it named).
    failure: DownloadFailure | None = None
    #: Destinations the sandboxed download tried and the proxy refused (not its registries).
    refused: tuple[str, ...] = ()
    #: Where the runner installed it, as it said (uv: its environment's prefix).
    installed: Path | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def error(self) -> Exception | None:
        """The ``download_failed`` error of a fetch that failed for a reason its runner named
        (None: it worked, or the runner named none and the start will say what is wrong)."""
        if self.ok is not False or self.failure is None or self.plan is None:
            return None
        return download_failed(self.plan.runner, self.package, self.failure, self.tail.decode(errors="replace"))


class Fetcher:
    """Runs download phases; remembers what is warm; joins a fetch already under way."""

    def __init__(
        self,
        *,
        host_env: Mapping[str, str] | None = None,
        timeout: float = 300.0,
        which: Callable[[str], str | None] | None = None,
        tick: float = 1.0,
        prefetch: bool = True,
        workdir: Path | None = None,
        ledger: ProcessLedger | None = None,
        sandbox: Sandbox | None = None,
        direct: DirectStarts | None = None,
    ) -> None:
        self.host_env = host_env
        #: Where a fetch that worked notes what its runner installed (None: nowhere; starts keep the runner).
        self.direct = direct
        #: The sandbox each download runs in (``fetch_sandbox.py``), as servers do; None: none.
        self.sandbox = sandbox
        #: Where each run gets a private scratch dir (0700, with a bare package.json) to run in:
        #: never a shared dir like /tmp, whose ``.npmrc`` or ``uv.toml`` another local user could
        #: write. The runtime gives its scratch root, which start-up sweeps after a crash.
        self.workdir = workdir
        #: Each fetch's process group is recorded here, so that start-up ends it after a crash.
        self.ledger = ledger
        self.prefetch_enabled = prefetch
        self.timeout = timeout
        self.tick = tick
        self._which = which
        self._warm: set[tuple[str, ...]] = set()
        self._npx_cache: Path | None = None  # npm's answer, asked once (host_env does not change)
        self._running: dict[tuple[str, ...], tuple[FetchState, asyncio.Task[None]]] = {}

    def is_warm(self, spec: LaunchSpec) -> bool:
        plan = fetch_plan(spec)
        return plan is None or self._warmed(plan)

    def _warmed(self, plan: FetchPlan) -> bool:
        """Fetched by this process, and what it installed is still there: a cache entry pruned
        since (noted, and gone) is fetched again, so the start finds it (``direct.py``)."""
        if plan.key not in self._warm:
            return False
        noted = self.direct.noted(plan.key) if self.direct is not None else None
        if noted is not None and not noted.exists():
            self._warm.discard(plan.key)
            return False
        return True

    def start_ready(self, spec: LaunchSpec) -> bool:
        """Can a start of ``spec`` in a process that fetched nothing itself (``mcp-setup run``)
        go ahead without a download? Yes when there is nothing to fetch, or a download noted what
        its runner installed and that is still there (``direct.py``); no when the note is missing
        (never fetched on this machine) or what it names was pruned: the runner would fetch it
        again at the start, outside the download's sandbox and without the registry's login,
        which only the download is given (``registry_credentials.py``)."""
        plan = fetch_plan(spec)
        if plan is None or self.direct is None:
            return True
        noted = self.direct.noted(plan.key)
        return noted is not None and noted.exists()

    def prefetch(self, spec: LaunchSpec) -> bool:
        """Start filling the runner's cache for ``spec`` in the background (nothing of the package
        runs: :func:`prefetch_plan`); True when one was started or already runs. A failure is
        only logged: the test that follows fetches (and reports) as if there had been none."""
        if not self.prefetch_enabled:
            return False
        plan = prefetch_plan(spec)
        full = fetch_plan(spec)
        if plan is None or full is None or full.key in self._warm or plan.key in self._warm or not self._runnable(plan):
            return False
        self._start(plan)
        return True

    async def fetch(self, spec: LaunchSpec, on_tick: FetchHook | None = None) -> FetchState | None:
        """Download ``spec``'s package (or join the download under way), up to ``timeout``.

        Returns the finished state (``ok`` True only when the runner said it worked; when it
        failed, :meth:`FetchState.error` is the cause the runner named, if any), or None when
        there was nothing to fetch. Raises TimeoutError past the deadline (the fetch
        is stopped; a later try resumes from what the cache has)."""
        plan = fetch_plan(spec)
        if plan is None or self._warmed(plan) or not self._runnable(plan):
            return None
        ahead = next(
            (st for (st, _t) in self._running.values() if st.package == plan.package and st.plan is not plan), None
        )
        if ahead is not None:  # a prefetch of this package runs: the fetch goes on from where it is
            await self._wait(ahead, None, ahead.started + self.timeout, on_tick, ahead.started)
            if ahead.failure is not None and ahead.failure.final:
                return ahead  # the registry already said no: asking again at once changes nothing
        state, task = self._start(plan)
        return await self._wait(
            state, task, state.started + self.timeout, on_tick, ahead.started if ahead else state.started
        )

    async def _wait(
        self, state: FetchState, task: asyncio.Task[None] | None, end: float, on_tick: FetchHook | None, since: float
    ) -> FetchState:
        loop = asyncio.get_running_loop()
        while not state.done.is_set():
            remaining = end - loop.time()
            if remaining <= 0:
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                raise TimeoutError
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self.tick, remaining)):
                    await state.done.wait()
            if not state.done.is_set() and on_tick is not None:
                try:
                    await on_tick(loop.time() - since, state.fetched)
                except Exception:  # a progress listener never breaks a fetch
                    logger.exception("fetch progress hook failed")
        return state

    async def settled(self) -> None:
        """Wait until no fetch runs (callers bound it)."""
        while self._running:
            await asyncio.gather(*(task for _s, task in list(self._running.values())), return_exceptions=True)

    async def aclose(self) -> None:
        tasks = [task for _state, task in self._running.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _runnable(self, plan: FetchPlan) -> bool:
        if self._which is None:
            return True
        return self._which(plan.argv[0]) is not None

    def _start(self, plan: FetchPlan) -> tuple[FetchState, asyncio.Task[None]]:
        running = self._running.get(plan.key)
        if running is not None:
            return running
        state = FetchState(started=asyncio.get_running_loop().time(), package=plan.package, plan=plan)
        task = asyncio.create_task(self._run(plan, state), name=f"mcp-setup-fetch-{plan.runner}")
        self._running[plan.key] = (state, task)
        return state, task

    async def _run(self, plan: FetchPlan, state: FetchState) -> None:
        work = await asyncio.to_thread(self._private_dir)
        entry: Path | None = None  # npx's cache entry this prefetch makes (None: it existed, or no npm)
        try:
            if plan.settles_npx_entry:
                npx_dir = await self._npx_dir(work)
                if npx_dir is None:  # without it the entry could not be checked: no prefetch
                    state.ok = False
                    return
                mine = npx_dir / npx_entry_name(plan.package[-1])
                entry = None if mine.exists() else mine
                if entry is not None:  # made without its scripts: a crash before settling leaves it to the sweep
                    await asyncio.to_thread((work / ALSO_REMOVE).write_text, f"{entry}\n")
            state.returncode = await self._exec(plan, state, str(work))
            state.ok = state.returncode == 0
            if state.ok:
                self._warm.add(plan.key)
                if entry is None or await asyncio.to_thread(_settle_npx_entry, entry):
                    if plan.warms is not None:  # npx's entry is made (no install script): nothing left to fetch
                        self._warm.add(plan.warms)
                    await self._note(plan, state, work)
                entry = None
            else:
                logger.info("%s fetch exited with code %s; the start will tell", plan.runner, state.returncode)
        except asyncio.CancelledError:
            state.ok = False
            raise
        except OSError as exc:
            state.ok = False
            logger.info("%s fetch could not run: %s", plan.runner, type(exc).__name__)
        except SandboxUnavailable as exc:  # a forced sandbox that does not work: no download, as no start
            state.ok = False
            logger.info("%s fetch not run: %s", plan.runner, exc.message)
        finally:
            self._running.pop(plan.key, None)
            if entry is not None:  # failed or cancelled: a half-made entry without its scripts goes
                await asyncio.to_thread(shutil.rmtree, entry, True)
            await asyncio.to_thread(shutil.rmtree, work, True)
            state.done.set()

    async def _note(self, plan: FetchPlan, state: FetchState, work: Path) -> None:
        """Note where the runner installed what ``plan`` fetched (``direct.py``); never fails the fetch."""
        if self.direct is None:
            return
        key, where = plan.warms or plan.key, state.installed
        if plan.runner == "npx":
            npx_dir = await self._npx_dir(work)
            where = npx_dir / npx_entry_name(plan.package[-1]) if npx_dir is not None else None
        if where is None:
            return
        try:
            await asyncio.to_thread(self.direct.note, key, where)
        except OSError as exc:
            logger.info("could not note where the %s package is: %s", plan.runner, type(exc).__name__)

    def _private_dir(self) -> Path:
        if self.workdir is not None:
            self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        work = make_scratch_dir(self.workdir, "fetch")
        (work / "package.json").write_text('{"private": true}\n')  # npm's project root stops here
        (work / "uv.toml").write_text("")  # and uv's search for a project's settings
        return work

    async def _npx_dir(self, cwd: Path) -> Path | None:
        """npx's cache entries (``<npm cache>/_npx``), as npm itself reports its cache (``.npmrc``
        included); in a sandbox, the cache it is given (the one servers are shown)."""
        if self._npx_cache is not None:
            return self._npx_cache
        sandbox = self.sandbox
        if sandbox is not None and await asyncio.to_thread(lambda: sandbox.mechanism) != "none":
            self._npx_cache = sandbox.caches()["npm_config_cache"] / "_npx"
            return self._npx_cache
        npm, env = self._runner("npm")
        proc = await asyncio.create_subprocess_exec(
            npm,
            "config",
            "get",
            "cache",
            "--workspaces=false",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        out, _ = await proc.communicate()
        cache = out.decode(errors="replace").strip()
        if proc.returncode != 0 or not cache or not os.path.isabs(cache):
            logger.info("npm did not say where its cache is; no prefetch")
            return None
        self._npx_cache = Path(cache) / "_npx"
        return self._npx_cache

    def _runner(self, name: str) -> tuple[str, dict[str, str]]:
        """The ``name`` the server's start will run too (the system's when new enough, else the
        bundled one: setup_agent/launch/runners.py), and the environment to run it in."""
        env = minimal_environment({}, host_env=self.host_env)
        found = find_runner(name, env.get("PATH"))
        return (found, runner_env(env, found)) if found else (name, env)

    async def _exec(self, plan: FetchPlan, state: FetchState, cwd: str) -> int:
        """Run ``plan`` to its end (its whole process group killed if cancelled); its exit code."""
        pattern, in_all = _FETCHED.get(plan.runner), _FETCHED_IN_ALL.get(plan.runner)
        argv = [str(Path(cwd, "target")) if a == PREFIX else a for a in plan.argv]
        argv[0], env = self._runner(argv[0])
        host_env = self.host_env if self.host_env is not None else os.environ
        launch = await asyncio.to_thread(download_launch, self.sandbox, argv, env, Path(cwd), host_env)
        # npm's registry for this package (a scoped one's own), named where its output names none
        registry = npm_registries(argv[0], argv[1:], host_env).package if plan.runner == "npx" else None
        try:
            proc = await asyncio.create_subprocess_exec(
                *launch.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=launch.env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=launch.pass_fds,
            )
        except BaseException:
            if launch.net is not None:
                launch.net.close()
            raise
        recorded = self.ledger.record(proc.pid) if self.ledger is not None else None
        try:
            if launch.net is not None:  # its proxy serves from here (its output says why when it cannot)
                with contextlib.suppress(SandboxUnavailable):
                    await launch.net.started()
            assert proc.stdout is not None
            async for out_line in proc.stdout:
                line = launch.credentials.scrub(out_line)  # a runner quoting its registry's login
                if pattern is not None and pattern.search(line):
                    state.fetched += 1
                if in_all is not None and (m := in_all.search(line)):
                    state.fetched = max(state.fetched, int(m.group(1)))
                state.tail = (state.tail + line)[-4096:]
                if plan.runner == "uvx" and line.startswith(PREFIX_MARK.encode()):  # the last one counts
                    state.installed = Path(line[len(PREFIX_MARK) :].decode(errors="replace").rstrip("\r\n"))
                failure = read_failure(plan.runner, line.decode(errors="replace"))
                if failure is not None and launch.record is not None:  # the proxy knows why it cut it
                    unreached = [a.error for a in launch.record.attempts() if a.reached is False]
                    failure = through_the_proxy(failure, unreached)
                if failure is not None and registry is not None:
                    failure = from_registry(failure, registry)
                if failure is not None:
                    failure = for_a_login(failure, launch.credentials.given, launch.credentials.where)
                if failure is not None and (state.failure is None or not state.failure.final):
                    state.failure = failure
                    if failure.final:  # no retry of the runner's changes it: stop now (the group is ended below)
                        logger.info("%s fetch failed: %s", plan.runner, failure.code)
                        return -1
            return await proc.wait()
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await asyncio.shield(proc.wait())
            if self.ledger is not None:
                self.ledger.forget(recorded)
            if launch.net is not None:
                await asyncio.shield(launch.net.aclose())
                state.refused = tuple(a.destination for a in launch.record.refused())
                if state.refused:
                    logger.info("the download tried to reach %s, which is not its package registry", state.refused)


def _settle_npx_entry(entry: Path) -> bool:
    """Keep the npx entry a prefetch made only if no package in it has an install script (npx
    would reuse it without running them); True when it was kept."""
    if not _has_install_scripts(entry):
        return True
    shutil.rmtree(entry, ignore_errors=True)
    logger.info("the prefetched package has install scripts: the test installs it after consent")
    return False


def _has_install_scripts(project: Path) -> bool:
    """Does any package of the tree npm installed into ``project`` have a script it did not run
    (or is it unknown)? An install script, or a dependency that is not a registry tarball: npm
    packs a git dependency without its ``prepare`` under ``--ignore-scripts``, and npx would
    reuse that unbuilt copy."""
    try:
        lock = json.loads((project / "package-lock.json").read_text())
    except (OSError, ValueError):
        return True
    packages = lock.get("packages")
    if not isinstance(packages, dict) or not packages:
        return True
    for path, package in packages.items():
        if not isinstance(package, dict) or package.get("hasInstallScript"):
            return True
        if path and not package.get("link"):
            resolved = package.get("resolved")
            if not (
                isinstance(resolved, str) and resolved.startswith(("https://", "http://")) and package.get("integrity")
            ):
                return True
    return False
