"""#25 item 1: after "Installed and connected", the page connects the person's AI client.

The walk-through, as one test: ``mcp-setup serve`` (a subprocess, HOME a temp dir holding
Claude Desktop's and Cursor's folders), the real ``@modelcontextprotocol/server-everything``
(npx, from the npm registry; its registry entry served by a loopback official registry, with a
secret it does not need so the key box is part of the way) added on the page, Claude Desktop
connected from the page (the diff shown, then applied), and then the SDK's stdio client started
exactly as that config file says lists and calls ``server-everything__echo``. Cursor's file holds
comments: it is left alone and the entry to paste is shown. Screenshots at 1280 and 390. The
card's settings, log, Replace and Update: test_browser_card_update.py.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from playwright.sync_api import expect

from tests.browser.page import NARROW, WIDE, close_leaking_nothing, open_page, shot
from tests.browser.redraws import scroll_to, shot_of
from tests.browser.serve import start_serve, stop_serve
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.registry_entries import everything_entry
from tests.helpers.timeouts import scaled

ECHO = "server-everything__echo"
TOKEN = "EVERYTHING_DEMO_TOKEN"

CURSOR_BROKEN = '{\n  // my own note\n  "mcpServers": {,}\n}\n'  # comments are fine; the stray comma is not


async def list_and_call(entry: dict[str, Any], home: Path, stderr: Path) -> tuple[set[str], str]:
    """The SDK's client started as the config entry says (command, args, env: nothing else of ours),
    with the little Claude Desktop passes of its own environment (HOME, PATH)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        **entry.get("env", {}),
    }
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
    with stderr.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool(ECHO, {"message": "hello from Claude Desktop"})
            return names, result.content[0].text  # type: ignore[union-attr]


@pytest.fixture
def everything() -> Iterator[tuple[dict[str, Any], FakeOfficialRegistry]]:
    """server-everything's registry entry, with a secret it does not need, on a loopback official registry."""
    entry = everything_entry()
    entry["packages"][0]["environmentVariables"] = [
        {"name": TOKEN, "description": "A token the server does not need", "isSecret": True, "isRequired": True}
    ]
    with FakeOfficialRegistry([entry]) as registry:
        yield entry, registry


def test_a_person_adds_a_server_then_connects_claude_desktop_from_the_page_and_its_tools_work(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str, everything: tuple[dict[str, Any], FakeOfficialRegistry]
) -> None:
    assert shutil.which("npx"), "npx is needed for this test (Debian: apt-get install nodejs npm)"
    listed, registry = everything
    served = start_serve(
        tmp_path,
        MCP_SETUP_REGISTRIES="official",
        MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
        MCP_SETUP_PROBE_TIMEOUT_SECONDS=str(scaled(240)),
    )
    home = Path(served.env["HOME"])
    (home / ".config" / "Claude").mkdir(parents=True)
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(CURSOR_BROKEN)
    (home / ".gemini").mkdir()
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        page.get_by_label("What do you want to set up?").fill(f"set up {listed['name']}")
        page.get_by_label("What do you want to set up?").press("Enter")
        dialog = page.get_by_role("dialog", name=re.compile(f"Enter your {TOKEN}"))
        dialog.get_by_label(f"Your {TOKEN}").fill(canary)
        dialog.get_by_role("button", name="Save").click()
        # npx fetches the package first (20+ s from the npm registry)
        expect(page.locator(".result-card.installed")).to_contain_text(
            "Installed and connected", timeout=scaled(240_000)
        )
        expect(page.locator(".result-card.installed")).not_to_contain_text(
            "srv_"
        )  # the id is the agent's, not the person's

        # The next part: the clients found here, the /mcp address, the tools as a client names them.
        part = page.locator(".clients-card")
        expect(part).to_contain_text("Use it in your AI client")
        desktop = part.locator(".client[data-client=claude-desktop]")
        expect(desktop).to_contain_text("Claude Desktop")
        expect(desktop).to_contain_text("Not connected")
        expect(part.locator(".client[data-client=cursor]")).to_be_visible()
        expect(part.locator(".client[data-client=codex] .client-state")).to_have_text("Not found on this computer")
        expect(part).to_contain_text(f"{served.base}/mcp")
        expect(part).to_contain_text("mcp-setup client connect CLIENT --http")
        expect(part).to_contain_text("The key in this page's link opens only this page")
        expect(part.locator(".client-tools")).to_contain_text(ECHO)

        # Connect shows the exact change first; nothing is written until it is applied.
        desktop.get_by_role("button", name="Connect…").click()
        diff = desktop.locator("pre.diff")
        expect(diff).to_contain_text('"mcp-setup"')
        expect(diff).to_contain_text(str(claude))
        assert not claude.exists()
        apply = desktop.get_by_role("button", name="Apply this change")
        expect(apply).to_be_focused()
        scroll_to(part)
        shot(page, artifacts, "25-clients-diff")
        shot(page, artifacts, "25-clients-diff-390px", narrow=True)
        apply.click()
        desktop = part.locator(".client[data-client=claude-desktop]")
        expect(desktop).to_contain_text("✓ Updated")
        expect(desktop.locator(".client-state")).to_have_text("Connected")
        shot(page, artifacts, "25-clients-connected")
        entry = json.loads(claude.read_text())["mcpServers"]["mcp-setup"]
        assert entry["args"] == ["mcp"] and entry["env"] == {"MCP_SETUP_HOME": served.env["MCP_SETUP_HOME"]}

        # Connecting again changes nothing (idempotent).
        desktop.get_by_role("button", name="Check again").click()
        expect(desktop).to_contain_text("already up to date; nothing written")
        assert len(list(claude.parent.glob("claude_desktop_config.json.bak-*"))) == 0  # there was no old file

        # A file that is not valid JSON(C) is left as it is; the page gives the entry to paste.
        cursor = part.locator(".client[data-client=cursor]")
        cursor.get_by_role("button", name="Connect…").click()
        expect(cursor).to_contain_text("it was left untouched")
        expect(cursor.locator("pre.diff")).to_contain_text('"mcp-setup"')
        shot(page, artifacts, "25-clients-paste-390px", narrow=True)
        page.set_viewport_size(NARROW)
        shot_of(part, str(artifacts / "25-clients-part-390px.png"))
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]  # nothing wider than a phone
        page.set_viewport_size(WIDE)
        assert (home / ".cursor" / "mcp.json").read_text() == CURSOR_BROKEN

        # Over HTTP: the change shows where a new key of the client's own goes, never the key.
        gemini = part.locator(".client[data-client=gemini]")
        gemini.get_by_role("button", name="Connect over HTTP…").click()
        expect(gemini.locator("pre.diff")).to_contain_text("<a new client token>")
        expect(gemini.locator("pre.diff")).to_contain_text(f"{served.base}/mcp")
        gemini.get_by_role("button", name="Apply this change").click()
        expect(gemini).to_contain_text("with a key of its own")
        http_entry = json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["mcp-setup"]
        assert http_entry["httpUrl"] == f"{served.base}/mcp"
        client_key = http_entry["headers"]["Authorization"].removeprefix("Bearer ")
        assert client_key.startswith("mcps_") and client_key not in page.content()
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "g", "version": "0"},
            },
        }
        with served.client() as http:
            answered = http.post(
                "/mcp",
                json=initialize,
                headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {client_key}"},
            )
            assert answered.status_code == 200, answered.text
            assert http.get("/", headers={"Authorization": f"Bearer {client_key}"}).status_code == 403  # not the page

        assert canary not in page.content()
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()

    # Claude Desktop's view: the SDK client started as its config says.
    async def bounded() -> tuple[set[str], str]:
        with anyio.fail_after(scaled(60)):
            return await list_and_call(entry, home, tmp_path / "client-stderr.log")

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop in this thread
        names, echoed = pool.submit(anyio.run, bounded).result()
    assert ECHO in names
    assert "hello from Claude Desktop" in echoed and canary not in echoed
