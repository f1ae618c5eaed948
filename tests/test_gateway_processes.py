"""One truth across processes: every face on a data dir sees an install, a removal or a
disable made by any other process, within the change watcher's poll, without a restart.

Two real ``mcp-setup mcp`` processes, and ``mcp-setup serve`` beside the terminal agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pexpect
import pytest

from tests.mcp_face import (
    REPO,
    Browser,
    Recorder,
    call,
    elicitation_answering,
    face_env,
    mcp_setup_argv,
    mcp_setup_client,
)
from tests.processes import no_process_left
from tests.test_gateway_e2e import STUB, ListChanges, lists_tool, make_catalog, tool_names
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio


async def test_an_install_in_one_mcp_process_is_callable_in_another_and_a_removal_stops_its_copy(
    tmp_path: Path, canary: str
) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    data_dir = Path(env["MCP_SETUP_HOME"])
    recorder, browser, heard_by_b = Recorder(), Browser(), ListChanges()
    with anyio.fail_after(scaled(120)):
        async with (
            mcp_setup_client(
                tmp_path,
                tmp_path / "a.log",
                recorder,
                env=env,
                elicitation_callback=elicitation_answering(browser, [canary]),
            ) as a,
            mcp_setup_client(
                tmp_path, tmp_path / "b.log", recorder, env=env, client_name="Cursor", message_handler=heard_by_b
            ) as b,
        ):
            assert "stub__echo" not in await tool_names(b)
            ref = (await call(a, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key"}))["ref"]
            installed = await call(
                a, "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
            )
            server_id = installed["server_id"]

            # B's watcher sees the store change and tells B's client.
            await heard_by_b.until(lambda: lists_tool(b, "stub__echo"))
            answer = await b.call_tool("stub__echo", {"text": "from B"})  # B starts its own copy
            assert answer.content[0].text == "from B"
            install_dir = data_dir / "servers" / server_id
            listed_by_b = (await call(b, "mcp_setup_list_servers"))["servers"]
            assert [(s["server_id"], s["status"]) for s in listed_by_b] == [(server_id, "connected")]

            assert (await call(a, "mcp_setup_remove", {"server_id": server_id})) == {"ok": True, "removed": True}
            await heard_by_b.until(lambda: lists_tool(b, "stub__echo", False))
            with pytest.raises(Exception, match="Unknown tool"):
                await b.call_tool("stub__echo", {"text": "gone"})
            # B stopped its copy when it saw the removal (both processes still running).
            assert no_process_left(str(install_dir), timeout=scaled(10))
    assert canary not in recorder.text()


async def test_a_disabled_server_leaves_the_other_process_list_and_comes_back_when_enabled(
    tmp_path: Path, canary: str
) -> None:
    from keyring.backends import fail

    from app.runtime import build_runtime
    from app.settings import Settings

    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    recorder, browser, heard = Recorder(), Browser(), ListChanges()
    with anyio.fail_after(scaled(120)):
        async with mcp_setup_client(
            tmp_path,
            tmp_path / "a.log",
            recorder,
            env=env,
            message_handler=heard,
            elicitation_callback=elicitation_answering(browser, [canary]),
        ) as a:
            ref = (await call(a, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key"}))["ref"]
            installed = await call(
                a, "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
            )
            await heard.until(lambda: lists_tool(a, "stub__echo"))
            # Another process (a person's command) disables it through the core.
            settings = Settings(home=Path(env["MCP_SETUP_HOME"]), registries="local", consent="never-ask")
            other = build_runtime(settings, keyring_backend=fail.Keyring())
            try:
                await other.service.set_enabled(installed["server_id"], False)
                await heard.until(lambda: lists_tool(a, "stub__echo", False))
                listed = (await call(a, "mcp_setup_list_servers"))["servers"]
                assert [s["status"] for s in listed] == ["disabled"]  # turned off by the person
                await other.service.set_enabled(installed["server_id"], True)
                await heard.until(lambda: lists_tool(a, "stub__echo"))
                assert (await a.call_tool("stub__echo", {"text": "back"})).content[0].text == "back"
            finally:
                await other.aclose()


def test_serve_shows_a_server_installed_by_the_terminal_agent_as_connected(tmp_path: Path, canary: str) -> None:
    from tests.browser.serve import start_serve, stop_serve
    from tests.test_agent_support import make_catalog as agent_catalog

    catalog = agent_catalog(tmp_path, canary)
    served = start_serve(tmp_path, catalog)
    try:
        with served.websocket() as ws:
            json.loads(ws.recv(timeout=scaled(10)))  # hello
            env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
            argv = mcp_setup_argv("agent", "set up the stub server")
            child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30))
            child.expect(r"STUB_API_KEY \(hidden\): ")
            child.sendline(canary)
            child.expect(r"Tools now available")
            child.expect(pexpect.EOF)
            child.close()
            assert child.exitstatus == 0
            # serve hears the store change and connects the server, no Reconnect pressed.
            events: list[dict[str, Any]] = []
            while not any(e.get("type") == "server_status" and e.get("status") == "connected" for e in events):
                events.append(json.loads(ws.recv(timeout=scaled(20))))
        listed = served.rpc("servers.list")["result"]["servers"]
        assert [(s["status"], s["installed_by"]) for s in listed] == [("connected", "agent")]
    finally:
        code = stop_serve(served)
    assert code == 0
    assert canary not in served.stderr()
