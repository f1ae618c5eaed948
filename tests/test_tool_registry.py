"""The tool registry over ``/rpc`` of a real ``mcp-setup serve``, with three installed stub
servers (one connected, one failed, one disabled) and capability providers in config.toml;
and ``mcp-setup tools`` for people. Nothing secret, no ref, no env value ever comes out."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from setup_agent.secrets.refs import REF_PATTERN
from setup_agent.setup.tool_specs import TOOL_NAMES
from tests.browser.serve import Served, start_serve, stop_serve
from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.stub_server.bundle import SERVER_PY, sha256_hex
from tests.timeouts import scaled

CANARY = "canary-" + uuid.uuid4().hex
REGION = "region-" + uuid.uuid4().hex  # a non-secret setting's value: never shown either
CONNECTED, FAILED, DISABLED = "io.github.acme/stub", "io.github.broken/stub", "com.example/off"
CONFIG = """
[[capability_providers]]
id = "Acme Tools"
display_name = "Acme Tools Inc."
source_uri = "https://github.com/acme"
source_digest = "sha256:0f0f"
trust_state = "trusted"
enabled = true

[[capability_providers]]
id = "broken_co"
source_uri = "io.github.broken"
trust_state = "untrusted"
"""

RECORDED_TOOLS = [
    {"name": "read", "description": "Reads.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {
        "name": "wipe",
        "description": "Wipes.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    },
    {
        "name": "write",
        "description": "Writes.",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    },
]


def offered_by_the_stub() -> list[dict[str, Any]]:
    """What the echo_env stub will offer once connected, as the redactor shows it: the pinned
    list matches it (#16), so its tools stay exposed."""
    from tests.stub_server.server import Stub

    tools = [dict(t) for t in Stub({"echo_env"}, None).tools]
    for tool in tools:
        if tool["name"] == "leak":
            tool["description"] = "Leaks the key: [secret:STUB_API_KEY]"
    return tools


def seed(data_dir: Path) -> dict[str, str]:
    """Install three servers straight into the store the face will open."""
    from keyring.backends import fail

    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    store = Store.for_data_dir(data_dir, Vault.open(data_dir, keyring_backend=fail.Keyring()))
    stub = {
        "command": sys.executable,
        "args": [str(SERVER_PY)],
        "env": {
            "STUB_API_KEY": "${STUB_API_KEY}",
            "STUB_EXPECTED_SHA256": sha256_hex(CANARY),
            "STUB_MODE": "echo_env",
            "STUB_REGION": "${STUB_REGION}",
        },
    }
    common = {"source": "local", "version": "1.0.0", "package_type": "mcpb", "installed_by": "agent", "tools_hash": "x"}
    ids = {}
    try:
        ids[CONNECTED] = store.servers.install(
            qualified_name=CONNECTED,
            launch_spec=stub,
            env={"STUB_API_KEY": (CANARY, True), "STUB_REGION": (REGION, False)},
            tools=offered_by_the_stub(),
            **common,
        ).server_id
        ids[FAILED] = store.servers.install(
            qualified_name=FAILED,
            launch_spec={"command": "/nonexistent/mcp-stub-xyz", "args": []},
            env={"STUB_API_KEY": (CANARY, True)},
            tools=RECORDED_TOOLS,
            **{**common, "version": "2.1.0"},
        ).server_id
        ids[DISABLED] = store.servers.install(
            qualified_name=DISABLED,
            launch_spec={"transport": "streamable-http", "url": "https://mcp.example.com/mcp"},
            env={"STUB_REGION": (REGION, False)},
            tools=[{"name": "ping", "inputSchema": {"type": "object"}}],
            **common,
        ).server_id
        store.servers.set_enabled(ids[DISABLED], False)
    finally:
        store.close()
    return ids


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, dict[str, str]]]:
    root = tmp_path_factory.mktemp("tool-registry")
    ids = seed(root / "data")
    (root / "config.toml").write_text(CONFIG)
    served = start_serve(root, MCP_SETUP_CONFIG=str(root / "config.toml"))
    try:
        yield served, ids
    finally:
        code = stop_serve(served)
    log = served.stderr()
    assert code == 0, log
    assert "Traceback" not in log and CANARY not in log


def settled(served: Served, ids: dict[str, str]) -> list[dict[str, Any]]:
    """The registry once the connected server is up and the failed one has failed (bounded)."""
    for _ in range(10):
        served.rpc("servers.list", {"wait_seconds": 20})  # returns once nothing is connecting
        tools = served.rpc("tool_registry_list")["result"]["tools"]
        health = {t["server_id"]: t["health"]["status"] for t in tools if "server_id" in t}
        if health[ids[CONNECTED]] == "connected" and health[ids[FAILED]] == "failed":
            return tools
    raise AssertionError(f"the servers did not settle: {health}")


def test_the_list_has_every_setup_tool_and_each_installed_tool_with_route_health_and_agents(world) -> None:
    served, ids = world
    tools = settled(served, ids)
    by_id = {t["tool_id"]: t for t in tools}
    assert [t["name"] for t in tools[: len(TOOL_NAMES)]] == list(TOOL_NAMES)
    search = by_id["mcp_setup.search"]
    assert search["route"] == "setup" and search["health"] == {"status": "available"} and search["enabled"] is True
    assert search["allowed_agents"] == ["mcp_setup"] and search["input_schema"]["type"] == "object"
    assert by_id["mcp_setup.remove"]["allowed_agents"] == []  # not in the mcp_setup allowlist

    echo = by_id[f"{CONNECTED}#echo"]
    assert echo["name"] == "stub__echo"  # the gateway name, next to the stable id
    assert echo["route"] == "mcp:stdio" and echo["server_id"] == ids[CONNECTED] and echo["version"] == "1.0.0"
    assert echo["health"] == {"status": "connected"} and echo["enabled"] is True and echo["allowed_agents"] == []
    assert echo["provider"] == {"id": "acme-tools", "eligible": True, "trust_state": "trusted"}
    assert f"{CONNECTED}#leak" in by_id  # the live list, recorded at connect

    wipe = by_id[f"{FAILED}#wipe"]
    assert wipe["health"] == {"status": "failed", "code": "command_not_found"}
    assert wipe["version"] == "2.1.0" and wipe["provider"] == {
        "id": "broken-co",
        "eligible": False,
        "trust_state": "untrusted",
    }
    assert by_id[f"{FAILED}#write"]["output_schema"]["properties"]["ok"] == {"type": "boolean"}

    ping = by_id[f"{DISABLED}#ping"]
    assert (
        ping["route"] == "mcp:streamable-http" and ping["enabled"] is False and ping["health"] == {"status": "disabled"}
    )
    assert ping["provider"] is None


def test_get_answers_one_entry_and_an_unknown_id_is_a_stable_error_not_a_500(world) -> None:
    served, ids = world
    settled(served, ids)
    got = served.rpc("tool_registry_get", {"tool_id": f"{FAILED}#read"})["result"]["tool"]
    assert got["tool_id"] == f"{FAILED}#read" and got["annotations"] == {"readOnlyHint": True}
    assert served.rpc("tool_registry_get", {"tool_id": "mcp_setup.get"})["result"]["tool"]["name"] == "mcp_setup_get"
    unknown = served.rpc("tool_registry_get", {"tool_id": "io.nowhere/x#y"})
    assert unknown["error"]["code"] == -32000 and unknown["error"]["data"]["code"] == "not_found"
    assert "io.nowhere" not in json.dumps(unknown)  # the caller's guess is not echoed
    missing = served.rpc("tool_registry_get", {})
    assert missing["error"]["code"] == -32602 and missing["error"]["data"]["code"] == "invalid_input"
    extra = served.rpc("tool_registry_list", {"filter": "x"})
    assert extra["error"]["code"] == -32602


def test_diagnostics_count_by_route_and_health_and_list_the_write_surface_with_reasons(world) -> None:
    served, ids = world
    tools = settled(served, ids)
    diag = served.rpc("tool_registry_diagnostics")["result"]
    counts = diag["counts"]
    assert counts["tools"] == len(tools) and counts["servers"] == 3
    # The audit (#16) is counted: three installs and one disable, as seeded.
    assert diag["audit"]["installed"] == 3 and diag["audit"]["disabled"] == 1 and diag["audit"]["total"] >= 4
    assert counts["by_route"] == {"setup": 8, "mcp:stdio": 3 + len(RECORDED_TOOLS), "mcp:streamable-http": 1}
    assert counts["by_health"]["failed"] == len(RECORDED_TOOLS) and counts["by_health"]["disabled"] == 1
    assert counts["by_health"]["connected"] == 3 and counts["by_health"]["available"] == 8
    assert counts["disabled"] == 1 and counts["enabled"] == len(tools) - 1

    write = {w["tool_id"]: w["reasons"] for w in diag["write_surface"]}
    assert f"{FAILED}#read" not in write  # declares readOnlyHint: true
    assert write[f"{FAILED}#wipe"] == ["does not declare readOnlyHint: true", "declares destructiveHint: true"]
    assert write[f"{FAILED}#write"] == ["does not declare readOnlyHint: true"]
    assert "mcp_setup.search" not in write and "mcp_setup.remove" in write

    policy = diag["policy_surfaces"]
    assert {"archetype": "mcp_setup", "tools": policy["agent_allowlists"][0]["tools"]} in policy["agent_allowlists"]
    assert policy["admission"] == "off" and policy["consent"] == "never-ask"
    providers = diag["capability_providers"]
    assert [p["id"] for p in providers["providers"]] == ["acme-tools", "broken-co"]
    assert providers["counts"] == {"total": 2, "eligible": 1, "enabled": 2}
    assert providers["servers_by_provider"] == {"acme-tools": [ids[CONNECTED]], "broken-co": [ids[FAILED]]}
    assert providers["servers_without_provider"] == [ids[DISABLED]]
    servers = {s["server_id"]: s for s in diag["servers"]}
    assert servers[ids[CONNECTED]]["env_keys"] == [
        {"key": "STUB_API_KEY", "secret": True},
        {"key": "STUB_REGION", "secret": False},
    ]
    assert servers[ids[FAILED]]["health"] == {"status": "failed", "code": "command_not_found"}
    assert servers[ids[DISABLED]]["provider"] is None


def test_nothing_the_registry_answers_holds_a_secret_a_ref_or_an_env_value(world) -> None:
    served, ids = world
    settled(served, ids)
    ref = served.rpc(
        "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your key", "server": DISABLED + "-2"}
    )
    assert REF_PATTERN.fullmatch(ref["result"]["ref"])
    answers = json.dumps(
        [
            served.rpc("tool_registry_list"),
            served.rpc("tool_registry_diagnostics"),
            served.rpc("tool_registry_get", {"tool_id": f"{CONNECTED}#leak"}),
        ]
    )
    assert "Leaks the key" in answers  # the tool that prints its key is there, redacted
    assert CANARY not in answers and REGION not in answers
    assert not REF_PATTERN.search(answers)  # the setup tools' descriptions mention "secret://…", never a ref
    assert "mcp-stub-xyz" not in answers and str(SERVER_PY) not in answers  # no command lines


def test_mcp_setup_tools_prints_the_registry_for_people_and_as_json(tmp_path: Path) -> None:
    env = face_env(tmp_path)
    seed(Path(env["MCP_SETUP_HOME"]))
    (tmp_path / "config.toml").write_text(CONFIG)
    env["MCP_SETUP_CONFIG"] = str(tmp_path / "config.toml")
    table = subprocess.run(
        mcp_setup_argv("tools"), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
    )
    assert table.returncode == 0, table.stderr
    assert "TOOL " in table.stdout and "TOOL ID" not in table.stdout  # the names clients list, as in `stub__echo`
    listed = {
        t["tool_id"]: t["name"]
        for t in json.loads(
            subprocess.run(
                mcp_setup_argv("tools", "--json"), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
            ).stdout
        )["tools"]
    }
    assert "__" in listed[f"{FAILED}#wipe"] and f"\n{listed[f'{FAILED}#wipe']} " in "\n" + table.stdout
    assert "not checked" in table.stdout and "disabled" in table.stdout
    assert "To check them, run `mcp-setup doctor`" in table.stdout  # what to do about "not checked"
    assert "acme-tools" in table.stdout and "broken-co (not eligible)" in table.stdout
    assert "Tools that may change things" in table.stdout
    as_json = subprocess.run(
        mcp_setup_argv("tools", "--json"), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
    )
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert {t["tool_id"] for t in data["tools"]} >= {"mcp_setup.search", f"{CONNECTED}#echo", f"{DISABLED}#ping"}
    assert data["diagnostics"]["counts"]["servers"] == 3
    for out in (table, as_json):
        assert CANARY not in out.stdout + out.stderr and REGION not in out.stdout + out.stderr


def test_a_malformed_config_stops_every_face_with_one_line_naming_file_and_field(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[[capability_providers]]\nid = "acme"\nsource_uri = "io.github.acme"\nenabled = "yes"\n')
    env = face_env(tmp_path, MCP_SETUP_CONFIG=str(config))
    for command in (["tools"], ["serve", "--no-browser", "--port", "0"], ["mcp"]):
        done = subprocess.run(
            mcp_setup_argv(*command),
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr
        assert str(config) in done.stderr and "'enabled'" in done.stderr


@pytest.mark.anyio
async def test_the_python_api_redacts_and_takes_diagnostics_sections_from_other_features(
    tmp_path: Path, canary: str
) -> None:
    from setup_agent.agent.archetypes import load_archetypes
    from setup_agent.agent.tool_registry import ToolRegistry
    from setup_agent.gateway.connections import ServerStatus
    from setup_agent.secrets.redact import Redactor
    from setup_agent.secrets.vault import Vault
    from setup_agent.setup.providers import ProviderConfig
    from setup_agent.store.database import Store

    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    try:
        store.servers.install(
            qualified_name=CONNECTED,
            source="local",
            version="1",
            package_type="stdio",
            installed_by="agent",
            tools_hash="x",
            launch_spec={"command": "run", "args": []},
            env={"K": (canary, True)},
            tools=[{"name": "t", "description": f"says {canary}", "inputSchema": {"type": "object"}}],
        )
        redactor = Redactor()
        redactor.register(canary, "[secret:K]")
        registry = ToolRegistry(
            servers=store.servers.list,
            status=lambda sid: ServerStatus(sid, "failed", reason=canary, code="exited"),
            archetypes=load_archetypes,
            providers=ProviderConfig(),
            redactor=redactor,
            version="9.9",
        )
        registry.add_diagnostics("pinning", lambda: {"pinned": 1, "changed": 0})
        with pytest.raises(ValueError):
            registry.add_diagnostics("counts", dict)
        listed = await registry.list()
        diag = await registry.diagnostics()
    finally:
        store.close()
    assert diag["pinning"] == {"pinned": 1, "changed": 0}
    entry = next(t for t in listed if t["tool_id"] == f"{CONNECTED}#t")
    assert entry["description"] == "says [secret:K]" and entry["health"] == {"status": "failed", "code": "exited"}
    assert next(t for t in listed if t["route"] == "setup")["version"] == "9.9"
    assert canary not in json.dumps([listed, diag])  # nor the failure text that quoted it
