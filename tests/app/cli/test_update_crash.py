"""A SIGKILL during ``mcp-setup update`` loses nothing (#24 item 6): the old version's row and
encrypted values stay until the new row is committed, in the same transaction that swaps them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from setup_agent.errors import StoreError
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.fakes.loopback import TrickleHandler, serve_loopback
from tests.helpers.mcp_face import REPO, face_env, real_mcp_setup_argv
from tests.helpers.processes import no_process_left, processes_mentioning
from tests.helpers.timeouts import scaled
from tests.helpers.updates import STUB, install_v1, installed, publish, run
from tests.stub_server.bundle import build_stub_bundle, stub_server_json


@contextmanager
def served(path: Path, trickle: float) -> Iterator[tuple[str, threading.Event]]:
    """``path`` over loopback HTTP, spread over ``trickle`` seconds; the event is set at the first GET."""
    body, hit = path.read_bytes(), threading.Event()

    class Handler(TrickleHandler):
        def do_GET(self) -> None:  # noqa: N802
            hit.set()
            self.send_body(body, "application/octet-stream", trickle=trickle)

    with serve_loopback(Handler) as port:
        yield f"http://127.0.0.1:{port}/{path.name}", hit


def _wait(check, timeout: float = 60.0) -> None:
    deadline, tick = time.monotonic() + timeout, threading.Event()
    while not check():
        assert time.monotonic() < deadline, "timed out"
        tick.wait(0.05)


def _killed_update(env: dict[str, str], ready) -> None:
    proc = subprocess.Popen(
        real_mcp_setup_argv("update", "stub"),  # its own process group, killed whole below
        env=env,
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: ready() or proc.poll() is not None)
        assert proc.poll() is None, "the update ended before the moment to kill it"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(scaled(10))


def _the_old_one_is_intact(env: dict[str, str], server_id: str, home: Path) -> None:
    [server] = installed(env)  # the start-up sweep runs here (a new process)
    assert (server["server_id"], server["version"], server["slug"]) == (server_id, "1.0.0", "stub")
    doctor = json.loads(run(env, "doctor", "--json").stdout)
    assert next(c for c in doctor["checks"] if c["name"] == "server stub")["ok"] is True  # its secret still works
    assert sorted(p.name for p in (home / "servers").iterdir()) == [server_id]  # the new one's dir swept
    assert no_process_left(str(home))


@pytest.mark.parametrize("moment", ["download", "test"])
def test_a_kill_during_the_update_keeps_the_old_version_and_its_secret(
    tmp_path: Path, canary: str, moment: str
) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    env = face_env(
        tmp_path,
        MCP_SETUP_REGISTRIES="local",
        MCP_SETUP_CATALOG_DIR=str(catalog),
        MCP_SETUP_PROBE_TIMEOUT_SECONDS="60",
        MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS="60",
    )
    home = Path(env["MCP_SETUP_HOME"])
    publish(tmp_path, catalog, "1.0.0", canary)
    server_id = anyio.run(install_v1, home, catalog, canary)
    bundle, sha = build_stub_bundle(
        tmp_path / "dist-2", expected_value=canary, version="2.0.0", mode="hang" if moment == "test" else ""
    )
    with served(bundle, trickle=60 if moment == "download" else 0) as (url, hit):
        (catalog / "stub.json").write_text(json.dumps(stub_server_json(url, sha, version="2.0.0")))
        if moment == "download":
            _killed_update(env, hit.is_set)
        else:  # the new version's process is up, hanging in its handshake
            _killed_update(env, lambda: hit.is_set() and bool(processes_mentioning(str(home / "servers"))))
    _the_old_one_is_intact(env, server_id, home)


def test_a_commit_that_fails_midway_leaves_the_old_row_and_values(tmp_path: Path, canary: str, monkeypatch) -> None:
    store = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    common = {
        "qualified_name": STUB,
        "source": "local",
        "package_type": "mcpb",
        "launch_spec": {"command": "x", "args": []},
        "installed_by": "agent",
        "tools_hash": "h",
        "tools": [],
    }
    old = store.servers.install(version="1.0.0", env={"STUB_API_KEY": (canary, True)}, **common)
    real = store.audit.append

    def broken(s, event, row, actor, **kw):  # the commit dies after the old row's delete
        if event == "installed":
            raise StoreError("simulated crash inside the commit")
        return real(s, event, row, actor, **kw)

    monkeypatch.setattr(store.audit, "append", broken)
    with pytest.raises(StoreError):
        store.servers.install(version="2.0.0", env={"STUB_API_KEY": (canary, True)}, replaces=old.server_id, **common)
    monkeypatch.undo()
    [kept] = store.servers.list()
    assert (kept.server_id, kept.version) == (old.server_id, "1.0.0")
    assert store.values.env_values(old.server_id)["STUB_API_KEY"].reveal() == canary
    new = store.servers.install(version="2.0.0", env={"STUB_API_KEY": (canary, True)}, replaces=old.server_id, **common)
    [only] = store.servers.list()
    assert (only.server_id, only.version, only.slug) == (new.server_id, "2.0.0", old.slug)
    store.close()
