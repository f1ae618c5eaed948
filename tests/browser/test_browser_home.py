"""The home page stays useful after the first day, in Debian's Chromium at 1280×800 and 390×844.

Two servers are installed before the page is opened, neither from the page: the stub added with
``mcp-setup add`` in a terminal, and the same stub imported with ``mcp-setup import
claude-desktop`` from a Claude Desktop config that held its key in plain text. After a reload
the installed list says who installed each in words, its tools and its state; the permanent "AI
clients" section lists every client mcp-setup supports, found here or not, with its state and a
Connect button, and connecting Cursor from it writes Cursor's file, still "Connected" after
another reload.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from app.clients import CLIENT_NAMES
from tests.browser.page import NARROW, close_leaking_nothing, open_page
from tests.browser.redraws import scroll_to
from tests.browser.serve import make_catalog, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex

DESKTOP = {"width": 1280, "height": 800}


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        mcp_setup_argv(*args),
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _installed_outside_the_page(tmp_path: Path, catalog: Path, canary: str) -> Path:
    """The stub added in a terminal, and a stub entry of Claude Desktop imported; returns the user's home."""
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    key_file = tmp_path / "key.txt"
    key_file.write_text(canary + "\n")
    _cli(env, "add", "stub", "--yes", "--secret", f"STUB_API_KEY=@{key_file}")
    home = Path(env["HOME"])
    desktop = home / ".config" / "Claude" / "claude_desktop_config.json"
    desktop.parent.mkdir(parents=True)
    entry = {
        "command": "python3",
        "args": [str(SERVER_PY)],
        "env": {"STUB_API_KEY": canary, "STUB_EXPECTED_SHA256": sha256_hex(canary)},
    }
    desktop.write_text(json.dumps({"mcpServers": {"notes": entry}}, indent=2))
    _cli(env, "import", "claude-desktop", "--yes")
    (home / ".cursor").mkdir()  # Cursor is on this computer, not connected yet
    return home


def _check_the_home_page(page: Any) -> None:
    servers = page.locator("#servers > li.server")
    expect(servers).to_have_count(2)
    added = servers.filter(has_text="Installed by you, in the terminal")
    imported = servers.filter(has_text="Imported from Claude Desktop")
    for card in (added, imported):
        expect(card).to_have_count(1)
        expect(card.locator(".badge")).to_have_text("Connected")
        expect(card.locator("details.tools summary")).to_have_text("2 tools")
    expect(page.locator("#servers")).not_to_contain_text("import:claude-desktop")
    expect(page.locator("#servers")).not_to_contain_text("Installed by cli")

    section = page.get_by_role("region", name="AI clients")
    rows = section.locator("li.client")
    expect(rows).to_have_count(len(CLIENT_NAMES))
    for client, name in CLIENT_NAMES.items():  # every client mcp-setup supports, found or not
        row = section.locator(f"li.client[data-client={client}]")
        expect(row.locator("strong")).to_have_text(name)
        expect(
            row.get_by_role("button", name="Connect…").or_(row.get_by_role("button", name="Check again"))
        ).to_be_visible()
    desktop = section.locator("li.client[data-client=claude-desktop]")
    expect(desktop.locator(".client-state")).to_have_text("Connected")  # the import connected it
    expect(section.locator("li.client[data-client=vscode] .client-state")).to_have_text("Not found on this computer")
    expect(
        section.locator("li.client[data-client=vscode]").get_by_role("button", name="Connect over HTTP…")
    ).to_be_visible()


def test_after_a_reload_the_home_page_lists_who_installed_each_server_and_connects_every_supported_client(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    home = _installed_outside_the_page(tmp_path, catalog, canary)
    served = start_serve(tmp_path, catalog)
    try:
        context, page, watch = open_page(browser, served)
        page.set_viewport_size(DESKTOP)
        page.reload()
        expect(page.locator("#conn")).to_have_text("Connected")
        _check_the_home_page(page)
        page.screenshot(path=str(artifacts / "42-home-1280.png"), full_page=True)

        section = page.get_by_role("region", name="AI clients")
        cursor = section.locator("li.client[data-client=cursor]")
        expect(cursor.locator(".client-state")).to_have_text("Not connected")
        cursor.get_by_role("button", name="Connect…").click()
        expect(cursor.locator("pre.diff")).to_contain_text('"mcp-setup"')
        cursor.get_by_role("button", name="Apply this change").click()
        expect(section.locator("li.client[data-client=cursor] .client-state")).to_have_text("Connected")
        written = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["mcp-setup"]
        assert written["args"][-1:] == ["mcp"] and canary not in json.dumps(written)

        page.set_viewport_size(NARROW)
        page.reload()
        expect(page.locator("#conn")).to_have_text("Connected")
        _check_the_home_page(page)
        cursor = page.get_by_role("region", name="AI clients").locator("li.client[data-client=cursor]")
        expect(cursor.locator(".client-state")).to_have_text("Connected")
        scroll_to(cursor)
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]  # nothing wider than a phone
        page.screenshot(path=str(artifacts / "42-home-390.png"), full_page=True)
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
