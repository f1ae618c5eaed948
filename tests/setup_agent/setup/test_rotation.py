"""Replacing a stored secret (:func:`setup_agent.setup.rotate_secret`, what ``mcp-setup rotate``
and the page card's "Replace" run) tests the server with the new value first: for an MCPB bundle
installed where this machine has no folder of it (another machine on the shared database, or its
folder gone), the bundle is unpacked here first, as a live start does. A real runtime, a real
stub bundle, a real process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from setup_agent.launch import LaunchSpec
from setup_agent.setup import rotate_secret
from tests.helpers.runtime import NewRuntime
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, sha256_hex
from tests.stub_server.server import Stub

pytestmark = pytest.mark.anyio


async def test_a_bundle_whose_folder_this_machine_lacks_is_unpacked_and_answers_with_the_new_value(
    tmp_path: Path, canary: str, new_runtime: NewRuntime
) -> None:
    new = canary + "-new"
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=new)
    runtime = new_runtime()
    spec = LaunchSpec(
        command=sys.executable,
        args=["${__dirname}/server/server.py"],
        env={"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(new)},
        package_type="mcpb",
        identifier=bundle.as_uri(),
        file_sha256=sha,
        needs_install_dir=True,
    )
    server = runtime.store.servers.install(  # as another machine installed it: no folder here
        qualified_name="io.test/bundled",
        source="local",
        version="1.0.0",
        package_type="mcpb",
        launch_spec=spec.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        tools=Stub(set(), None).tools,
    )
    folder = runtime.connections.bundle_dir(server.server_id)
    assert not folder.exists()

    with anyio.fail_after(scaled(60)):
        result = await rotate_secret(
            runtime.service, server.server_id, "STUB_API_KEY", runtime.refs.mint("STUB_API_KEY", new)
        )

    assert result["tools"] == len(Stub(set(), None).tools)
    assert (folder / "server" / "server.py").is_file() and not folder.is_symlink()
    assert runtime.store.values.env_values(server.server_id)["STUB_API_KEY"].reveal() == new
    assert new not in json.dumps(result) and canary not in json.dumps(result)
