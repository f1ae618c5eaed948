"""Many installed servers whose tools are the size real servers' are: enough to pass a context budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.connections import stub_launch
from tests.stub_server.server import Stub


def padding(server: int, count: int) -> list[dict[str, Any]]:
    """``count`` tools the size real servers' tools are (a sentence or two, a few arguments)."""
    return [
        {
            "name": f"action_{i:02d}",
            "description": f"Does action {i} of server {server} on the account: reads the items it names, "
            "changes what the arguments say and answers with what it did, one line per item.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "item": {"type": "string", "description": "The item's id or name."},
                    "note": {"type": "string", "description": "What to write on it, if anything."},
                },
                "required": ["item"],
            },
        }
        for i in range(count)
    ]


def install_many(home: Path, canary: str, servers: int, tools: int) -> list[dict[str, Any]]:
    """``servers`` stub servers, each with its ``tools - 2`` padding tools besides the stub's own
    (echo, whoami), recorded as installed (nothing starts until a call)."""
    store = Store.for_data_dir(home / "data", Vault.from_key_file(home / "data.key"))
    try:
        recorded = []
        for s in range(servers):
            extra = padding(s, tools - 2)
            tools_file = home / f"tools-{s:02d}.json"
            tools_file.write_text(json.dumps({"extra": extra}))
            server = store.servers.install(
                qualified_name=f"io.test/server-{s:02d}",
                source="local",
                version="1",
                package_type="stdio",
                launch_spec=stub_launch(canary, STUB_TOOLS_FILE=str(tools_file)),
                installed_by="cli",
                tools_hash="x",
                env={"STUB_API_KEY": (canary, True)},
                title=f"Server {s:02d}",
                tools=[*Stub(set(), None).tools, *extra],
            )
            recorded.append({"slug": server.slug})
        return recorded
    finally:
        store.close()
