"""``mcp-setup run`` starts an installed npm server the way the gateway does: from what the
download phase installed, with no ``npm exec`` left beside it (setup_agent/launch/direct.py).

The package comes from a one-package npm registry on loopback (tests/fakes/npm_registry.py);
one process installs it (test, download, install), then an AI client's entry, ``mcp-setup run``,
starts it in a process of its own (sandboxed as this machine allows) and the SDK's client calls
it. What runs is read from /proc.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import keyring.backends.fail
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from app.settings import Settings
from setup_agent.launch.fetch import npx_entry_name
from tests.fakes.npm_registry import serve_npm_package
from tests.helpers import package_flow
from tests.helpers.mcp_face import REPO, mcp_setup_argv
from tests.helpers.processes import command_line, descendants, runner_processes, runners_above
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME, PACKAGE = "io.test/npm-run", "mcp-setup-npm-run"

needs_npx = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


@needs_npx
async def test_mcp_setup_run_starts_an_installed_npm_server_on_node_with_no_npm_exec_above_it_or_through_npx_once_pruned(
    new_runtime, tmp_path: Path, canary: str
) -> None:
    data = tmp_path / "data"
    host_env = package_flow.runner_host_env(tmp_path)
    with serve_npm_package(PACKAGE, "1.0.0") as registry:
        package_flow.write_catalog_entry(
            tmp_path / "catalog",
            NAME,
            "The stub server as an npm package, from a registry on loopback.",
            {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": PACKAGE},
        )
        runtime = new_runtime(
            Settings(home=data, registries="local", catalog_dir=tmp_path / "catalog", consent="never-ask"),
            keyring_backend=keyring.backends.fail.Keyring(),  # the data key in a file: `run` reads it too
            host_env=host_env,
        )
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here")
        await package_flow.install(runtime, NAME, canary, timeout=scaled(180))
        await runtime.aclose()

        env = {
            **host_env,
            "MCP_SETUP_HOME": str(data),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "PYTHONPATH": str(REPO),
        }
        assert await runners_of_run(env) == []
        # Pruned since (``npx`` clears old entries): `run` has no download phase, so npx starts it
        # (and fetches it again), with `npm exec` above the server: the start does not fail.
        shutil.rmtree(Path(host_env["HOME"]) / ".npm" / "_npx" / npx_entry_name(f"{PACKAGE}@1.0.0"))
        assert any(r.startswith("npm exec") for r in await runners_of_run(env))


async def runners_of_run(env: dict[str, str]) -> list[str]:
    """``mcp-setup run npm-run`` answering a call; the runner processes above its server."""
    argv = mcp_setup_argv("run", "npm-run")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(REPO))
    with anyio.fail_after(scaled(90)):
        async with Client(stdio_client(params)) as client:
            result = await client.call_tool("echo", {"text": "through run"})
            assert result.content[0].text == "through run"  # type: ignore[union-attr]
            mine = descendants(os.getpid())
            servers = [p for p in mine if any(f"{PACKAGE}/" in part for part in command_line(p))]
            assert servers, [command_line(p) for p in mine]
            assert runner_processes(servers) == []  # the server itself is node (and its python)
            return runners_above(servers)
