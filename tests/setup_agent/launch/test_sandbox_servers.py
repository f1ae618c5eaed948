"""Real servers still work in the sandbox (issue #23): ``@modelcontextprotocol/server-everything``
and ``@modelcontextprotocol/server-filesystem`` from the npm registry through the download phase
and a sandboxed start (bubblewrap, and Landlock where the kernel has it). The uvx and MCPB python
cases run sandboxed in tests/setup_agent/launch/test_pypi_prefetch.py, tests/setup_agent/launch/test_download_phase.py and every
build_runtime test (``MCP_SETUP_SANDBOX`` defaults to ``auto``).

The npm registry is the real one (this machine and CI reach it); without it these tests skip.
The caches are the test's own (a private HOME shared by this module: one download).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from registry_clients.models import RequiredKey
from setup_agent.launch import Fetcher, LaunchSpec, Sandbox, materialize, open_client
from setup_agent.launch.grants import granted_paths
from setup_agent.launch.landlock import abi_version
from setup_agent.secrets import Redactor
from setup_agent.setup.probe import Prober
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

EVERYTHING, FILESYSTEM = "@modelcontextprotocol/server-everything", "@modelcontextprotocol/server-filesystem"
MODES = ["bwrap", pytest.param("landlock", marks=pytest.mark.skipif(abi_version() < 1, reason="no Landlock here"))]


@pytest.fixture(scope="module")
def npm_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A host environment with a private HOME (its own npm cache), and the two packages' versions."""
    if shutil.which("npx") is None or shutil.which("bwrap") is None:
        pytest.skip("needs npx and bubblewrap (scripts/test.sh installs them)")
    home = tmp_path_factory.mktemp("npm-home")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    versions = {}
    for package in (EVERYTHING, FILESYSTEM):
        try:
            found = subprocess.run(
                ["npm", "view", package, "version"],
                env=env,
                capture_output=True,
                text=True,
                timeout=scaled(30),
                cwd=home,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("the npm registry did not answer")
        if found.returncode != 0 or not found.stdout.strip():
            pytest.skip("the npm registry is not reachable from here")
        versions[package] = found.stdout.strip()
    yield {**env, **{f"version:{p}": v for p, v in versions.items()}}


def npx_spec(env: dict[str, str], package: str, *args: str) -> LaunchSpec:
    return LaunchSpec(
        command="npx",
        args=["-y", f"{package}@{env['version:' + package]}", *args],
        package_type="npm",
        identifier=package,
        runner="npx",
    )


def host(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("version:")}


async def download(env: dict[str, str], spec: LaunchSpec, work: Path) -> None:
    fetcher = Fetcher(host_env=host(env), timeout=scaled(240), workdir=work / "scratch")
    with anyio.fail_after(scaled(260)):
        state = await fetcher.fetch(spec)
    assert state is None or state.ok, state


def sandbox_for(env: dict[str, str], mode: str, data: Path) -> Sandbox:
    sandbox = Sandbox(mode, hide=(data,), user_home=Path(env["HOME"]), host_env=host(env))  # type: ignore[arg-type]
    assert sandbox.mechanism == mode, sandbox.why
    return sandbox


@pytest.mark.parametrize("mode", MODES)
async def test_server_everything_from_npm_lists_its_tools_in_the_sandbox(
    npm_home: dict[str, str], tmp_path: Path, mode: str
) -> None:
    spec = npx_spec(npm_home, EVERYTHING)
    await download(npm_home, spec, tmp_path)
    data = tmp_path / "data"
    (data / "scratch").mkdir(parents=True)
    prober = Prober(
        Redactor(),
        scratch_root=data / "scratch",
        host_env=host(npm_home),
        timeout=scaled(60),
        sandbox=sandbox_for(npm_home, mode, data),
    )
    result = await prober.probe(spec, {})
    await prober.drain()
    assert {"echo", "get-sum"} <= {t["name"] for t in result.tools}, result.tools


@pytest.mark.parametrize("mode", MODES)
async def test_server_filesystem_reads_and_writes_the_granted_dir_while_a_sibling_stays_invisible(
    npm_home: dict[str, str], tmp_path: Path, mode: str
) -> None:
    docs = tmp_path / "docs"
    granted, sibling = docs / "granted", docs / "sibling"
    granted.mkdir(parents=True)
    sibling.mkdir()
    (granted / "hello.txt").write_text("hello from the user")
    (sibling / "secret.txt").write_text("not for the server")
    # The server is told it may use both dirs; the user granted only docs/granted.
    spec = npx_spec(npm_home, FILESYSTEM, str(granted), str(sibling))
    spec.sandbox_grants = [str(granted)]
    await download(npm_home, spec, tmp_path)
    data = tmp_path / "data"
    workdir = data / "servers" / "srv_fs"
    workdir.mkdir(parents=True)
    resolved = materialize(spec, {}, cwd=str(workdir))
    with anyio.fail_after(scaled(90)):
        async with open_client(resolved, host_env=host(npm_home), sandbox=sandbox_for(npm_home, mode, data)) as client:
            read = await client.call_tool("read_text_file", {"path": str(granted / "hello.txt")})
            assert "hello from the user" in read.content[0].text, read
            wrote = await client.call_tool("write_file", {"path": str(granted / "new.txt"), "content": "written"})
            assert not wrote.is_error, wrote
            listed = await client.call_tool("list_directory", {"path": str(sibling)})
            peeked = await client.call_tool("read_text_file", {"path": str(sibling / "secret.txt")})
    assert (granted / "new.txt").read_text() == "written"
    assert listed.is_error and "secret.txt" not in json.dumps(listed.model_dump(mode="json"))
    assert peeked.is_error and "not for the server" not in json.dumps(peeked.model_dump(mode="json"))


def test_the_paths_a_users_settings_name_are_granted_and_nothing_else() -> None:
    keys = [
        RequiredKey(name="ROOT", format="filepath"),
        RequiredKey(name="DIR", format="directory"),
        RequiredKey(name="TOKEN", secret=True),
        RequiredKey(name="NAME"),
    ]
    here = str(Path(__file__).parent)
    values = {"ROOT": here, "DIR": "relative/dir", "TOKEN": here, "NAME": here}
    assert granted_paths(keys, values) == [here]  # relative, secret and plain settings are not paths
    assert granted_paths(keys, {"ROOT": "/nonexistent/dir"}) == []
    assert granted_paths(keys, {"ROOT": "/"}) == []  # never the whole system
