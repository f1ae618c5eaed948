"""PyPI packages fetched while the user types, and slow first ``uvx`` runs (#17 items 2 and 3).

A real ``uv``/``uvx`` (the ``uv`` wheel of the ``test`` extra, found next to it rather than on
PATH) against a one-package PyPI index on loopback (tests/fakes/pypi_index.py), with a private
HOME: a cold, private uv cache (``~/.cache/uv``), and a uv config there that forbids Python
downloads, so uv reaches nothing but the fake index.
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
from setup_agent.launch.fetch import Fetcher, fetch_plan, prefetch_plan
from setup_agent.launch.fetch_plans import SAYS_PREFIX
from setup_agent.launch.spec import LaunchSpec
from tests.fakes.pypi_index import PypiIndex, marker_sdist, serve_pypi_package, stub_wheel
from tests.helpers import package_flow
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.processes import processes_mentioning, wait_gone
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME = "io.test/pypi-stub"
PACKAGE = "mcp-setup-pypi-stub"
#: The probe's deadline in these tests, and how long a slow index takes to send the wheel.
PROBE_TIMEOUT = scaled(4.0)  # the start's deadline: a hang guard too (an npx/uvx start under load)
TRICKLE = scaled(6.0)  # longer than that deadline on any machine


def _uv_bin() -> Path | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except FileNotFoundError:
        return None


needs_uv = pytest.mark.skipif(_uv_bin() is None, reason="needs the uv wheel (pip install -e '.[test]')")


def host_env(tmp_path: Path) -> dict[str, str]:
    """PATH with ``uv``/``uvx`` (links in a dir of their own: the venv's python stays off PATH),
    and a private HOME: a cold uv cache of its own, no Python download."""
    uv = _uv_bin()
    assert uv is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("uv", "uvx"):
        (bin_dir / tool).symlink_to(uv.with_name(tool))
    home = tmp_path / "home"
    (home / ".config" / "uv").mkdir(parents=True)
    (home / ".config" / "uv" / "uv.toml").write_text('python-downloads = "never"\n')
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "LANG": "C.UTF-8"}


def uv_cache(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".cache" / "uv"


def uvx_spec(index: PypiIndex) -> LaunchSpec:
    """What launch.py builds for the package on a custom index (``uvx --default-index … <spec>``)."""
    return LaunchSpec(
        command="uvx",
        args=["--default-index", index.url, f"{PACKAGE}==1.0.0"],
        package_type="pypi",
        identifier=PACKAGE,
        version="1.0.0",
        runner="uvx",
    )


def catalog_entry(catalog: Path, index: PypiIndex) -> None:
    write_catalog_entry(
        catalog,
        NAME,
        "The stub server as a PyPI package, from an index on loopback.",
        {"registryType": "pypi", "registryBaseUrl": index.url, "identifier": PACKAGE},
    )


def make_runtime(new_runtime, tmp_path: Path, index: PypiIndex, memory_keyring, **settings: Any) -> Runtime:
    catalog_entry(tmp_path / "catalog", index)
    env = host_env(tmp_path)
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
        host_env=env,
        which=lambda name: shutil.which(name, path=env["PATH"]),
    )


async def run_test(runtime: Runtime, ref: str, events: list[dict[str, Any]]) -> dict:
    return await package_flow.run_test(runtime, NAME, ref, events, timeout=PROBE_TIMEOUT + TRICKLE + scaled(90))


async def open_prompt(runtime: Runtime) -> dict[str, Any]:
    return await package_flow.open_prompt(runtime, NAME)


@pytest.fixture
def index() -> Iterator[PypiIndex]:
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0")) as idx:
        yield idx


def test_a_pypi_prefetch_downloads_wheels_only_into_a_throw_away_dir() -> None:
    spec = LaunchSpec(
        command="uvx",
        args=["--default-index", "http://i.example/simple", "--from", "srv==1.0", "python", "-m", "srv"],
        package_type="pypi",
        identifier="srv",
        runner="uvx",
    )
    plan = prefetch_plan(spec)
    assert plan is not None and plan.argv[:3] == ("uv", "pip", "install")
    assert {"--no-build", "--system", "--target"} <= set(plan.argv)
    assert plan.argv[-3:] == ("--default-index", "http://i.example/simple", "srv==1.0")
    assert plan.package == fetch_plan(spec).package  # type: ignore[union-attr]  # the test's fetch waits for it
    assert "python" not in plan.argv and "uvx" not in plan.argv  # nothing of the package is started
    # a value of uvx's own options is not the package: `uvx --python 3.12 srv==1.0` fetches srv==1.0
    # (for that Python), never a package named "3.12"
    spec = LaunchSpec(
        command="uvx",
        args=["--python", "3.12", "--with", "extra", "srv==1.0", "--port", "1"],
        package_type="pypi",
        identifier="srv",
        runner="uvx",
    )
    # (its --with packages too: the environment the server runs in, which the sandbox cannot make)
    fetched = fetch_plan(spec)
    assert fetched is not None
    assert fetched.argv == (
        *("uvx", "--python", "3.12", "--with", "extra", "--from", "srv==1.0"),
        *("python", "-c", SAYS_PREFIX),
    )
    assert prefetch_plan(spec).argv[-3:] == ("--python", "3.12", "srv==1.0")  # type: ignore[union-attr]


@needs_uv
async def test_a_pypi_prefetch_fills_uvs_cache_so_the_test_downloads_no_wheel(
    new_runtime, tmp_path: Path, index: PypiIndex, memory_keyring, canary: str
) -> None:
    runtime = make_runtime(new_runtime, tmp_path, index, memory_keyring)
    try:
        opened = await open_prompt(runtime)
        assert index.file_requests == [f"/files/{stub_wheel(PACKAGE, '1.0.0')[0]}"]  # during the prefetch
        assert list(uv_cache(tmp_path).glob("archive-v*/*/mcp_setup_pypi_stub"))  # into uv's own cache
        runtime.broker.answer(opened["prompt_id"], canary)
        events: list[dict[str, Any]] = []
        result = await run_test(runtime, opened["ref"], events)
        assert result["ok"] is True, result
        assert {t["name"] for t in result["tools"]} >= {"echo", "whoami"}
        assert len(index.file_requests) == 1  # uvx found the wheel in the cache the prefetch filled
        assert canary not in json.dumps([result, events])
    finally:
        await runtime.aclose()
    assert wait_gone(processes_mentioning(index.url)) == []


@needs_uv
async def test_get_naming_a_pypi_package_prefetches_its_wheels(
    new_runtime, tmp_path: Path, index: PypiIndex, memory_keyring
) -> None:
    runtime = make_runtime(new_runtime, tmp_path, index, memory_keyring)
    try:
        detail = await runtime.service.call("mcp_setup_get", {"qualified_name": NAME})
        assert detail["detail"]["qualified_name"] == NAME, detail
        with anyio.fail_after(scaled(90)):
            await runtime.service.prefetches_settled()
        assert len(index.file_requests) == 1
        assert not list(uv_cache(tmp_path).glob("environments-v*/*/*"))  # no environment made: nothing started
    finally:
        await runtime.aclose()


@needs_uv
@pytest.mark.parametrize("kind", ["wheel with a .pth file", "sdist with a build backend"])
async def test_a_pypi_prefetch_runs_no_code_of_the_package(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "package-code-ran"
    if kind.startswith("wheel"):
        file = stub_wheel(PACKAGE, "1.0.0", pth=f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')\n")
    else:
        file = marker_sdist(PACKAGE, "1.0.0", marker)
    with serve_pypi_package(PACKAGE, file) as index:
        spec = uvx_spec(index)
        fetcher = Fetcher(host_env=host_env(tmp_path), tick=0.2)
        try:
            assert fetcher.prefetch(spec) is True
            with anyio.fail_after(scaled(90)):
                await fetcher.settled()
            assert not marker.exists()
            # After consent the test's own fetch (uvx) installs it and starts Python, or builds
            # the sdist: the package's code runs there, which is what the prefetch must not do.
            with anyio.fail_after(scaled(90)):
                await fetcher.fetch(spec)
            assert marker.exists()
        finally:
            await fetcher.aclose()


@needs_uv
async def test_a_failed_pypi_prefetch_changes_nothing(
    new_runtime, tmp_path: Path, index: PypiIndex, memory_keyring, canary: str
) -> None:
    runtime = make_runtime(new_runtime, tmp_path, index, memory_keyring)
    try:
        index.down = True
        opened = await open_prompt(runtime)
        assert any(p.startswith("/simple/") for p in index.requests)  # the prefetch ran, and failed
        assert index.file_requests == []
        index.down = False
        runtime.broker.answer(opened["prompt_id"], canary)
        events: list[dict[str, Any]] = []
        result = await run_test(runtime, opened["ref"], events)
        assert result["ok"] is True, result  # the test downloads as if there had been no prefetch
        downloading = [e for e in events if e["stage"] == "downloading"]
        assert downloading and downloading[-1]["status"] == "done" and downloading[-1]["ok"] is True
        assert len(index.file_requests) == 1
        assert "503" not in json.dumps(result)  # the prefetch's failure is not reported when the test passes
    finally:
        await runtime.aclose()


@needs_uv
async def test_a_slow_pypi_download_longer_than_the_probe_timeout_is_not_a_timeout(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0"), trickle_seconds=TRICKLE) as index:
        runtime = make_runtime(new_runtime, tmp_path, index, memory_keyring)
        try:
            ref = runtime.refs.mint("STUB_API_KEY", canary)
            events: list[dict[str, Any]] = []
            result = await run_test(runtime, ref, events)
            assert result["ok"] is True, result
            downloading = [e for e in events if e["stage"] == "downloading"]
            assert downloading[0]["status"] == "started" and downloading[-1]["status"] == "done"
            ticks = [e for e in downloading if e["status"] == "progress"]
            assert ticks and all(e["elapsed_seconds"] >= 0 and e["fetched"] >= 0 for e in ticks)
            assert downloading[-1]["fetched"] >= 1 and downloading[-1]["ok"] is True
            stages = [e["stage"] for e in events]
            assert stages.index("downloading") < stages.index("starting")  # the start's deadline follows it
            assert len(index.file_requests) == 1
            assert canary not in json.dumps([result, events])
        finally:
            await runtime.aclose()
        assert wait_gone(processes_mentioning(index.url)) == []


@needs_uv
async def test_a_pypi_prefetch_reads_no_uv_config_left_in_a_shared_temp_dir(
    tmp_path: Path, index: PypiIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-tmp"  # stands in for /tmp, where any local user can write
    shared.mkdir()
    (shared / "uv.toml").write_text("offline = true\n")  # would keep the prefetch from downloading anything
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    fetcher = Fetcher(host_env=host_env(tmp_path), tick=0.2)  # no work dir given: a private one in the temp dir
    try:
        assert fetcher.prefetch(uvx_spec(index)) is True
        with anyio.fail_after(scaled(90)):
            await fetcher.settled()
        assert len(index.file_requests) == 1  # downloaded: their uv.toml was not read
    finally:
        await fetcher.aclose()


def test_a_pypi_prefetch_never_names_an_interpreter_by_path() -> None:
    # uv runs the interpreter it is given to ask its version: a registry's path is not run before consent
    def spec(python: str) -> LaunchSpec:
        return LaunchSpec(
            command="uvx", args=["--python", python, "srv==1.0"], package_type="pypi", identifier="srv", runner="uvx"
        )

    assert prefetch_plan(spec("/home/u/.npm/_npx/0123/node_modules/.bin/python")) is None
    as_option = LaunchSpec(
        command="uvx", args=["--from=--python=/tmp/evil", "srv"], package_type="pypi", identifier="srv", runner="uvx"
    )
    assert fetch_plan(as_option) is None and prefetch_plan(as_option) is None  # a package spec, never an option
    assert prefetch_plan(spec("./python")) is None
    for version in ("3.12", "3", "3.11.7", ">=3.11", "cpython3.12"):
        assert prefetch_plan(spec(version)) is not None, version
