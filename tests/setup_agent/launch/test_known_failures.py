"""Issue 26, known failures repaired: a failed start names what was launched and which part failed,
recognises npx/uvx/docker failure signatures, and offers the repaired launch, which the consent
shows, the user approves, the test runs and the install records as tested.

The uvx flows are real: a real ``uvx`` against PyPI indexes on loopback
(tests/fakes/pypi_projects.py), a private HOME with its own cold uv cache and no Python downloads.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.errors import InvalidInput
from setup_agent.launch.repairs import apply_repair, diagnose
from setup_agent.launch.spec import LaunchSpec
from setup_agent.setup.service import CallContext
from tests.fakes.pypi_projects import executable_mismatch, fastmcp_projects, needs_python, serve_pypi_projects
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


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


def uvx_spec(identifier: str, *before: str) -> LaunchSpec:
    return LaunchSpec(
        command="uvx",
        args=["--default-index", "http://i.example/simple", *before, f"{identifier}==1.0.0"],
        package_type="pypi",
        identifier=identifier,
        version="1.0.0",
        runner="uvx",
    )


# Real error output, as uvx and the servers printed it (uv 0.13, mcp 2.3).
UVX_EXECUTABLE = (
    "Installed 1 package in 15ms\nAn executable named `mcp-weather-server` is not provided by package "
    "`mcp-weather-server`.\nThe following executables are available:\n- mcp_weather_server\n\n"
    "Use `uvx --from mcp-weather-server mcp_weather_server` instead.\n"
)
FASTMCP = (
    '  File "…/site-packages/mcp/server/fastmcp/__init__.py", line 9, in <module>\n'
    "ModuleNotFoundError: No module named 'mcp.server.fastmcp'. This is mcp 2.x, where FastMCP was renamed to "
    "MCPServer (from mcp.server.mcpserver import MCPServer) and other APIs changed; see the migration guide at "
    "https://py.sdk.modelcontextprotocol.io/v2/migration/#fastmcp-renamed-to-mcpserver or pin 'mcp<2' to keep "
    "running v1 code.\n"
)
PYTHON = (
    "error: No solution found when resolving tool dependencies\n  cause: Because the current Python version "
    "(3.11.7) does not satisfy Python>=3.12 and newpy==1.0.0 depends on Python>=3.12, we can conclude that "
    "newpy==1.0.0 cannot be used.\n"
)


def test_uvxs_executable_hint_becomes_a_from_repair() -> None:
    spec = uvx_spec("mcp-weather-server")
    found = diagnose(spec, UVX_EXECUTABLE)
    assert found.part == "package" and found.repair is not None
    assert found.repair.code == "uvx-executable:mcp_weather_server"
    assert apply_repair(spec, found.repair.code).args == [
        "--default-index",
        "http://i.example/simple",
        "--from",
        "mcp-weather-server==1.0.0",
        "mcp_weather_server",
    ]


def test_an_unpinned_fastmcp_server_under_mcp_2_is_repaired_with_mcp_below_2() -> None:
    spec = uvx_spec("weather-fastmcp")
    found = diagnose(spec, FASTMCP)
    assert found.part == "package" and found.repair is not None and found.repair.code == "uvx-with:mcp<2"
    assert apply_repair(spec, "uvx-with:mcp<2").args[-3:] == ["--with", "mcp<2", "weather-fastmcp==1.0.0"]


def test_a_package_needing_a_newer_python_is_a_runner_failure_repaired_with_that_python() -> None:
    spec = uvx_spec("newpy")
    found = diagnose(spec, PYTHON)
    assert found.part == "runner" and found.repair is not None and found.repair.code == "uvx-python:3.12"
    assert apply_repair(spec, found.repair.code).args[-3:] == ["--python", "3.12", "newpy==1.0.0"]
    # a `--from SPEC python -m module` launch gets the option before --from
    moduled = LaunchSpec(
        command="uvx",
        args=["--from", "newpy==1.0.0", "python", "-m", "newpy"],
        package_type="pypi",
        identifier="newpy",
        version="1.0.0",
        runner="uvx",
    )
    assert apply_repair(moduled, "uvx-python:3.12").args[:4] == ["--python", "3.12", "--from", "newpy==1.0.0"]


# Memphora (memphora-mcp 0.1.3, the registry's latest) under mcp 2.3, as uvx started it.
MEMPHORA = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/.cache/uv/archive-v0/WY1T/lib/python3.11/site-packages/memphora_mcp/server.py", line 56, '
    "in <module>\n    @server.list_tools()\n     ^^^^^^^^^^^^^^^^^\n"
    "AttributeError: 'Server' object has no attribute 'list_tools'\n"
)
# ipybox 0.7.1 (the registry's version) under mcp 2.3.
IPYBOX = (
    '  File "/home/u/.cache/uv/archive-v0/cj7b/lib/python3.11/site-packages/ipybox/mcp_client.py", line 9, '
    "in <module>\n    from mcp.client.streamable_http import streamablehttp_client\n"
    "ImportError: cannot import name 'streamablehttp_client' from 'mcp.client.streamable_http' "
    "(/home/u/.cache/uv/archive-v0/cj7b/lib/python3.11/site-packages/mcp/client/streamable_http.py)\n"
)


@pytest.mark.parametrize(("identifier", "stderr"), [("memphora-mcp", MEMPHORA), ("ipybox", IPYBOX)])
def test_the_mcp_2_breaks_of_memphora_and_ipybox_are_repaired_with_mcp_below_2(identifier, stderr) -> None:
    spec = uvx_spec(identifier)
    found = diagnose(spec, stderr)
    assert found.part == "package" and "mcp 1.x" in found.reason
    assert found.repair is not None and found.repair.code == "uvx-with:mcp<2"
    assert apply_repair(spec, found.repair.code).args[2:4] == ["--with", "mcp<2"]


def test_an_attribute_error_of_a_servers_own_object_is_not_read_as_an_mcp_break() -> None:
    found = diagnose(uvx_spec("some-server"), "AttributeError: 'Server' object has no attribute 'hostname'\n")
    assert found.repair is None


# uv 0.13's own words behind a network that inspects TLS with an authority uv's roots lack.
UNTRUSTED = (
    "error: Failed to fetch: https://pypi.org/simple/mcp-server-time/\n"
    "  cause: error sending request for url (https://pypi.org/simple/mcp-server-time/)\n"
    "  cause: client error (Connect)\n  cause: invalid peer certificate: UnknownIssuer\n\n"
    "hint: Consider enabling use of system TLS certificates with the `--system-certs` command-line flag\n"
)


def test_an_index_certificate_uv_does_not_trust_is_repaired_with_the_computers_certificates() -> None:
    spec = uvx_spec("mcp-server-time")
    found = diagnose(spec, UNTRUSTED)
    assert found.part == "runner" and "certificate" in found.reason
    assert found.repair is not None and found.repair.code == "uvx-native-tls"
    repaired = apply_repair(spec, found.repair.code)
    assert repaired.args == ["--default-index", "http://i.example/simple", "--native-tls", "mcp-server-time==1.0.0"]
    assert diagnose(repaired, UNTRUSTED).repair is None  # never offered twice


def test_the_download_of_a_repaired_launch_uses_the_computers_certificates_too() -> None:
    from setup_agent.launch.fetch_plans import fetch_plan, prefetch_plan

    repaired = apply_repair(uvx_spec("mcp-server-time"), "uvx-native-tls")
    full, early = fetch_plan(repaired), prefetch_plan(repaired)
    assert full is not None and "--native-tls" in full.argv
    assert early is not None and "--native-tls" in early.argv


@needs_uv
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap to lay a trust store over /etc/ssl")
def test_a_real_uv_behind_an_index_only_the_computer_trusts_fails_as_said_and_its_repair_installs(
    tmp_path: Path,
) -> None:
    """A TLS index on loopback whose authority is in the computer's store (a bundle laid over
    /etc/ssl/certs/ca-certificates.crt in a namespace of the test's own) and not in uv's roots."""
    import subprocess

    from setup_agent.launch.fetch_plans import fetch_plan
    from tests.helpers.tls import inspecting_authority

    authority = inspecting_authority(tmp_path / "tls")
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    store = tmp_path / "tls" / "store.crt"
    store.write_bytes((system.read_bytes() if system.is_file() else b"") + authority.ca_file.read_bytes())
    uvx = str(Path(str(_uv_bin())).with_name("uvx"))

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
        trusted = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(store), str(system)]
        return subprocess.run(
            [*trusted, uvx, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
            stdin=subprocess.DEVNULL,
        )

    with serve_pypi_projects(needs_python("tls-probe-pkg", ">=3.8"), tls=authority.server) as index:
        spec = LaunchSpec(
            command="uvx",
            args=["--default-index", index.url, "tls-probe-pkg==1.0.0"],
            package_type="pypi",
            identifier="tls-probe-pkg",
            version="1.0.0",
            runner="uvx",
        )
        failed = run(spec.args)
        assert failed.returncode != 0
        found = diagnose(spec, failed.stderr)
        assert found.part == "runner" and found.repair is not None and found.repair.code == "uvx-native-tls"
        repaired = apply_repair(spec, found.repair.code)
        plan = fetch_plan(repaired)
        assert plan is not None
        fetched = run(list(plan.argv[1:]))  # the download phase of the repaired launch
        assert fetched.returncode == 0, fetched.stderr[-2000:]
        started = run(repaired.args)  # the stub server: it reads stdin to its end, then exits
        assert started.returncode == 0, started.stderr[-2000:]
    assert not any("UnknownIssuer" in r.stderr for r in (fetched, started))


@pytest.mark.parametrize(
    ("command", "stderr", "part"),
    [
        ("npx", "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nodejsmcp", "package"),
        ("npx", "npm error could not determine executable to run", "package"),
        ("npx", "npm warn EBADENGINE Unsupported engine { required: { node: '>=20' } }", "runner"),
        ("docker", "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock.", "runner"),
        (
            "docker",
            "docker: Error response from daemon: pull access denied for acme/x, repository does not exist",
            "package",
        ),
        ("python3", "Traceback (most recent call last):\nKeyError: 'WEATHER_API_KEY'", "server"),
    ],
)
def test_the_part_that_failed_is_named_for_well_known_signatures(command, stderr, part) -> None:
    spec = LaunchSpec(command=command, args=["x"], package_type="npm", identifier="x", runner=command)
    assert diagnose(spec, stderr).part == part


@pytest.mark.parametrize(
    ("command", "stderr"),
    [
        # npm 10's words when npx at the start asks a registry that protects its metadata (real output)
        (
            "npx",
            "npm error code E401\nnpm error Unable to authenticate, your authentication token seems to be invalid.\n"
            "npm error To correct this please try logging in again with:\nnpm error   npm login",
        ),
        # uv's, its 401 in a hint below "No solution found" (real output)
        (
            "uvx",
            "error: No solution found when resolving tool dependencies\n  cause: Because privpkg was not found in "
            "the package registry and you require privpkg==1.0.0, we can conclude that your requirements are "
            "unsatisfiable.\n\nhint: An index URL (http://127.0.0.1:36125/simple) could not be queried due to a "
            "lack of valid authentication credentials (401 Unauthorized)",
        ),
    ],
)
def test_a_runner_that_a_private_registry_refuses_at_the_start_is_told_as_the_login_only_the_download_gets(
    command: str, stderr: str
) -> None:
    spec = LaunchSpec(command=command, args=["x"], package_type="npm", identifier="x", runner=command)
    found = diagnose(spec, stderr)
    assert found.part == "runner" and found.repair is None
    assert "wants a login" in found.reason and "to the download only, never to a server's start" in found.reason


def test_an_image_without_a_build_for_this_machine_is_repaired_with_its_amd64_build() -> None:
    spec = LaunchSpec(
        command="docker",
        args=["run", "-i", "--rm", "acme/x:1"],
        package_type="oci",
        identifier="acme/x",
        runner="docker",
    )
    found = diagnose(spec, "docker: no matching manifest for linux/arm64/v8 in the manifest list entries.")
    assert found.repair is not None and found.repair.code == "docker-platform:linux/amd64"
    assert apply_repair(spec, found.repair.code).args[:3] == ["run", "--platform", "linux/amd64"]


@pytest.mark.parametrize(
    "code",
    [
        "uvx-executable:x;rm -rf /",
        "uvx-with:mcp<2 && curl",
        "uvx-python:latest",
        "nonsense",
        "docker-platform:linux/amd64",
    ],
)
def test_a_repair_that_is_unknown_malformed_or_not_for_this_launch_is_refused(code) -> None:
    with pytest.raises(InvalidInput):
        apply_repair(uvx_spec("pkg"), code)


# --- the flow, with a real uvx ------------------------------------------------------------------

NAME = "io.test/repairable"


def host_env(tmp_path: Path) -> dict[str, str]:
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


def make_runtime(
    new_runtime, tmp_path: Path, index_url: str, identifier: str, memory_keyring, consent: str = "never-ask"
) -> Runtime:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    doc = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": NAME,
        "description": "A PyPI server that needs a repair to start.",
        "version": "1.0.0",
        "packages": [
            {
                "registryType": "pypi",
                "registryBaseUrl": index_url,
                "identifier": identifier,
                "version": "1.0.0",
                "transport": {"type": "stdio"},
                "environmentVariables": [{"name": "STUB_REQUIRE", "value": "0"}],
            }
        ],
    }
    (catalog / "repairable.json").write_text(json.dumps(doc))
    env = host_env(tmp_path)
    return new_runtime(
        Settings(
            home=tmp_path / "data",
            registries="local",
            catalog_dir=catalog,
            consent=consent,
            probe_timeout_seconds=60,
            adopt_tested_servers=False,
        ),
        keyring_backend=memory_keyring,
        host_env=env,
        which=lambda name: shutil.which(name, path=env["PATH"]),
    )


async def call(runtime: Runtime, tool: str, **args: Any) -> dict:
    with anyio.fail_after(scaled(150)):
        return await runtime.service.call(tool, {"qualified_name": NAME, **args}, CallContext(installed_by="agent"))


@needs_uv
async def test_a_package_whose_executable_is_named_otherwise_is_repaired_tested_and_installed_as_tested(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    with serve_pypi_projects(executable_mismatch("wx-stub")) as index:
        runtime = make_runtime(new_runtime, tmp_path, index.url, "wx-stub", memory_keyring)
        try:
            failed = await call(runtime, "mcp_setup_test_connection")
            error = failed["error"]
            assert error["code"] == "exited", failed
            assert "pypi package wx-stub 1.0.0 (uvx)" in error["message"] and "The package failed" in error["message"]
            assert error["details"]["failed"] == "package"
            repair = error["details"]["repair"]
            assert repair["code"] == "uvx-executable:wx_stub" and "--from wx-stub==1.0.0 wx_stub" in repair["command"]
            repaired = await call(runtime, "mcp_setup_test_connection", repair=repair["code"])
            assert repaired["ok"] is True, repaired
            assert {t["name"] for t in repaired["tools"]} >= {"echo"}
            installed = await call(runtime, "mcp_setup_install_and_connect", repair=repair["code"])
            assert installed["ok"] is True, installed
            stored = runtime.store.servers.get_by_name(NAME)
            assert stored is not None and stored.launch_spec["args"][-3:] == ["--from", "wx-stub==1.0.0", "wx_stub"]
        finally:
            await runtime.aclose()


@needs_uv
async def test_an_unpinned_fastmcp_server_is_repaired_with_mcp_below_2_and_then_lists_its_tools(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    with serve_pypi_projects(fastmcp_projects("fmcp-stub")) as index:
        runtime = make_runtime(new_runtime, tmp_path, index.url, "fmcp-stub", memory_keyring)
        try:
            failed = await call(runtime, "mcp_setup_test_connection")
            error = failed["error"]
            assert error["code"] == "exited" and error["details"]["failed"] == "package", failed
            assert error["details"]["repair"]["code"] == "uvx-with:mcp<2"
            repaired = await call(runtime, "mcp_setup_test_connection", repair="uvx-with:mcp<2")
            assert repaired["ok"] is True, repaired
            assert {t["name"] for t in repaired["tools"]} >= {"echo"}
            assert any(p.startswith("/simple/mcp") for p in index.requests)
        finally:
            await runtime.aclose()


@needs_uv
async def test_a_package_needing_a_newer_python_names_the_runner_and_offers_that_python(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    with serve_pypi_projects(needs_python("newpy-stub", ">=3.12")) as index:
        runtime = make_runtime(new_runtime, tmp_path, index.url, "newpy-stub", memory_keyring)
        try:
            failed = await call(runtime, "mcp_setup_test_connection")
        finally:
            await runtime.aclose()
    error = failed["error"]
    assert error["code"] == "exited" and error["details"]["failed"] == "runner", failed
    assert error["details"]["repair"]["code"] == "uvx-python:3.12"
    assert "The runner failed" in error["message"] and "newpy-stub 1.0.0" in error["message"]


@needs_uv
async def test_the_consent_for_a_repaired_launch_shows_the_changed_command_as_a_warning_to_accept(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    with serve_pypi_projects(executable_mismatch("wx-stub")) as index:
        runtime = make_runtime(new_runtime, tmp_path, index.url, "wx-stub", memory_keyring, consent="ask")
        try:
            result = await call(runtime, "mcp_setup_test_connection", repair="uvx-executable:wx_stub")
            assert result["error"]["code"] == "consent_required", result
            request = runtime.consents.pending()[-1].request.public()
        finally:
            await runtime.aclose()
    (warning,) = [w for w in request["warnings"] if w["code"] == "repaired_launch"]
    assert "uvx-executable:wx_stub" in warning["message"] and "--from wx-stub==1.0.0 wx_stub" in warning["message"]
    assert request["command_line"][-3:] == ["--from", "wx-stub==1.0.0", "wx_stub"]
    assert index.requests == []  # nothing ran or was fetched before the user approved


# --- one real server from the real PyPI -------------------------------------------------------


def _pypi_reachable() -> bool:
    import socket

    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


def make_real_runtime(new_runtime, tmp_path: Path, memory_keyring) -> Runtime:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    doc = {  # as io.github.isdaniel/mcp_weather_server publishes it, at its current version
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": NAME,
        "description": "Weather information from the Open-Meteo API.",
        "version": "0.6.1",
        "packages": [
            {
                "registryType": "pypi",
                "registryBaseUrl": "https://pypi.org",
                "identifier": "mcp-weather-server",
                "version": "0.6.1",
                "transport": {"type": "stdio"},
            }
        ],
    }
    (catalog / "weather.json").write_text(json.dumps(doc))
    env = host_env(tmp_path)
    env.update(
        {
            k: v
            for k in (
                "SSL_CERT_FILE",
                "SSL_CERT_DIR",
                "HTTPS_PROXY",
                "https_proxy",
                "HTTP_PROXY",
                "http_proxy",
                "NO_PROXY",
                "no_proxy",
            )
            if (v := os.environ.get(k))
        }
    )  # how this machine reaches PyPI
    return new_runtime(
        Settings(
            home=tmp_path / "data",
            registries="local",
            catalog_dir=catalog,
            consent="never-ask",
            probe_timeout_seconds=120,
            adopt_tested_servers=False,
        ),
        keyring_backend=memory_keyring,
        host_env=env,
        which=lambda name: shutil.which(name, path=env["PATH"]),
    )


@needs_uv
@pytest.mark.skipif(not _pypi_reachable(), reason="needs pypi.org")
async def test_the_real_mcp_weather_server_from_pypi_is_repaired_twice_and_then_lists_its_tools(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    """mcp-weather-server 0.6.1 as published: its executable is mcp_weather_server, and it imports
    McpError, which mcp 2.x (what its unpinned ``mcp[cli]>=1.12`` gets) no longer has."""
    runtime = make_real_runtime(new_runtime, tmp_path, memory_keyring)
    try:
        first = (await call(runtime, "mcp_setup_test_connection"))["error"]
        assert first["details"]["repair"]["code"] == "uvx-executable:mcp_weather_server", first
        second = (await call(runtime, "mcp_setup_test_connection", repair=first["details"]["repair"]["code"]))["error"]
        assert second["details"]["failed"] == "package", second
        both = second["details"]["repair"]["code"]
        assert both == "uvx-executable:mcp_weather_server uvx-with:mcp<2", second
        tested = await call(runtime, "mcp_setup_test_connection", repair=both)
    finally:
        await runtime.aclose()
    assert tested["ok"] is True, json.dumps(tested)[:2000]
    assert {"get_current_weather", "get_air_quality"} <= {t["name"] for t in tested["tools"]}
