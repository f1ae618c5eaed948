"""A first npx run that downloads for longer than the probe's deadline is not a timeout (#17 item 3).

A real ``npx`` against a one-package npm registry on loopback (tests/fakes/npm_registry.py)
that sends its tarball slowly, with a private HOME (so a cold, private npm cache).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.launch.fetch import Fetcher, fetch_plan, npx_entry_name
from setup_agent.launch.fetch_plans import SAYS_PREFIX
from setup_agent.launch.spec import LaunchSpec
from tests.fakes.npm_registry import NpmRegistry, serve_npm_package
from tests.helpers import package_flow
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.processes import processes_mentioning, wait_gone
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME = "io.test/npm-stub"
PACKAGE = "mcp-setup-npm-stub"
#: The probe's deadline in these tests, and how long the tarball takes: longer than that.
PROBE_TIMEOUT = scaled(4.0)  # the start's deadline: a hang guard too (an npx/uvx start under load)
TRICKLE = scaled(6.0)  # longer than that deadline on any machine

needs_npx = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


def catalog_entry(catalog: Path, registry: NpmRegistry) -> None:
    write_catalog_entry(
        catalog,
        NAME,
        "The stub server as an npm package, from a registry on loopback.",
        {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": PACKAGE},
    )


@pytest.fixture
def registry() -> Iterator[NpmRegistry]:
    with serve_npm_package(PACKAGE, "1.0.0", trickle_seconds=TRICKLE) as reg:
        yield reg


def private_host_env(tmp_path: Path) -> dict[str, str]:
    """The host environment with a private HOME: a cold npm cache of its own."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}


def npx_spec(registry: NpmRegistry) -> LaunchSpec:
    """What launch.py builds for the package on a custom registry (``npx -y --registry=… <spec>``)."""
    return LaunchSpec(
        command="npx",
        args=["-y", f"--registry={registry.url}", f"{PACKAGE}@1.0.0"],
        package_type="npm",
        identifier=PACKAGE,
        version="1.0.0",
        runner="npx",
    )


def make_runtime(new_runtime, tmp_path: Path, registry: NpmRegistry, memory_keyring, **settings: Any) -> Runtime:
    catalog_entry(tmp_path / "catalog", registry)
    host_env = private_host_env(tmp_path)
    return new_runtime(
        Settings(
            home=tmp_path / "data",
            registries="local",
            catalog_dir=tmp_path / "catalog",
            probe_timeout_seconds=PROBE_TIMEOUT,
            adopt_tested_servers=False,
            **settings,
        ),
        keyring_backend=memory_keyring,
        host_env=host_env,
    )


async def run_test(runtime: Runtime, ref: str, events: list[dict[str, Any]]) -> dict:
    return await package_flow.run_test(runtime, NAME, ref, events, timeout=PROBE_TIMEOUT + TRICKLE + scaled(60))


@needs_npx
async def test_a_download_longer_than_the_probe_timeout_succeeds_and_reports_progress(
    new_runtime, tmp_path: Path, registry: NpmRegistry, memory_keyring, canary: str
) -> None:
    runtime = make_runtime(new_runtime, tmp_path, registry, memory_keyring)
    try:
        ref = runtime.refs.mint("STUB_API_KEY", canary)
        events: list[dict[str, Any]] = []
        result = await run_test(runtime, ref, events)
        assert result["ok"] is True, result
        assert {t["name"] for t in result["tools"]} >= {"echo", "whoami"}
        downloading = [e for e in events if e["stage"] == "downloading"]
        assert [e["status"] for e in downloading][0] == "started" and downloading[-1]["status"] == "done"
        ticks = [e for e in downloading if e["status"] == "progress"]
        assert ticks and all(e["elapsed_seconds"] >= 0 and e["fetched"] >= 0 for e in ticks)
        assert downloading[-1]["fetched"] >= 1 and downloading[-1]["ok"] is True
        stages = [e["stage"] for e in events]
        assert stages.index("downloading") < stages.index("starting")  # the start's deadline follows it
        assert len(registry.tarball_requests) == 1
        # The second test finds the cache warm: no download phase, no second tarball.
        again: list[dict[str, Any]] = []
        second = await run_test(runtime, ref, again)
        assert second["ok"] is True, second
        assert "downloading" not in [e["stage"] for e in again]
        assert len(registry.tarball_requests) == 1
        assert canary not in json.dumps([result, second, events, again])
    finally:
        await runtime.aclose()
    assert not processes_mentioning(registry.url)


@needs_npx
async def test_a_download_past_its_own_deadline_is_download_timeout_and_leaves_no_process(
    new_runtime, tmp_path: Path, registry: NpmRegistry, memory_keyring, canary: str
) -> None:
    runtime = make_runtime(new_runtime, tmp_path, registry, memory_keyring, download_timeout_seconds=1.0)
    try:
        ref = runtime.refs.mint("STUB_API_KEY", canary)
        events: list[dict[str, Any]] = []
        result = await run_test(runtime, ref, events)
        assert result["ok"] is False and result["error"]["code"] == "download_timeout", result
        assert "MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS" in result["error"]["message"]
        assert events[-1]["stage"] == "downloading" and events[-1]["status"] == "failed"
        assert wait_gone(processes_mentioning(registry.url)) == []
    finally:
        await runtime.aclose()


@needs_npx
async def test_a_first_call_that_must_download_goes_through_the_download_phase_and_its_timeout_counts_from_the_start(
    tmp_path: Path, registry: NpmRegistry
) -> None:
    from setup_agent.gateway.connections import ConnectionManager
    from setup_agent.gateway.router import Gateway
    from setup_agent.secrets.redact import Redactor
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    echo = {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Text to echo"}},
            "required": ["text"],
        },
    }
    host_env = private_host_env(tmp_path)
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    redactor = Redactor()
    manager = ConnectionManager(
        store,
        redactor,
        install_root=tmp_path / "servers",
        host_env=host_env,
        backoff=(),
        connect_timeout=scaled(30),
        fetcher=Fetcher(host_env=host_env, workdir=tmp_path / "work", tick=0.2),
    )
    spec = npx_spec(registry).model_copy(update={"env": {"STUB_REQUIRE": "0"}})
    store.servers.install(
        qualified_name=NAME,
        source="local",
        version="1.0.0",
        package_type="npm",
        launch_spec=spec.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
        title="Npm stub",
        tools=[echo],
    )
    # A lazy gateway (the stdio face's): the server starts on its first call, the cache is cold,
    # and the tarball takes longer than the call's own timeout.
    gw = Gateway(store, manager, redactor, eager=False, call_timeout=PROBE_TIMEOUT)
    heard: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    try:
        await gw.start()
        with anyio.fail_after(TRICKLE + PROBE_TIMEOUT + scaled(60)):
            result = await gw.call("npm-stub__echo", {"text": "after the download"}, progress=progress)
        assert result["content"] == [{"type": "text", "text": "after the download"}], result
        assert heard and all("Npm stub: downloading its package" in m for m in heard), heard
        assert len(registry.tarball_requests) == 1
    finally:
        await gw.aclose()
        await manager.aclose()
        await manager.fetcher.aclose()
        store.close()


def test_the_fetch_warms_the_cache_each_runner_uses() -> None:
    npx = LaunchSpec(
        command="npx",
        args=["-y", "--registry=http://r.example", "pkg@1.2.3", "--flag"],
        package_type="npm",
        identifier="pkg",
        runner="npx",
    )
    plan = fetch_plan(npx)
    assert plan is not None and plan.argv[:2] == ("npm", "exec")
    assert (
        "--package=pkg@1.2.3" in plan.argv and "--registry=http://r.example" in plan.argv and "--flag" not in plan.argv
    )
    uvx = LaunchSpec(
        command="uvx",
        args=["--from", "srv==1.0", "python", "-m", "srv"],
        package_type="pypi",
        identifier="srv",
        runner="uvx",
    )
    # It prints where uv made the environment: a start runs the tool's own program from there.
    assert fetch_plan(uvx).argv == ("uvx", "--from", "srv==1.0", "python", "-c", SAYS_PREFIX)  # type: ignore[union-attr]
    # A repair's `--with mcp<2`: the same environment the server runs in (it cannot make it in the sandbox).
    repaired = uvx.model_copy(update={"args": ["--with", "mcp<2", "srv==1.0"]})
    assert fetch_plan(repaired).argv == ("uvx", "--with", "mcp<2", "--from", "srv==1.0", "python", "-c", SAYS_PREFIX)  # type: ignore[union-attr]
    oci = LaunchSpec(
        command="docker",
        args=["run", "-i", "--rm", "-e", "KEY", "ghcr.io/o/img:2"],
        package_type="oci",
        identifier="ghcr.io/o/img",
        runner="docker",
    )
    assert fetch_plan(oci).argv == ("docker", "pull", "ghcr.io/o/img:2")  # type: ignore[union-attr]
    assert fetch_plan(LaunchSpec(command="python3", args=["x.py"], runner="python3")) is None


@needs_npx
async def test_a_package_prefetched_while_the_prompt_is_open_is_not_downloaded_again(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    with serve_npm_package(PACKAGE, "1.0.0") as registry:
        runtime = make_runtime(new_runtime, tmp_path, registry, memory_keyring)
        try:
            opened = await package_flow.open_prompt(runtime, NAME, settle_seconds=60)
            assert len(registry.tarball_requests) == 1
            runtime.broker.answer(opened["prompt_id"], canary)
            events: list[dict[str, Any]] = []
            result = await run_test(runtime, opened["ref"], events)
            assert result["ok"] is True, result
            assert len(registry.tarball_requests) == 1  # the test used the warm cache
            # no install script anywhere: the prefetch made npx's entry too, the test had nothing to download
            assert "downloading" not in [e["stage"] for e in events]
        finally:
            await runtime.aclose()


@needs_npx
async def test_a_prefetch_runs_no_install_script_before_consent(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    # The script leaves its mark in its own package folder: in npm's cache, which the download
    # fills (a sandboxed download may write nothing else).
    scripts = {"postinstall": "node -e \"require('fs').writeFileSync('postinstall-ran', 'x')\""}
    with serve_npm_package(PACKAGE, "1.0.0", scripts=scripts) as registry:
        runtime = make_runtime(new_runtime, tmp_path, registry, memory_keyring)

        def ran() -> bool:
            return bool(list((tmp_path / "home").glob(f".npm/_npx/*/node_modules/{PACKAGE}/postinstall-ran")))

        try:
            opened = await package_flow.open_prompt(runtime, NAME, settle_seconds=60)
            fetched = len(registry.tarball_requests)
            assert fetched >= 1  # fetched into npm's cache …
            assert not ran()  # … and nothing of it ran
            assert not list((tmp_path / "home").glob(".npm/_npx/*/node_modules/" + PACKAGE))
            runtime.broker.answer(opened["prompt_id"], canary)
            events: list[dict[str, Any]] = []
            result = await run_test(runtime, opened["ref"], events)  # after consent: npx runs it, script included
            assert result["ok"] is True, result
            assert "downloading" in [e["stage"] for e in events]
            assert ran()
            assert len(registry.tarball_requests) == fetched  # from the cache
        finally:
            await runtime.aclose()


@needs_npx
async def test_a_prefetch_runs_no_command_of_the_package_even_one_named_node(tmp_path: Path) -> None:
    # npx puts the tree's .bin first on PATH: a fetch that ran `node -e ""` ran the package's "node".
    marker = tmp_path / "package-bin-ran"
    evil = f"#!/bin/sh\necho x > '{marker}'\n"
    with serve_npm_package(PACKAGE, "1.0.0", bins={"node": evil, "sh": evil}) as registry:
        spec = npx_spec(registry)
        fetcher = Fetcher(host_env=private_host_env(tmp_path), workdir=tmp_path / "work", tick=0.2)
        try:
            assert fetcher.prefetch(spec) is True
            with anyio.fail_after(scaled(60)):
                await fetcher.settled()
            assert len(registry.tarball_requests) == 1 and fetcher.is_warm(spec)  # fetched, npx's entry made
            assert not marker.exists()
            with anyio.fail_after(scaled(60)):
                await fetcher.fetch(spec)  # the fetch after consent runs none of them either
            assert not marker.exists()
        finally:
            await fetcher.aclose()


@needs_npx
async def test_a_prefetch_reads_no_npm_config_left_in_a_shared_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-tmp"  # stands in for /tmp, where any local user can write
    shared.mkdir()
    marker = tmp_path / "hostile-shell-ran"
    hostile = shared / "hostile-shell"
    hostile.write_text(f"#!/bin/sh\necho x > '{marker}'\nexec /bin/sh \"$@\"\n")
    hostile.chmod(0o755)
    (shared / ".npmrc").write_text(f"script-shell={hostile}\ncache={shared / 'their-cache'}\n")
    (shared / "node_modules").mkdir()  # makes the shared dir npm's project root for anything below it
    (shared / "package.json").write_text('{"workspaces": ["*"]}')  # and claims every dir below as its workspace
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    with serve_npm_package(PACKAGE, "1.0.0") as registry:
        fetcher = Fetcher(host_env=private_host_env(tmp_path))  # no work dir given: a private one in the temp dir
        try:
            assert fetcher.prefetch(npx_spec(registry)) is True
            with anyio.fail_after(scaled(60)):
                await fetcher.settled()
            assert fetcher.is_warm(npx_spec(registry))
            assert not marker.exists()
            assert not (shared / "their-cache").exists()  # the user's own npm cache, not theirs
            assert (tmp_path / "home" / ".npm" / "_npx" / npx_entry_name(f"{PACKAGE}@1.0.0")).is_dir()
        finally:
            await fetcher.aclose()
    assert list(shared.iterdir()) and not [p for p in shared.iterdir() if p.name.startswith("mcp-setup-fetch-")]


@needs_npx
async def test_a_cancelled_prefetch_leaves_no_npx_entry_without_its_scripts_and_touches_no_other(
    tmp_path: Path,
) -> None:
    env = private_host_env(tmp_path)
    npx_dir = Path(env["HOME"]) / ".npm" / "_npx"
    with serve_npm_package(PACKAGE, "1.0.0", trickle_seconds=30) as registry:
        spec = npx_spec(registry)
        mine = npx_dir / npx_entry_name(f"{PACKAGE}@1.0.0")
        fetcher = Fetcher(host_env=env, workdir=tmp_path / "work", tick=0.2)
        try:
            assert fetcher.prefetch(spec) is True
            with anyio.fail_after(scaled(60)):  # npx made its entry and is fetching the (slow) tarball
                while not (mine.exists() and registry.tarball_requests):
                    await anyio.sleep(0.05)
            other = npx_dir / "0123456789abcdef"  # another npx run's entry, half made (no package.json yet)
            other.mkdir()
        finally:
            with anyio.fail_after(scaled(30)):
                await fetcher.aclose()
    assert not mine.exists()
    assert other.exists()


def test_an_npx_entry_with_a_git_dependency_is_not_kept_after_a_prefetch(tmp_path: Path) -> None:
    # npm packs a git dependency without running its `prepare` under --ignore-scripts; npx would
    # reuse that unbuilt copy, so such an entry is treated like one with an install script.
    from setup_agent.launch.fetch import _has_install_scripts

    def entry(packages: dict) -> Path:
        path = tmp_path / str(len(list(tmp_path.iterdir())))
        path.mkdir()
        (path / "package-lock.json").write_text(json.dumps({"lockfileVersion": 3, "packages": packages}))
        return path

    registry = {"resolved": "https://registry.npmjs.org/a/-/a-1.0.0.tgz", "integrity": "sha512-x"}
    assert _has_install_scripts(entry({"": {}, "node_modules/a": registry})) is False
    git = {"resolved": "git+ssh://git@github.com/o/b.git#0123abcd", "version": "1.0.0"}
    assert _has_install_scripts(entry({"": {}, "node_modules/a": registry, "node_modules/b": git})) is True
    assert _has_install_scripts(entry({"": {}, "node_modules/a": {**registry, "hasInstallScript": True}})) is True
    assert _has_install_scripts(entry({"": {}, "node_modules/c": {"resolved": "https://x.example/c.tgz"}})) is True


CRASHING_PREFETCH = """
import asyncio, json, sys
from pathlib import Path
from setup_agent.launch.fetch import Fetcher
from setup_agent.launch.spec import LaunchSpec
from setup_agent.launch.procs import ProcessLedger

async def main():
    home, registry, package, env = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    spec = LaunchSpec(command="npx", args=["-y", "--registry=" + registry, package + "@1.0.0"], package_type="npm",
                      identifier=package, version="1.0.0", runner="npx")
    fetcher = Fetcher(host_env=env, workdir=Path(home, "scratch"), ledger=ProcessLedger(Path(home, "procs")))
    assert fetcher.prefetch(spec)
    print("started", flush=True)
    await asyncio.Event().wait()  # until SIGKILL

asyncio.run(main())
"""


@needs_npx
def test_a_crash_during_a_prefetch_leaves_nothing_after_the_next_start(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from app.runtime import sweep_leftovers
    from setup_agent.launch.procs import ProcessLedger
    from tests.helpers.mcp_face import REPO
    from tests.helpers.processes import processes_mentioning, wait_gone

    env = private_host_env(tmp_path)
    home = tmp_path / "data"
    entry = Path(env["HOME"]) / ".npm" / "_npx" / npx_entry_name(f"{PACKAGE}@1.0.0")
    with serve_npm_package(PACKAGE, "1.0.0", trickle_seconds=60) as registry:
        child = subprocess.Popen(
            [sys.executable, "-c", CRASHING_PREFETCH, str(home), registry.url, PACKAGE, json.dumps(env)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "started"
            deadline = time.monotonic() + scaled(60)  # npx made its entry and is fetching the (slow) tarball
            while not (entry.exists() and registry.tarball_requests) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert entry.exists() and registry.tarball_requests
            child.send_signal(signal.SIGKILL)  # mcp-setup dies mid-prefetch
            child.wait(scaled(10))
            # Left behind: the fetch's process group in the ledger (npm may outlive it, or die on its
            # broken pipe), the entry half made, the scratch dir that lists it.
            assert list((home / "procs").glob("*.json"))
            assert list((home / "scratch").glob("mcp-setup-fetch-*"))
            with Store_for(home) as store:  # what the next start does first
                sweep_leftovers(
                    ProcessLedger(home / "procs"), store, install_root=home / "servers", scratch=home / "scratch"
                )
            assert wait_gone(processes_mentioning(registry.url)) == []
            assert not list((home / "procs").glob("*.json"))
            assert not entry.exists()  # made without its scripts: npx would have reused it
            assert not list((home / "scratch").iterdir())
        finally:
            if child.poll() is None:
                child.kill()


def Store_for(home: Path):  # noqa: N802 - reads like the class it opens
    """The store of data dir ``home`` (a fresh one: the crashed prefetch never opened it)."""
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    return Store.for_data_dir(home, Vault.in_memory(), None)


@needs_npx
async def test_a_package_npm_does_not_have_fails_its_download_row_saying_npm_has_no_such_package(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    """npx's E404 is the download's failure, said as soon as npm says it, not a crash of a server
    that was downloaded: nothing is started."""
    with serve_npm_package(PACKAGE, "1.0.0") as registry:  # it has mcp-setup-npm-stub only
        write_catalog_entry(
            tmp_path / "catalog",
            NAME,
            "A package its registry does not have.",
            {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": "mcp-setup-npm-nope"},
        )
        runtime = new_runtime(
            Settings(
                home=tmp_path / "data",
                registries="local",
                catalog_dir=tmp_path / "catalog",
                probe_timeout_seconds=PROBE_TIMEOUT,
                adopt_tested_servers=False,
            ),
            keyring_backend=memory_keyring,
            host_env=private_host_env(tmp_path),
        )
        try:
            events: list[dict[str, Any]] = []
            result = await run_test(runtime, runtime.refs.mint("STUB_API_KEY", canary), events)
        finally:
            await runtime.aclose()
    assert result["ok"] is False and result["error"]["code"] == "download_failed", result
    assert result["error"]["message"] == (
        f"Could not download mcp-setup-npm-nope@1.0.0 from {registry.url}: it has no such package."
    )
    assert result["error"]["details"]["failed"] == "package"
    assert "done" not in [e["status"] for e in events if e["stage"] == "downloading"]  # the fetch got nothing
    assert "starting" not in [e["stage"] for e in events]
    last = events[-1]
    assert (last["stage"], last["status"], last["code"]) == ("downloading", "failed", "download_failed")
    assert canary not in json.dumps([result, events])
