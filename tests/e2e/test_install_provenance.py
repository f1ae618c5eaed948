"""An install through ``mcp-setup mcp`` records who made it as the host conventions say: an MCP
client that names itself is ``mcp:<its name, normalised>``, one that does not is ``mcp``; the
principal that authenticated stays in the audit beside it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.helpers.mcp_face import (
    REPO,
    Browser,
    Recorder,
    call,
    elicitation_answering,
    face_env,
    mcp_setup_argv,
    mcp_setup_client,
)
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import stub_catalog

pytestmark = pytest.mark.anyio

STUB = "io.github.mcp-setup/stub"


@pytest.mark.parametrize(
    ("client_name", "installed_by", "audited"),
    [
        ("Eval Client 2", "mcp:eval-client-2", "mcp:eval-client-2 (client:stdio via eval-client-2)"),
        ("", "mcp", "mcp (client:stdio)"),
    ],
)
async def test_an_install_over_stdio_is_listed_as_installed_by_mcp_and_the_client_and_audited_with_its_principal(
    tmp_path: Path, canary: str, client_name: str, installed_by: str, audited: str
) -> None:
    catalog = stub_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    answering = elicitation_answering(Browser(), [canary])
    with anyio.fail_after(scaled(120)):
        async with mcp_setup_client(
            tmp_path,
            tmp_path / "stderr.log",
            Recorder(),
            client_name=client_name,
            elicitation_callback=answering,
            env=env,
        ) as client:
            asked = await call(
                client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key", "server": STUB}
            )
            installed = await call(
                client,
                "mcp_setup_install_and_connect",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": asked["ref"]}},
            )
            assert installed["status"] == "connected", installed
            (listed,) = (await call(client, "mcp_setup_list_servers"))["servers"]
            assert listed["installed_by"] == installed_by

    def cli(*args: str) -> str:
        done = subprocess.run(
            mcp_setup_argv(*args), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    (row,) = json.loads(cli("list", "--json"))["servers"]
    assert row["installed_by"] == installed_by
    audit = cli("audit", "--json")
    assert f'"actor": "{audited}"' in audit or audited in audit, audit
    assert canary not in audit
