"""``mcp-setup mcp`` loads its core on the first tool call, not before (#17 item 5: idle memory).

Until then it lists the installed tools from the store's file and hears other processes'
installs through the change counter, both with the standard library. Whether the core is
loaded is read from the face process's memory map: SQLAlchemy's compiled modules are mapped
only once the core (the store) is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import keyring.backends.fail
import pytest

from setup_agent.gateway.discover import DISCOVER_NAMES
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.vault import Vault
from setup_agent.setup.tool_specs import TOOL_NAMES
from setup_agent.store.database import Store
from tests.helpers.gateway import ListChanges
from tests.helpers.mcp_face import Recorder, call, face_env, mcp_setup_client
from tests.helpers.processes import no_process_left
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex

pytestmark = pytest.mark.anyio

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
]


def install(data: Path, name: str, canary: str) -> None:
    """Install a stub straight into the store, as another process would (tools recorded)."""
    vault = Vault.open(data, keyring_backend=keyring.backends.fail.Keyring())
    env = {"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(canary)}
    spec = LaunchSpec(command="python3", args=[str(SERVER_PY)], env=env, runner="python3")
    with Store.for_data_dir(data, vault) as store:
        store.servers.install(
            qualified_name=name,
            source="local",
            version="1.0.0",
            package_type="mcpb",
            launch_spec=spec.model_dump(mode="json"),
            installed_by="test",
            tools_hash="0" * 64,
            env={"STUB_API_KEY": (canary, True)},
            tools=TOOLS,
        )


def face_pid(data: Path) -> int:
    """The ``mcp-setup mcp`` process serving ``data`` (found by its environment)."""
    want = f"MCP_SETUP_HOME={data}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if want in (entry / "environ").read_bytes().split(b"\0") and b"mcp" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    [pid] = [p for p in found if p != os.getpid()]
    return pid


def core_loaded(pid: int) -> bool:
    return "sqlalchemy" in Path(f"/proc/{pid}/maps").read_text()


async def test_an_idle_face_lists_installed_tools_without_its_core_and_loads_it_on_the_first_call(
    tmp_path: Path, canary: str
) -> None:
    env = face_env(tmp_path)
    data = Path(env["MCP_SETUP_HOME"])
    install(data, "io.test/first", canary)
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", Recorder(), env=env, real=True) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(TOOL_NAMES) | DISCOVER_NAMES | {"first__echo"}
            pid = face_pid(data)
            assert not core_loaded(pid)
            listed = await call(client, "mcp_setup_list_servers")
            assert [s["qualified_name"] for s in listed["servers"]] == ["io.test/first"]
            assert core_loaded(pid)
    assert no_process_left(str(data))


async def test_a_face_without_its_core_hears_another_process_install(tmp_path: Path, canary: str) -> None:
    env = face_env(tmp_path)
    data = Path(env["MCP_SETUP_HOME"])
    install(data, "io.test/first", canary)
    changes = ListChanges()
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(
            tmp_path, tmp_path / "stderr.log", Recorder(), env=env, message_handler=changes, real=True
        ) as client:
            assert "second__echo" not in {t.name for t in (await client.list_tools()).tools}
            await anyio.to_thread.run_sync(install, data, "io.test/second", canary)
            await changes.wait()
            assert "second__echo" in {t.name for t in (await client.list_tools()).tools}
            assert not core_loaded(face_pid(data))
