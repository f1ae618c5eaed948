"""#25 item 2: a server's card shows its settings (names; never a secret's value) and recent log,
replaces a key (tested first: a refused value changes nothing), and offers "Update to X" when the registry has a newer version, and the
update runs the core path ``mcp-setup update`` takes: the person approves it in the consent box
(a Deny runs nothing), the new version is tested with the stored key and swapped in only if it
answers; one that does not answer leaves the installed version in place and working.

Two versions of the local stub are published in a loopback catalog (``publish`` of
tests/app/cli/test_cli_update.py); version 1.0.0 is installed before the page opens. Screenshots at
1280 and 390 wide.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from playwright.sync_api import expect

from tests.browser.page import NARROW, WIDE, close_leaking_nothing, open_page, shot
from tests.browser.redraws import scroll_to, shot_of
from tests.browser.serve import start_serve, stop_serve
from tests.helpers.timeouts import scaled
from tests.helpers.updates import STUB, install_v1, publish


def test_a_card_updates_its_server_after_the_person_approves_and_keeps_it_when_the_new_version_does_not_answer(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    publish(tmp_path, catalog, "1.0.0", canary)
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop in this thread
        pool.submit(anyio.run, install_v1, tmp_path / "data", catalog, canary).result()
    publish(tmp_path, catalog, "2.0.0", canary)
    served = start_serve(tmp_path, catalog, MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        card = page.locator(".server", has_text=STUB)
        expect(card.locator(".meta")).to_contain_text("version 1.0.0")
        card.locator("summary", has_text="Settings, version and recent log").click()
        # The card's settings (names; never a secret's value) and recent log.
        more = card.locator(".server-more")
        expect(more.locator(".settings-list")).to_contain_text("STUB_API_KEY — secret, stored encrypted (not shown)")
        expect(more).to_contain_text("Replace tests the server with the new key first")
        expect(more.locator("pre.server-log")).to_contain_text("stub: started")
        scroll_to(more)
        shot(page, artifacts, "25-card-settings-log", full_page=False)
        # Replace a key from the card: the secret box, then the test; a refused value changes nothing.
        wrong = "wrong-" + canary[::-1]
        status = more.locator(".rotate-status")
        for value, said in (
            (wrong, "The old value of STUB_API_KEY stays."),
            (canary, "using the new STUB_API_KEY; it is stored"),
        ):
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
        shot_of(card, str(artifacts / "25-card-settings-log-390px.png"))
        page.set_viewport_size(WIDE)

        status = card.locator(".update-status")
        expect(status).to_have_text("Version 2.0.0 is available (this is 1.0.0).")
        update = card.get_by_role("button", name=f"Update {STUB} to 2.0.0")
        scroll_to(card)
        shot(page, artifacts, "25-card-update-offered", full_page=False)

        # A Deny is the person's own choice: nothing runs, the card says so without alarm.
        update.click()
        consent = page.get_by_role("dialog", name=re.compile("Allow mcp-setup to update"))
        expect(consent).to_contain_text(f"You asked to update {STUB}.")  # the person pressed Update
        expect(status).to_contain_text("approve it in the box that opens")
        consent.get_by_role("button", name="Deny").click()
        expect(status).to_have_text("You did not allow it. Nothing was run, and the installed version stays.")
        expect(status).not_to_have_class(re.compile("error"))
        expect(card.locator(".meta")).to_contain_text("version 1.0.0")

        # Approved: tested with the stored key, swapped in; the card is drawn again with the new version.
        update.click()
        consent = page.get_by_role("dialog", name=re.compile("Allow mcp-setup to update"))
        consent.get_by_role("button", name="Approve").click()
        expect(status).to_have_text(
            re.compile(rf"✓ Updated {re.escape(STUB)} from 1\.0\.0 to 2\.0\.0 \(\d+ tools\)\."), timeout=scaled(60_000)
        )
        expect(card.locator(".meta")).to_contain_text("version 2.0.0")
        expect(card.locator(".badge")).to_have_text("Connected")
        expect(card.locator(".server-more")).to_have_attribute("open", "")  # still open on the card drawn again
        scroll_to(card)
        shot(page, artifacts, "25-card-updated", full_page=False)

        # A version that does not answer with the stored key: said in the card, 2.0.0 stays and works.
        publish(tmp_path, catalog, "3.0.0", "another-" + canary)
        page.reload()
        expect(page.locator("#conn")).to_have_text("Connected")
        card = page.locator(".server", has_text=STUB)
        card.locator("summary", has_text="Settings, version and recent log").click()
        status = card.locator(".update-status")
        expect(status).to_have_text("Version 3.0.0 is available (this is 2.0.0).")
        card.get_by_role("button", name=f"Update {STUB} to 3.0.0").click()
        page.get_by_role("dialog", name=re.compile("Allow mcp-setup to update")).get_by_role(
            "button", name="Approve"
        ).click()
        expect(status).to_contain_text(
            "Version 3.0.0 did not answer, so 2.0.0 stays installed. ", timeout=scaled(60_000)
        )
        expect(status).to_contain_text("invalid API key for STUB_API_KEY")
        expect(status).to_have_class(re.compile("error"))
        expect(card.locator(".meta")).to_contain_text("version 2.0.0")
        expect(card.locator(".badge")).to_have_text("Connected")
        page.set_viewport_size(NARROW)
        scroll_to(card)
        shot_of(card, str(artifacts / "25-card-update-kept-390px.png"))
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
        page.set_viewport_size(WIDE)
        listed = served.rpc("servers.list")["result"]["servers"]
        assert [(s["qualified_name"], s["version"], s["status"]) for s in listed] == [(STUB, "2.0.0", "connected")]
        assert canary not in page.content() and wrong not in page.content()
        close_leaking_nothing(context, page, watch, canary, wrong, "another-" + canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert canary not in served.stderr()
