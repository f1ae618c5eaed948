"""A live connection's start (setup_agent/gateway/live.py) prepares the server's folder without
following what the server left there: a real store, a real MCPB stub bundle, a real process."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from setup_agent.gateway.connections import ConnectionManager
from setup_agent.launch import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, sha256_hex
from tests.stub_server.server import Stub

pytestmark = pytest.mark.anyio


async def test_a_bundle_folder_a_server_replaced_with_a_link_is_unpacked_anew_and_no_planted_link_is_written_through(
    tmp_path: Path, canary: str
) -> None:
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary)
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    manager = ConnectionManager(
        store, Redactor(), install_root=tmp_path / "servers", backoff=(), connect_timeout=scaled(20)
    )
    spec = LaunchSpec(
        command=sys.executable,
        args=["${__dirname}/server/server.py"],
        env={"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(canary)},
        package_type="mcpb",
        identifier=bundle.as_uri(),
        file_sha256=sha,
        needs_install_dir=True,
    )
    server = store.servers.install(
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
    # What the server left in its own folder before this start: its bundle folder swapped for a
    # link to code of its choosing, and a link where the host writes the bundle it downloads.
    install_dir = tmp_path / "servers" / server.server_id
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "server").mkdir(parents=True)
    (elsewhere / "server" / "server.py").write_text("raise SystemExit('the planted code ran')\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    install_dir.mkdir(parents=True)
    (install_dir / "bundle").symlink_to(elsewhere, target_is_directory=True)
    (install_dir / "bundle.mcpb.part").symlink_to(victim)
    try:
        with anyio.fail_after(scaled(60)):
            await manager.start()
        status = manager.status(server.server_id)
        assert status.status == "connected", status
        bundle_dir = install_dir / "bundle"
        assert bundle_dir.is_dir() and not bundle_dir.is_symlink()  # unpacked anew from the pinned bundle
        assert (bundle_dir / "server" / "server.py").read_bytes() != (elsewhere / "server" / "server.py").read_bytes()
        assert victim.read_text() == "the user's own file\n"
        assert sorted(p.name for p in elsewhere.iterdir()) == ["server"]
    finally:
        await manager.aclose()
        store.close()
