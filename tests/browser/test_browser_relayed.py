"""An installed server's own request in the page, beside mcp-setup's own, in Debian's Chromium
against ``mcp-setup serve``: the person runs a tool from its card ("Try"), the page being the
call's client; the server (tests/stub_server/asking.py) asks for a form meanwhile, which opens in
a frame of its own saying "<server> asks" with its name, slug and icon, while mcp-setup's own key
box keeps its look. At 1280×800 and 390×844, with screenshots."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.browser.page import close_leaking_nothing, open_page
from tests.browser.serve import start_serve, stop_serve
from tests.helpers.asking_gateway import install_asking
from tests.helpers.timeouts import scaled

WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}
#: A 1×1 PNG, inline: the icon the server's serverInfo carries.
ICON = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
FORM = {
    "type": "object",
    "properties": {"colour": {"type": "string", "title": "Favourite colour", "description": "Any colour you like."}},
    "required": ["colour"],
}


def _install_asking(root: Path, key: Path) -> None:
    with Store.for_data_dir(root / "data", Vault.from_key_file(key)) as store:
        install_asking(store, {"ASKING_ICON": ICON})


def _shots(page: Page, artifacts: Path, name: str) -> None:
    for size, suffix in ((WIDE, "wide"), (NARROW, "narrow")):
        page.set_viewport_size(size)
        page.screenshot(path=str(artifacts / f"{name}-{suffix}.png"))
    page.set_viewport_size(WIDE)


def test_a_servers_own_form_is_framed_as_the_servers_beside_mcp_setups_own_key_box(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    key = tmp_path / "team.key"
    Vault.in_memory().export_key(key)
    _install_asking(tmp_path, key)
    served = start_serve(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key))
    try:
        context, page, watch = open_page(browser, served)
        page.set_viewport_size(WIDE)

        # mcp-setup's own prompt: the key box, in mcp-setup's look and words.
        served.rpc(
            "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your key", "server": "io.test/other"}
        )
        own = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
        expect(own).to_be_visible()
        expect(own).to_contain_text("The setup assistant asked")
        expect(own).not_to_have_class(re.compile(r"\brelayed\b"))
        assert own.get_attribute("data-origin") is None
        assert "asks" not in (own.locator("h2").text_content() or "")
        _shots(page, artifacts, "relayed-01-mcp-setups-own-key-box")
        own.get_by_role("button", name="Cancel").click()
        expect(own).to_be_hidden()

        # The server's own request, during a tool the person runs from its card.
        card = page.locator("li.server", has_text="Asking")
        expect(card.locator(".badge")).to_have_text("Connected", timeout=scaled(60_000))
        card.get_by_text("3 tools").click()
        card.get_by_label("Try ask").click()
        asked = {"method": "elicitation/create", "params": {"message": "Which colour?", "requestedSchema": FORM}}
        card.get_by_label("Inputs for ask (JSON)").fill(json.dumps(asked))
        card.get_by_role("button", name="Run ask").click()

        relayed = page.get_by_role("dialog", name="Asking asks")
        expect(relayed).to_be_visible()
        expect(relayed).to_have_class(re.compile(r"\brelayed\b"))
        expect(relayed).to_have_attribute("data-origin", "installed-server")
        expect(relayed.locator("h2")).to_have_text("Asking asks")
        expect(relayed).to_contain_text("This comes from the installed server Asking (asking), not from mcp-setup.")
        expect(relayed.locator("blockquote")).to_have_text("Which colour?")  # the server's own words
        expect(relayed.locator("#relayed-icon")).to_be_visible()
        assert relayed.locator("#relayed-icon").get_attribute("src") == ICON
        assert "mcp-setup" not in (relayed.locator("h2").text_content() or "")
        relayed.get_by_label("Favourite colour").fill("blue")
        _shots(page, artifacts, "relayed-02-installed-servers-own-form")
        relayed.get_by_role("button", name="Send").click()
        expect(relayed).to_be_hidden()

        answer = card.locator("div.try[data-tool=ask] .try-result")
        expect(answer).to_contain_text('"content": {"colour": "blue"}')

        # A form asking for a credential never opens: mcp-setup says so, in its own voice, under the tool.
        password = {"type": "object", "properties": {"value": {"type": "string", "format": "password"}}}
        sneaky = {"method": "elicitation/create", "params": {"message": "Your key again", "requestedSchema": password}}
        card.get_by_label("Inputs for ask (JSON)").fill(json.dumps(sneaky))
        card.get_by_role("button", name="Run ask").click()
        told = card.locator("div.try[data-tool=ask] .error")
        expect(told).to_contain_text("Asking (installed server `asking`) asked for: a credential by form")
        expect(answer).to_contain_text("mcp-setup refused this form")
        expect(relayed).to_be_hidden()

        # What it may ask your AI, changed on its card: stored and audited as the person at the page.
        choice = card.get_by_label("May ask your AI to write text")
        expect(choice).to_have_value("text")
        with page.expect_response(
            lambda r: r.url.endswith("/rpc") and "servers.sampling" in (r.request.post_data or "")
        ):
            choice.select_option("no")  # the store is read once mcp-setup answered the change
        expect(choice).to_have_value("no")
        with Store.for_data_dir(tmp_path / "data", Vault.from_key_file(key)) as store:
            (server,) = store.servers.list()
            assert server.sampling == "no"
            (row,) = [r for r in store.audit.entries() if r.event == "sampling"]
            assert (row.actor, row.detail) == ("user:web", "text -> no")
        close_leaking_nothing(context, page, watch, canary)
    finally:
        stop_serve(served)
