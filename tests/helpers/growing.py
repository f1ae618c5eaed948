"""The growing stub (tests/stub_server/growing.py) installed in a data dir, as an install leaves it."""

from __future__ import annotations

import sys
from pathlib import Path

from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.paths import REPO

GROWING = REPO / "tests" / "stub_server" / "growing.py"


#: Its tools before it grows, as it lists them (what its test would have pinned).
BASE_TOOLS = [
    {"name": "grow", "description": "Add the tool grown.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "nap", "description": "Answer after a long nap.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "touch", "description": "Change the notes.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "more", "description": "Add a resource.", "inputSchema": {"type": "object", "properties": {}}},
]


def install_growing(home: Path, key: Path, *, listed: bool = False, **env: str) -> tuple[str, Store]:
    """Install it into the data dir ``home`` whose data key is the file ``key``: ``listed``, with
    the tools its test saw pinned; else before its first list (the first list a gateway reads is
    pinned). Returns its server id and the open store."""
    store = Store.for_data_dir(home, Vault.from_key_file(key), None)
    # Relative: the server's working dir is its install dir, the one folder a sandboxed server
    # writes, shared by every process on the data dir.
    spec = LaunchSpec(command=sys.executable, args=[str(GROWING)], env={"STUB_GROWN_FILE": "grown", **env})
    server = store.servers.install(
        qualified_name="io.test/growing",
        source="local",
        version="1.0.0",
        package_type="stdio",
        launch_spec=spec.model_dump(mode="json"),
        installed_by="agent",
        tools_hash="x",
        env={},
        title="Growing",
        tools=BASE_TOOLS if listed else None,
    )
    return server.server_id, store
