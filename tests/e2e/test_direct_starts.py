"""``mcp-setup run`` starts an installed npm server the way the gateway does: from what the
download phase installed, with no ``npm exec`` left beside it (setup_agent/launch/direct.py);
and where nothing was noted here (another machine installed it) or the entry was pruned since,
after a download of its own first, as the gateway's start does, never through the runner.

The package comes from a one-package npm registry on loopback (tests/fakes/npm_registry.py),
public or private (a token for its metadata and its tarball, in the user's ``.npmrc``); one
process installs it (test, download, install), then an AI client's entry, ``mcp-setup run``,
starts it in a process of its own (sandboxed as this machine allows) and the SDK's client calls
it. What runs is read from /proc; the private registry's token reaches the registry only.
"""

from __future__ import annotations

import base64
import json
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
from tests.fakes.pypi_index import serve_pypi_package, stub_wheel
from tests.helpers import package_flow
from tests.helpers.canary import all_bytes_under
from tests.helpers.mcp_face import REPO, mcp_setup_argv
from tests.helpers.processes import command_line, descendants, runner_processes, runners_above
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME, PACKAGE = "io.test/npm-run", "mcp-setup-npm-run"

needs_npx = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


@needs_npx
@pytest.mark.parametrize("registry_kind", ["public", "private"])
async def test_mcp_setup_run_starts_an_installed_npm_server_on_node_with_no_npm_exec_above_it_also_once_pruned_or_never_noted(
    new_runtime, tmp_path: Path, canary: str, registry_kind: str
) -> None:
    data = tmp_path / "data"
    host_env = package_flow.runner_host_env(tmp_path)
    home = Path(host_env["HOME"])
    token = canary + "-registry-token"
    private = registry_kind == "private"
    with serve_npm_package(PACKAGE, "1.0.0", token=token if private else None) as registry:
        if private:  # its metadata and its tarball both need the token
            (home / ".npmrc").write_text(f"//{registry.url.removeprefix('http://')}/:_authToken=${{NPM_TOKEN}}\n")
            host_env["NPM_TOKEN"] = token
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

        env = run_env(host_env, data)
        assert await runners_of_run(env, tmp_path) == []
        # Pruned since (``npx`` clears old entries): `run` downloads it again first, sandboxed and
        # with the registry's login, and starts it without npm exec.
        entry = home / ".npm" / "_npx" / npx_entry_name(f"{PACKAGE}@1.0.0")
        shutil.rmtree(entry)
        shutil.rmtree(home / ".npm" / "_cacache")  # and npm's cache of the registry's answers: asked again
        asked = len(registry.tarball_requests)
        assert await runners_of_run(env, tmp_path) == []
        assert entry.is_dir() and len(registry.tarball_requests) == asked + 1
        # Never noted on this machine (installed by another one on a shared database): the same.
        for note in (data / "cache" / "starts").glob("*.json"):
            note.unlink()
        shutil.rmtree(entry)
        assert await runners_of_run(env, tmp_path) == []
        assert list((data / "cache" / "starts").glob("*.json"))  # noted again
    if private:
        assert set(registry.authorizations) == {f"Bearer {token}"}
        said = (tmp_path / "run-stderr").read_bytes()
        assert token.encode() not in said
        for path, content in all_bytes_under(data):
            assert token.encode() not in content, path


@needs_npx
async def test_mcp_setup_run_of_a_pruned_package_whose_private_registry_wants_a_login_it_lacks_says_so_and_starts_nothing(
    new_runtime, tmp_path: Path, canary: str
) -> None:
    data = tmp_path / "data"
    host_env = package_flow.runner_host_env(tmp_path)
    home = Path(host_env["HOME"])
    with serve_npm_package(PACKAGE, "1.0.0", token=canary) as registry:
        npmrc = home / ".npmrc"
        npmrc.write_text(f"//{registry.url.removeprefix('http://')}/:_authToken=${{NPM_TOKEN}}\n")
        package_flow.write_catalog_entry(
            tmp_path / "catalog",
            NAME,
            "The stub server as an npm package, from a private registry on loopback.",
            {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": PACKAGE},
        )
        runtime = new_runtime(
            Settings(home=data, registries="local", catalog_dir=tmp_path / "catalog", consent="never-ask"),
            keyring_backend=keyring.backends.fail.Keyring(),
            host_env={**host_env, "NPM_TOKEN": canary},
        )
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here")
        await package_flow.install(runtime, NAME, "the-servers-own-key", timeout=scaled(180))
        await runtime.aclose()
        shutil.rmtree(home / ".npm" / "_npx" / npx_entry_name(f"{PACKAGE}@1.0.0"))
        shutil.rmtree(home / ".npm" / "_cacache")
        npmrc.write_text("; the token was removed\n")
        asked = len(registry.requests)
        with anyio.fail_after(scaled(90)):
            done = await anyio.run_process(
                mcp_setup_argv("run", "npm-run"), env=run_env(host_env, data), cwd=str(REPO), check=False
            )
        tried_after = registry.requests[asked:]
    said = done.stderr.decode(errors="replace")
    assert done.returncode != 0 and done.stdout == b"", said
    assert "needs a login" in said and "your .npmrc" in said, said
    assert tried_after and not any(p.endswith(".tgz") for p in tried_after)  # the download asked; nothing came
    assert canary not in said


PYPI_NAME, PYPI_PACKAGE = "io.test/pypi-run", "mcp-setup-pypi-run"


@pytest.mark.skipif(package_flow.uv_bin() is None, reason="needs the uv wheel (pip install -e '.[test]')")
async def test_mcp_setup_run_downloads_a_pruned_uvx_server_of_a_private_index_first_with_its_login_and_starts_it_without_uv(
    new_runtime, tmp_path: Path, canary: str
) -> None:
    data = tmp_path / "data"
    host_env = package_flow.runner_host_env(tmp_path)
    home = Path(host_env["HOME"])
    # the index's pages and its wheel both need the login, kept in the user's netrc
    with serve_pypi_package(PYPI_PACKAGE, stub_wheel(PYPI_PACKAGE, "1.0.0"), login=("alice", canary)) as index:
        (home / ".netrc").write_text(f"machine 127.0.0.1 login alice password {canary}\n")
        package_flow.write_catalog_entry(
            tmp_path / "catalog",
            PYPI_NAME,
            "The stub server as a PyPI package, from a private index on loopback.",
            {"registryType": "pypi", "registryBaseUrl": index.url, "identifier": PYPI_PACKAGE},
        )
        runtime = new_runtime(
            Settings(home=data, registries="local", catalog_dir=tmp_path / "catalog", consent="never-ask"),
            keyring_backend=keyring.backends.fail.Keyring(),
            host_env=host_env,
            which=lambda name: shutil.which(name, path=host_env["PATH"]),
        )
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here")
        await package_flow.install(runtime, PYPI_NAME, "the-servers-own-key", timeout=scaled(180))
        await runtime.aclose()
        (note,) = (data / "cache" / "starts").glob("*.json")
        environment = Path(json.loads(note.read_text())["path"])
        shutil.rmtree(environment)  # pruned (uv cache prune / clean)
        for answers in (home / ".cache" / "uv").glob("simple-v*"):
            shutil.rmtree(answers)  # and uv's copies of the index's pages: asked again
        asked = len(index.requests)
        env = run_env(host_env, data)
        assert await runners_of_run(env, tmp_path, "pypi-run", f"bin/{PYPI_PACKAGE}") == []
        remade = Path(json.loads(note.read_text())["path"])  # uv names the new one anew
        assert remade.is_dir() and remade != environment and len(index.requests) > asked
    login = "Basic " + base64.b64encode(f"alice:{canary}".encode()).decode()
    assert set(index.authorizations) == {login}
    assert canary.encode() not in (tmp_path / "run-stderr").read_bytes()
    for path, content in all_bytes_under(data):
        assert canary.encode() not in content, path


def run_env(host_env: dict[str, str], data: Path) -> dict[str, str]:
    return {
        **host_env,
        "MCP_SETUP_HOME": str(data),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        "PYTHONPATH": str(REPO),
    }


async def runners_of_run(
    env: dict[str, str], tmp_path: Path, slug: str = "npm-run", marker: str = f"{PACKAGE}/"
) -> list[str]:
    """``mcp-setup run <slug>`` answering a call; the runner processes above its server (a
    process whose command line holds ``marker``); its stderr is added to ``tmp_path/run-stderr``."""
    argv = mcp_setup_argv("run", slug)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(REPO))
    with open(tmp_path / "run-stderr", "ab") as errlog, anyio.fail_after(scaled(90)):
        async with Client(stdio_client(params, errlog=errlog)) as client:  # type: ignore[arg-type]
            result = await client.call_tool("echo", {"text": "through run"})
            assert result.content[0].text == "through run"  # type: ignore[union-attr]
            mine = descendants(os.getpid())
            servers = [p for p in mine if any(marker in part for part in command_line(p))]
            assert servers, [command_line(p) for p in mine]
            assert runner_processes(servers) == []  # the server itself is node (and its python)
            return runners_above(servers)
