"""Stub server launches and installs for the connection manager's tests."""

from __future__ import annotations

import sys

from setup_agent.launch.spec import LaunchSpec
from setup_agent.store.database import Store
from tests.stub_server.bundle import SERVER_PY, sha256_hex


def stub_launch(expected: str, mode: str = "", **extra: str) -> dict:
    env = {"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(expected), "STUB_MODE": mode, **extra}
    return LaunchSpec(command=sys.executable, args=[str(SERVER_PY)], env=env).model_dump(mode="json")


def install(
    store: Store, name: str, value: str, expected: str | None = None, mode: str = "", enabled: bool = True, **extra: str
):
    server = store.servers.install(
        qualified_name=name,
        source="local",
        version="1.0.0",
        package_type="stdio",
        launch_spec=stub_launch(expected or value, mode, **extra),
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (value, True)},
    )
    if not enabled:
        store.servers.set_enabled(server.server_id, False)
    return server
