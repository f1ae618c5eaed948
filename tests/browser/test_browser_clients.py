"""#25 item 1: after "Installed and connected", the page connects the person's AI client.

The walk-through, as one test: ``mcp-setup serve`` (a subprocess, HOME a temp dir holding
Claude Desktop's and Cursor's folders), the stub server added on the page (the local stub
bundle, not server-everything: npx's first fetch takes 20+ s and needs the network), Claude
Desktop connected from the page (the diff shown, then applied), the server card's settings
and recent log (#25 item 2), and then the SDK's stdio
client started exactly as that config file says lists and calls ``stub__echo``. Cursor's file
holds comments: it is left alone and the entry to paste is shown. Screenshots at 1280 and 390.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from playwright.sync_api import expect

from tests.browser.serve import make_catalog, start_serve, stop_serve
from tests.browser.test_browser_flow import NARROW, WIDE, close_leaking_nothing, open_page, shot
from tests.timeouts import scaled

CURSOR_JSONC = '{\n  // my own note\n  "mcpServers": {}\n}\n'


async def list_and_call(entry: dict[str, Any], stderr: Path) -> tuple[set[str], str]:
    """The SDK's client started as the config entry says (command, args, env: nothing else of ours)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", **entry.get("env", {})}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
    with stderr.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("stub__echo", {"text": "hello from Claude Desktop"})
            return names, result.content[0].text  # type: ignore[union-attr]


def test_a_person_adds_a_server_then_connects_claude_desktop_from_the_page_and_its_tools_work(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary))
    home = Path(served.env["HOME"])
    (home / ".config" / "Claude").mkdir(parents=True)
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(CURSOR_JSONC)
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        page.get_by_label("What do you want to set up?").fill("set up io.github.mcp-setup/stub")
        page.get_by_label("What do you want to set up?").press("Enter")
        dialog = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
        dialog.get_by_label("Your STUB_API_KEY").fill(canary)
        dialog.get_by_role("button", name="Save").click()
        expect(page.locator(".result-card.installed")).to_contain_text("Installed and connected", timeout=scaled(60_000))

        # The next part: the clients found here, the /mcp address, the tools as a client names them.
        part = page.locator(".clients-card")
        expect(part).to_contain_text("Use it in your AI client")
        desktop = part.locator(".client[data-client=claude-desktop]")
        expect(desktop).to_contain_text("Claude Desktop")
        expect(desktop).to_contain_text("Not connected")
        expect(part.locator(".client[data-client=cursor]")).to_be_visible()
        expect(part).to_contain_text("Not found here: ")
        expect(part).to_contain_text(f"{served.base}/mcp")
        expect(part).to_contain_text("mcp-setup token create NAME")
        expect(part.locator(".client-tools")).to_contain_text("stub__echo")

        # Connect shows the exact change first; nothing is written until it is applied.
        desktop.get_by_role("button", name="Connect…").click()
        diff = desktop.locator("pre.diff")
        expect(diff).to_contain_text('"mcp-setup"')
        expect(diff).to_contain_text(str(claude))
        assert not claude.exists()
        apply = desktop.get_by_role("button", name="Apply this change")
        expect(apply).to_be_focused()
        part.scroll_into_view_if_needed()
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

        # A file with comments is left as it is; the page gives the entry to paste.
        cursor = part.locator(".client[data-client=cursor]")
        cursor.get_by_role("button", name="Connect…").click()
        expect(cursor).to_contain_text("it was left untouched")
        expect(cursor.locator("pre.diff")).to_contain_text('"mcp-setup"')
        shot(page, artifacts, "25-clients-paste-390px", narrow=True)
        page.set_viewport_size(NARROW)
        part.screenshot(path=str(artifacts / "25-clients-part-390px.png"))
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]  # nothing wider than a phone
        page.set_viewport_size(WIDE)
        assert (home / ".cursor" / "mcp.json").read_text() == CURSOR_JSONC

        # #25 item 2: the card's settings (names; never a secret's value) and recent log.
        card = page.locator(".server", has_text="io.github.mcp-setup/stub")
        card.get_by_role("button", name="Reconnect io.github.mcp-setup/stub").click()  # a start that logs
        expect(card.locator(".badge")).to_have_text("Connected")
        card.locator("summary", has_text="Settings and recent log").click()
        more = card.locator(".server-more")
        expect(more.locator(".settings-list")).to_contain_text("STUB_API_KEY — secret, stored encrypted (not shown)")
        expect(more).to_contain_text("Replace tests the server with the new key first")
        expect(more).to_contain_text("mcp-setup update stub")
        expect(more.locator("pre.server-log")).to_contain_text("stub: started")
        more.scroll_into_view_if_needed()
        shot(page, artifacts, "25-card-settings-log", full_page=False)
        # Replace a key from the card: the secret box, then the test; a refused value changes nothing.
        wrong = "wrong-" + canary[::-1]
        status = more.locator(".rotate-status")
        for value, said in ((wrong, "The old value of STUB_API_KEY stays."), (canary, "using the new STUB_API_KEY; it is stored")):
            more.get_by_role("button", name="Replace STUB_API_KEY").click()
            box = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
            expect(box).to_contain_text("It is tested with io.github.mcp-setup/stub before it replaces the old one")
            # The list is drawn again meanwhile (a status event does that): the card's replace in
            # flight keeps saying what it does, and its answer reaches the card drawn now.
            page.evaluate("async () => { await (await import('/static/servers.js')).loadServers(); }")
            expect(status).to_contain_text("Enter the new value in the box")
            box.get_by_label("Your STUB_API_KEY").fill(value)
            box.get_by_role("button", name="Save").click()
            expect(status).to_contain_text(said, timeout=scaled(60_000))
        page.set_viewport_size(NARROW)
        card.screenshot(path=str(artifacts / "25-card-settings-log-390px.png"))
        page.set_viewport_size(WIDE)
        assert canary not in page.content() and wrong not in page.content()
        close_leaking_nothing(context, page, watch, canary, "wrong-" + canary[::-1])
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()

    # Claude Desktop's view: the SDK client started as its config says.
    async def bounded() -> tuple[set[str], str]:
        with anyio.fail_after(scaled(60)):
            return await list_and_call(entry, tmp_path / "client-stderr.log")

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop in this thread
        names, echoed = pool.submit(anyio.run, bounded).result()
    assert "stub__echo" in names
    assert "hello from Claude Desktop" in echoed and canary not in echoed
