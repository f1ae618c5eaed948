"""A registry that publishes a newer version of the stub, and the installed one, for ``mcp-setup update``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
from keyring.backends import fail

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.setup import InstallRequest
from setup_agent.setup.service import CallContext
from tests.helpers.mcp_face import REPO, mcp_setup_argv
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

STUB = "io.github.mcp-setup/stub"


def publish(root: Path, catalog: Path, version: str, expected: str) -> None:
    bundle, sha = build_stub_bundle(root / f"dist-{version}", expected_value=expected)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, version=version)))


async def install_v1(home: Path, catalog: Path, value: str, **more: str) -> str:
    """Installs the stub from the local catalog, or with ``official_url`` (and ``version``) from there."""
    official = more.get("official_url")
    settings = (
        Settings(home=home, registries="official", official_registry_url=official)
        if official
        else (Settings(home=home, registries="local", catalog_dir=catalog))
    )
    runtime = build_runtime(settings, keyring_backend=fail.Keyring())
    try:
        with anyio.fail_after(scaled(60)):
            ref = runtime.refs.mint("STUB_API_KEY", value)
            args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
            if "version" in more:
                args["version"] = more["version"]
            result = await runtime.service.install_and_connect(InstallRequest.parse(args), CallContext())
        assert result["status"] == "connected"
        return result["server_id"]
    finally:
        await runtime.aclose()


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcp_setup_argv(*argv), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(120))


def installed(env: dict[str, str]) -> list[dict]:
    return json.loads(run(env, "list", "--json").stdout)["servers"]
