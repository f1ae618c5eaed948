"""The gateway end to end: ``mcp-setup mcp`` as a real client sees it, in both protocol eras.

Install a stub server through the setup tools, hear that the tool list changed, list again,
call ``<slug>__echo``, make the server print its own secret (only the redacted form comes
back), remove it and see its tools gone. Then a second process on the same data dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.gateway.discover import DISCOVER_NAMES
from setup_agent.setup.tool_specs import TOOL_NAMES
from tests.helpers.gateway import STUB, ListChanges, lists_tool, make_catalog, tool_names
from tests.helpers.mcp_face import Browser, Recorder, call, elicitation_answering, face_env, mcp_setup_client
from tests.helpers.processes import no_process_left
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


async def install_stub(client: Any, browser: Browser) -> str:
    ref = (await call(client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub key"}))[
        "ref"
    ]
    installed = await call(
        client, "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
    )
    assert installed["status"] == "connected", installed
    return installed["server_id"]


async def test_a_classic_client_gets_list_changed_and_calls_the_installed_tools_through_the_gateway(
    tmp_path: Path, canary: str
) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    recorder, browser, changes = Recorder(), Browser(), ListChanges()
    stderr_path = tmp_path / "stderr.log"
    with anyio.fail_after(scaled(90)):
        async with mcp_setup_client(
            tmp_path,
            stderr_path,
            recorder,
            env=env,
            message_handler=changes,
            elicitation_callback=elicitation_answering(browser, [canary]),
        ) as client:
            assert client.server_capabilities.tools.list_changed is True
            before = await tool_names(client)
            assert before == set(TOOL_NAMES) | DISCOVER_NAMES
            server_id = await install_stub(client, browser)
            await changes.until(lambda: lists_tool(client, "stub__echo"))
            after = await tool_names(client)
            assert {"stub__echo", "stub__whoami", "stub__leak"} <= after - before

            listed = await client.list_tools()
            echo = next(t for t in listed.tools if t.name == "stub__echo")
            assert echo.description.startswith("[")  # prefixed with the server's title
            assert echo.input_schema["required"] == ["text"]

            answer = await client.call_tool("stub__echo", {"text": "hello gateway"})
            assert answer.is_error is not True and answer.content[0].text == "hello gateway"
            # The server prints its own secret: only the redacted form comes back.
            leaked = await client.call_tool("stub__echo", {"text": "env"})
            assert canary not in leaked.content[0].text
            assert "[secret:STUB_API_KEY]" in leaked.content[0].text or "secret://" in leaked.content[0].text

            with pytest.raises(Exception, match="Unknown tool"):
                await client.call_tool("nosuch__echo", {})

            # Guessing: arguments that hold a protected value are refused without being
            # forwarded; the second such call (a gateway call or a setup tool's, #24 item 2)
            # locks this client's tool calls, all of them, until the user unblocks it.
            refused = await client.call_tool("stub__echo", {"text": f"is it {canary}?"})
            assert refused.is_error and refused.structured_content["error"]["code"] == "arguments_refused"
            refused_setup = await call(client, "mcp_setup_search", {"query": canary.upper()})
            assert refused_setup["error"]["code"] == "arguments_refused"
            locked = await client.call_tool("stub__echo", {"text": "harmless"})
            assert locked.is_error and locked.structured_content["error"]["code"] == "session_locked"
            assert (await call(client, "mcp_setup_list_servers"))["error"]["code"] == "session_locked"

            # Another client (another principal: a session of the same client would stay locked)
            # removes the server; the locked one hears of it.
            async with mcp_setup_client(tmp_path, stderr_path, Recorder(), env=env, client_name="Cursor") as other:
                assert (await call(other, "mcp_setup_remove", {"server_id": server_id})) == {
                    "ok": True,
                    "removed": True,
                }
            await changes.until(lambda: lists_tool(client, "stub__echo", False))
            assert await tool_names(client) == before
            with pytest.raises(Exception, match="Unknown tool"):
                await client.call_tool("stub__echo", {"text": "gone"})
    assert canary not in recorder.text().replace(f"is it {canary}?", "").replace(canary.upper(), "")  # only our guesses
    log = stderr_path.read_text()
    assert canary not in log and "(a guess at a secret?)" in log and "Its tool calls are now refused" in log
    assert no_process_left(str(Path(env["MCP_SETUP_HOME"])))


async def test_a_2026_client_hears_the_change_on_its_subscription_and_calls_the_installed_tool(
    tmp_path: Path, canary: str
) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(make_catalog(tmp_path, canary)))
    recorder, browser = Recorder(), Browser()
    with anyio.fail_after(scaled(90)):
        async with mcp_setup_client(
            tmp_path,
            tmp_path / "stderr.log",
            recorder,
            env=env,
            mode="auto",
            elicitation_callback=elicitation_answering(browser, [canary]),
        ) as client:
            heard = anyio.Event()

            async def listen(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                async with client.listen(tools_list_changed=True) as sub:
                    task_status.started()
                    async for _event in sub:
                        heard.set()
                        return

            async with anyio.create_task_group() as tg:
                await tg.start(listen)
                # URL elicitation is a server-to-client request, not allowed at 2026-07-28:
                # the secret comes through the page whose URL the tool result carries.
                requested = await call(
                    client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key"}
                )
                if requested.get("status") != "answered":
                    await browser.submit(requested["url"], canary)
                installed = await call(
                    client,
                    "mcp_setup_install_and_connect",
                    {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": requested["ref"]}},
                )
                assert installed["status"] == "connected", installed
                with anyio.fail_after(scaled(10)):
                    await heard.wait()
            assert "stub__echo" in await tool_names(client)
            answer = await client.call_tool("stub__echo", {"text": "modern"})
            assert answer.content[0].text == "modern"
    assert canary not in recorder.text()
