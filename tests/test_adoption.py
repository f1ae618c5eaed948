"""An install right after a passing test adopts the tested process (#17 item 1): one start.

Real stubs (MCPB bundles from a local catalog) append their pid to ``STUB_PID_FILE``, so the
tests count server starts; nothing is mocked but a store failure injected before the commit.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from setup_agent.errors import StoreError
from setup_agent.setup.service import CallContext
from tests.processes import pids_in, process_alive, processes_mentioning, wait_gone
from tests.stub_server.bundle import SERVER_PY, sha256_hex, stub_manifest, stub_server_json
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio


def add_stub(catalog: Path, dist: Path, name: str, pid_file: Path, expected: str | None) -> None:
    """A stub bundle whose server appends its pid to ``pid_file`` at every start."""
    manifest = stub_manifest(expected_value=expected)
    manifest["server"]["mcp_config"]["env"]["STUB_PID_FILE"] = str(pid_file)
    dist.mkdir(parents=True, exist_ok=True)
    bundle = dist / f"{name.replace('/', '_')}.mcpb"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.write(SERVER_PY, "server/server.py")
    catalog.mkdir(parents=True, exist_ok=True)
    doc = stub_server_json(bundle.resolve().as_uri(), sha256_hex(bundle.read_bytes()), name=name)
    (catalog / (name.replace("/", "_") + ".json")).write_text(json.dumps(doc))


async def make_runtime(tmp_path: Path, memory_keyring, canary: str, **settings) -> Runtime:
    add_stub(tmp_path / "catalog", tmp_path / "dist", "io.test/counted", tmp_path / "pids", canary)
    add_stub(tmp_path / "catalog", tmp_path / "dist", "io.test/any-key", tmp_path / "pids-any", None)
    return build_runtime(
        # sandbox off: the stub writes its pid to a file beside the test (outside its folder), and
        # under bubblewrap that pid is one of its own PID namespace. tests/test_sandbox.py covers it.
        Settings(
            home=tmp_path / "data",
            registries="local",
            catalog_dir=tmp_path / "catalog",
            probe_timeout_seconds=scaled(10),
            **{"sandbox": "off", **settings},
        ),
        keyring_backend=memory_keyring,
    )


@pytest.fixture
async def runtime(tmp_path: Path, memory_keyring, canary: str) -> AsyncIterator[Runtime]:
    rt = await make_runtime(tmp_path, memory_keyring, canary)
    yield rt
    await rt.aclose()
    assert not processes_mentioning(str(rt.settings.home))


async def call(runtime: Runtime, tool: str, **args) -> dict:
    with anyio.fail_after(scaled(30)):
        return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


async def test_an_install_after_a_passing_test_starts_the_server_once(
    runtime: Runtime, tmp_path: Path, canary: str
) -> None:
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    tested = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
    )
    assert tested["ok"] is True, tested
    [tested_pid] = pids_in(tmp_path / "pids")
    installed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
    )
    assert installed["status"] == "connected", installed
    assert pids_in(tmp_path / "pids") == [tested_pid]  # started exactly once
    assert runtime.connections.pid(installed["server_id"]) == tested_pid
    # the adopted process runs from the install dir, and its session answers calls
    assert (
        Path(f"/proc/{tested_pid}/cwd").resolve() == runtime.connections.install_dir(installed["server_id"]).resolve()
    )
    answer = await runtime.connections.call_tool(installed["server_id"], "whoami", {})
    assert "ok" in json.dumps(answer)
    assert canary not in json.dumps([tested, installed, answer])
    assert runtime.prober.pending_teardowns == 0 and len(runtime.prober.parking) == 0
    removed = await call(runtime, "mcp_setup_remove", server_id=installed["server_id"])
    assert removed.get("ok", True) is not False, removed
    assert wait_gone([tested_pid]) == []
    assert not runtime.connections.install_dir(installed["server_id"]).exists()


async def test_an_install_with_another_value_starts_afresh_and_the_tested_one_ends(
    runtime: Runtime, tmp_path: Path
) -> None:
    first = runtime.refs.mint("STUB_API_KEY", "value-one")
    second = runtime.refs.mint("STUB_API_KEY", "value-two")
    tested = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/any-key", env_refs={"STUB_API_KEY": first}
    )
    assert tested["ok"] is True, tested
    [tested_pid] = pids_in(tmp_path / "pids-any")
    installed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name="io.test/any-key", env_refs={"STUB_API_KEY": second}
    )
    assert installed["status"] == "connected", installed
    pids = pids_in(tmp_path / "pids-any")
    assert len(pids) == 3 and pids[0] == tested_pid  # test, the install's own test, the live start
    assert runtime.connections.pid(installed["server_id"]) == pids[2]
    assert process_alive(tested_pid)  # still waiting for an install of what it tested …
    await runtime.prober.drain()  # … until the service shuts down (or its time is up)
    assert wait_gone([tested_pid]) == []
    servers = runtime.connections.install_root
    assert sorted(p.name for p in servers.iterdir()) == [installed["server_id"]]


async def test_a_failure_before_the_commit_ends_the_adopted_process_and_leaves_nothing(
    runtime: Runtime, tmp_path: Path, canary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    tested = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
    )
    assert tested["ok"] is True, tested
    [tested_pid] = pids_in(tmp_path / "pids")

    def broken_install(**_: object) -> None:
        raise StoreError("the disk is full")

    monkeypatch.setattr(runtime.store.servers, "install", broken_install)
    failed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
    )
    assert failed["ok"] is False, failed
    assert pids_in(tmp_path / "pids") == [tested_pid]  # the install adopted it, no second start
    assert wait_gone([tested_pid]) == []
    servers = runtime.connections.install_root
    assert not servers.exists() or list(servers.iterdir()) == []
    assert runtime.refs.is_ready(ref)  # released: still usable
    assert canary not in json.dumps([tested, failed])


async def test_a_tested_server_nobody_installs_ends_when_the_ref_ttl_is_up(
    tmp_path: Path, memory_keyring, canary: str
) -> None:
    rt = await make_runtime(tmp_path, memory_keyring, canary, secret_ttl_seconds=0.5)
    try:
        ref = rt.refs.mint("STUB_API_KEY", canary)
        tested = await call(
            rt, "mcp_setup_test_connection", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
        )
        assert tested["ok"] is True, tested
        [tested_pid] = pids_in(tmp_path / "pids")
        # waited for in a thread (pidfd, bounded): the loop runs the parked session's timer meanwhile
        assert await anyio.to_thread.run_sync(wait_gone, [tested_pid]) == []
        assert len(rt.prober.parking) == 0
        await rt.prober.drain()  # the teardown's last step, the dir, is done
        servers = rt.connections.install_root
        assert not servers.exists() or list(servers.iterdir()) == []
    finally:
        await rt.aclose()


async def test_with_adoption_off_a_test_leaves_nothing_running(tmp_path: Path, memory_keyring, canary: str) -> None:
    rt = await make_runtime(tmp_path, memory_keyring, canary, adopt_tested_servers=False)
    try:
        ref = rt.refs.mint("STUB_API_KEY", canary)
        tested = await call(
            rt, "mcp_setup_test_connection", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
        )
        assert tested["ok"] is True, tested
        await rt.prober.drain()
        assert wait_gone(pids_in(tmp_path / "pids")) == []
        installed = await call(
            rt, "mcp_setup_install_and_connect", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
        )
        assert installed["status"] == "connected", installed
        assert len(pids_in(tmp_path / "pids")) == 3
    finally:
        await rt.aclose()


async def test_an_eager_gateway_leaves_the_install_its_own_start(runtime: Runtime, tmp_path: Path, canary: str) -> None:
    """``mcp-setup serve`` keeps every installed server connected: its store sync must not start
    the one an install is about to connect (the adopted process is the only start)."""
    await runtime.start(eager=True)
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    tested = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
    )
    assert tested["ok"] is True, tested
    installed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name="io.test/counted", env_refs={"STUB_API_KEY": ref}
    )
    assert installed["status"] == "connected", installed
    await runtime.gateway.refresh(force=True)  # the sync the commit triggered has run (again)
    assert len(pids_in(tmp_path / "pids")) == 1
    assert runtime.connections.status(installed["server_id"]).status == "connected"
