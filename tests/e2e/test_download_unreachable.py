"""With the package registry unreachable, a setup fails at once and says so; a retry works once
the registry answers.

A real ``npx`` is pointed at a closed port on loopback (the catalog entry's ``registryBaseUrl``,
which becomes npm's ``--registry``): npm would retry a refused connection for over a minute. Then
a one-package npm registry (tests/fakes/npm_registry.py) starts on that same port and the exact
command the failure printed is run again. Both faces a person meets: ``mcp-setup add`` and the
page's ``/rpc`` of a running ``mcp-setup serve``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.browser.serve import Served, start_serve, stop_serve
from tests.fakes import closed_port_url
from tests.fakes.npm_registry import serve_npm_package
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.timeouts import scaled

NAME = "io.test/npm-offline"
PACKAGE = "mcp-setup-npm-offline"
SPEC = f"{PACKAGE}@1.0.0"

pytestmark = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


def catalog_at(root: Path, registry_url: str) -> Path:
    catalog = root / "catalog"
    write_catalog_entry(
        catalog,
        NAME,
        "The stub server as an npm package, from a registry that is not answering yet.",
        {"registryType": "npm", "registryBaseUrl": registry_url, "identifier": PACKAGE},
    )
    return catalog


def run_cli(argv: list[str], env: dict[str, str], stdin: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=str(REPO), input=stdin, capture_output=True, text=True, timeout=timeout)


def retry_command(output: str) -> list[str]:
    """The command the failure said to run again, as argv (``mcp-setup`` as this checkout runs it)."""
    line = next(line for line in output.splitlines() if "try again: mcp-setup " in line)
    words = shlex.split(line.split("try again: ", 1)[1])
    assert words[0] == "mcp-setup"
    return mcp_setup_argv(*words[1:])


def test_add_with_the_registry_unreachable_fails_at_once_naming_the_package_and_registry_and_its_retry_works(
    tmp_path: Path, canary: str
) -> None:
    registry = closed_port_url()
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog_at(tmp_path, registry)))
    argv = mcp_setup_argv("add", NAME, "--yes", "--secret", "STUB_API_KEY=-")
    failed = run_cli(argv, env, canary, timeout=scaled(15))
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert f"Could not download {SPEC} from {registry}: nothing answers there (connection refused)." in output
    assert "· downloaded" not in output and "starting the server" not in output  # done only when npm says so
    assert "Traceback" not in output and canary not in output
    again = retry_command(output)
    assert again == mcp_setup_argv("add", NAME, "--yes", "--secret", "STUB_API_KEY=-")

    with serve_npm_package(PACKAGE, "1.0.0", port=int(registry.rsplit(":", 1)[1])) as answering:
        done = run_cli(again, env, canary, timeout=scaled(120))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "✓ connected" in output and canary not in output
    assert len(answering.tarball_requests) == 1


def test_the_pages_rpc_with_the_registry_unreachable_fails_at_once_with_download_failed_and_a_retry_works(
    tmp_path: Path, canary: str
) -> None:
    registry = closed_port_url()
    served = start_serve(tmp_path, catalog_at(tmp_path, registry))
    try:
        ref = secret_ref(served, canary)
        began = time.monotonic()
        failed = served.rpc("mcp_setup_test_connection", {"qualified_name": NAME, "env_refs": {"STUB_API_KEY": ref}})
        assert time.monotonic() - began < scaled(15), "the download failure took as long as npm's retries"
        error = failed["error"]["data"]
        assert error["code"] == "download_failed", failed
        assert (
            error["message"]
            == f"Could not download {SPEC} from {registry}: nothing answers there (connection refused)."
        )
        assert error["details"]["cause"] == "nothing answers there (connection refused)"
        assert error["details"]["package"] == SPEC and error["details"]["registry"] == registry
        with serve_npm_package(PACKAGE, "1.0.0", port=int(registry.rsplit(":", 1)[1])) as answering:
            passed = served.rpc(
                "mcp_setup_test_connection", {"qualified_name": NAME, "env_refs": {"STUB_API_KEY": ref}}
            )
        assert "result" in passed and {t["name"] for t in passed["result"]["tools"]} >= {"echo"}, passed
        assert len(answering.tarball_requests) == 1
        assert canary not in json.dumps([failed, passed])
    finally:
        stop_serve(served)
    assert canary not in served.stderr()


def secret_ref(served: Served, value: str) -> str:
    """A ref for the stub's key, typed in the page's secret box."""
    asked = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your key", "server": NAME})
    prompt = asked["result"]
    with served.client() as http:
        answered = http.post(f"/api/secrets/{prompt['prompt_id']}", json={"value": value}, headers=served.headers())
    assert answered.status_code == 200
    return prompt["ref"]
