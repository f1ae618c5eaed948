"""End to end through ``mcp-setup mcp``: the SDK's client over stdio, acting as the user's browser.

search → get → request_secret → test_connection → install_and_connect → list_servers, with a
canary value that must show up in no MCP message, no log line, not in the database file and in
no file of the install dir but what the server itself needs. Then a restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp_face import Browser, Recorder, call, elicitation_answering, face_env, mcp_setup_client
from tests.processes import no_process_left, processes_mentioning
from tests.stub_server.bundle import stub_catalog
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio

STUB = "io.github.mcp-setup/stub"


def make_catalog(root: Path, expected: str) -> Path:
    return stub_catalog(root, expected)


def all_bytes_under(path: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in path.rglob("*") if p.is_file()]


async def test_full_setup_over_stdio_keeps_the_canary_out_of_everything(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    stderr_path = tmp_path / "stderr.log"
    recorder = Recorder()
    browser = Browser()
    answers = ["wrong-" + canary[::-1], canary]
    data_dir = Path(env["MCP_SETUP_HOME"])

    with anyio.fail_after(scaled(120)):
        async with mcp_setup_client(
            tmp_path, stderr_path, recorder, elicitation_callback=elicitation_answering(browser, answers), env=env
        ) as client:
            found = await call(client, "mcp_setup_search", {"query": "stub"})
            assert [s["qualified_name"] for s in found["servers"]] == [STUB]

            detail = await call(client, "mcp_setup_get", {"qualified_name": STUB})
            keys = {k["name"]: k for k in detail["required_env_keys"]}
            assert keys["STUB_API_KEY"]["secret"] is True
            assert [p["id"] for p in detail["packages"]] == ["mcpb"]

            # A wrong value first: a clear error, and the ref stays usable.
            wrong = await call(
                client,
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "Your stub API key", "server": STUB},
            )
            assert wrong["status"] == "answered" and wrong["ref"].startswith("secret://")
            failed = await call(
                client,
                "mcp_setup_test_connection",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": wrong["ref"]}},
            )
            assert failed["ok"] is False and failed["error"]["code"] == "rejected"
            assert "STUB_API_KEY" in failed["error"]["message"]
            again = await call(
                client,
                "mcp_setup_test_connection",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": wrong["ref"]}},
            )
            assert again["error"]["code"] == "rejected"  # not secret_missing: the ref survived the failure
            refused = await call(
                client,
                "mcp_setup_install_and_connect",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": wrong["ref"]}},
            )
            assert refused["ok"] is False and refused["error"]["code"] == "rejected"
            assert (await call(client, "mcp_setup_list_servers"))["servers"] == []

            right = await call(
                client,
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "Your stub API key", "server": STUB},
            )
            env_refs = {"STUB_API_KEY": right["ref"]}
            tested = await call(client, "mcp_setup_test_connection", {"qualified_name": STUB, "env_refs": env_refs})
            assert tested["ok"] is True and {t["name"] for t in tested["tools"]} >= {"echo", "whoami"}

            installed = await call(
                client, "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": env_refs}
            )
            assert installed["status"] == "connected", installed
            server_id = installed["server_id"]

            listed = (await call(client, "mcp_setup_list_servers"))["servers"]
            assert [(s["server_id"], s["status"], s["installed_by"]) for s in listed] == [
                (server_id, "connected", "mcp:claude-desktop")  # the host conventions' provenance
            ]
            assert set(listed[0]["tools"]) >= {"echo", "whoami"}

            # An installed server is refused before anything else (its ref was consumed too).
            reused = await call(client, "mcp_setup_test_connection", {"qualified_name": STUB, "env_refs": env_refs})
            assert reused["error"]["code"] == "already_installed"
            # Installing the same name twice is a clear error.
            dup = await call(client, "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": env_refs})
            assert dup["error"]["code"] == "already_installed"

        # The canary is nowhere it must not be.
        assert canary not in recorder.text()
        assert all(canary not in page for page in browser.pages)
        log = stderr_path.read_text()
        assert "tool mcp_setup_install_and_connect called" in log
        assert canary not in log
        for path, data in all_bytes_under(data_dir):
            assert canary.encode() not in data, f"canary in {path}"
        assert no_process_left(str(data_dir)), "a server process outlived mcp-setup"

        # Restart: the installed tools are listed at once (from the store, nothing spawned); the
        # server starts on its first call with its decrypted secret; old refs are gone.
        restart_log = tmp_path / "stderr-restart.log"
        async with mcp_setup_client(tmp_path, restart_log, recorder, env=env) as client:
            # The very first request: the installed tools are there (read from the store).
            names = {t.name for t in (await client.list_tools()).tools}
            listed = (await call(client, "mcp_setup_list_servers", {"wait_seconds": 30}))["servers"]
            assert [(s["server_id"], s["status"]) for s in listed] == [(server_id, "stopped")]
            slug = listed[0]["slug"]
            assert {f"{slug}__echo", f"{slug}__whoami"} <= names
            answered = await client.call_tool(f"{slug}__whoami", {})
            assert answered.is_error is not True and answered.content[0].text == "ok"
            listed = (await call(client, "mcp_setup_list_servers"))["servers"]
            assert [(s["server_id"], s["status"]) for s in listed] == [(server_id, "connected")]
            removed = await call(client, "mcp_setup_remove", {"server_id": server_id})
            assert removed == {"ok": True, "removed": True}
            assert (await call(client, "mcp_setup_list_servers"))["servers"] == []
            stale = await call(  # checked once removed: an installed name is refused before its refs
                client,
                "mcp_setup_test_connection",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": wrong["ref"]}},
            )
            assert stale["error"]["code"] == "secret_missing"
        assert canary not in recorder.text() and canary not in restart_log.read_text()
        assert not (data_dir / "servers" / server_id).exists()
        assert no_process_left(str(data_dir))


async def test_a_secret_prompt_on_a_2026_session_is_an_input_required_result_and_the_model_sees_no_link(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    recorder, browser = Recorder(), Browser()
    with anyio.fail_after(scaled(120)):
        async with mcp_setup_client(
            tmp_path,
            tmp_path / "stderr.log",
            recorder,
            elicitation_callback=elicitation_answering(browser, [canary]),
            env=env,
            mode="auto",
        ) as client:
            assert client.protocol_version == "2026-07-28"
            answer = await client.call_tool(
                "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub API key", "server": STUB}
            )  # the SDK's client fulfils the input request (the page) and retries the call
            right = json.loads(answer.content[0].text)  # type: ignore[union-attr]
            assert right["status"] == "answered" and "url" not in right, right
            tested = await call(
                client,
                "mcp_setup_test_connection",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": right["ref"]}},
            )
            assert tested["ok"] is True, tested
    assert browser.pages, "the page was not opened through the input request"
    assert '"input_required"' in recorder.text() and "http://127.0.0.1" not in json.dumps(right)
    assert canary not in recorder.text()


async def test_a_client_without_url_elicitation_gets_the_page_url_and_a_ref_usable_once_answered(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    recorder = Recorder()
    browser = Browser()
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(tmp_path, tmp_path / "err.log", recorder, client_name="", env=env) as client:
            asked = await call(
                client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Stub key, please"}
            )
            assert asked["status"] == "pending"
            assert asked["url"].startswith("http://127.0.0.1:")
            env_refs = {"STUB_API_KEY": asked["ref"]}
            early = await call(client, "mcp_setup_test_connection", {"qualified_name": STUB, "env_refs": env_refs})
            assert early["error"]["code"] == "secret_pending"
            response = await browser.submit(asked["url"], canary)
            assert response.status_code == 200
            installed = await call(
                client, "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": env_refs}
            )
            assert installed["status"] == "connected"
            listed = (await call(client, "mcp_setup_list_servers"))["servers"]
            assert listed[0]["installed_by"] == "mcp"  # an MCP client that gives no name
    assert canary not in recorder.text()
    assert os.path.exists(tmp_path / "err.log") and canary not in (tmp_path / "err.log").read_text()


def answer_to(proc: subprocess.Popen[str], request_id: int) -> dict[str, Any]:
    """The next answer to ``request_id`` on the face's stdout (notifications are skipped)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "mcp-setup closed stdout"
        message = json.loads(line)
        if message.get("id") == request_id:
            return message


def test_sigterm_stops_mcp_setup_and_every_server_it_started(tmp_path: Path, canary: str) -> None:
    from keyring.backends import fail

    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store
    from tests.mcp_face import REPO, mcp_setup_argv
    from tests.stub_server.bundle import SERVER_PY, sha256_hex
    from tests.stub_server.server import Stub

    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
    data_dir = Path(env["MCP_SETUP_HOME"])
    store = Store.for_data_dir(data_dir, Vault.open(data_dir, keyring_backend=fail.Keyring()))
    spec = {
        "command": sys.executable,
        "args": [str(SERVER_PY), "--mode", "ignore_sigterm", "--marker", str(data_dir)],
        "env": {"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(canary)},
    }
    store.servers.install(
        qualified_name="io.test/stubborn",
        source="local",
        version="1",
        package_type="stdio",
        launch_spec=spec,
        installed_by="agent",
        tools_hash="x",
        env={"STUB_API_KEY": (canary, True)},
        tools=Stub(set(), None).tools,  # what it will offer: the pin matches (#16), its status stays connected
    )
    store.close()
    proc = subprocess.Popen(
        mcp_setup_argv("mcp"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
        text=True,
    )
    try:
        messages = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            # The stdio face starts a server on its first call.
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "stubborn__whoami", "arguments": {}},
            },
        ]
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        answer_to(proc, 1)
        answered = answer_to(proc, 2)
        assert answered["result"]["content"][0]["text"] == "ok", answered
        listing = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "mcp_setup_list_servers", "arguments": {}},
        }
        proc.stdin.write(json.dumps(listing) + "\n")
        proc.stdin.flush()
        listed = answer_to(proc, 3)
        servers = json.loads(listed["result"]["content"][0]["text"])["servers"]
        assert [s["status"] for s in servers] == ["connected"]
        assert processes_mentioning(str(data_dir)), "the stub should be running"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(15)) == 143
        assert no_process_left(str(data_dir), timeout=scaled(5))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=scaled(5))
        for pid in processes_mentioning(str(data_dir)):
            os.kill(pid, signal.SIGKILL)
