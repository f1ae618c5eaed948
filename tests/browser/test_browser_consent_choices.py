"""An install's one consent in the page (the test's, which covers the install) asks "May ask your
AI to write text", in Debian's Chromium: "Yes, without tools" is picked by default, and what the
person picks is stored with the installed server and shown on its card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.consent_steps import _ask_for_the_stub
from tests.browser.page import close_leaking_nothing, open_page
from tests.browser.serve import make_catalog, start_serve, stop_serve
from tests.helpers.timeouts import scaled


def test_the_one_consent_of_an_install_asks_what_the_server_may_ask_your_ai_and_the_pick_is_kept(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        consent = _ask_for_the_stub(page, canary)
        expect(consent).to_be_visible()  # the test's consent, which covers the install: it asks the choice
        group = consent.get_by_role("group", name="May ask your AI to write text")
        expect(group.get_by_role("radio", name="Yes, without tools")).to_be_checked()
        expect(group.get_by_role("radio", name="No")).not_to_be_checked()
        expect(group.get_by_role("radio", name="Yes, with tools")).not_to_be_checked()
        group.get_by_role("radio", name="Yes, with tools").check()
        page.screenshot(path=str(artifacts / "consent-choices-1280.png"))
        consent.get_by_role("button", name="Approve").click()
        expect(consent).to_be_hidden()

        expect(page.locator(".result-card.installed")).to_contain_text(
            "Installed and connected", timeout=scaled(60_000)
        )
        card = page.locator("li.server", has_text="stub")
        expect(card.get_by_label("May ask your AI to write text")).to_have_value("tools")
        (listed,) = served.rpc("servers.list")["result"]["servers"]
        assert listed["sampling"] == "tools"
        close_leaking_nothing(context, page, watch, canary)
    finally:
        stop_serve(served)
