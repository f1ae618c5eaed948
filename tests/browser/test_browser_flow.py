"""The whole flow for a person, in Debian's Chromium, against ``mcp-setup serve`` (a subprocess),
a local catalog and the stub bundle: button → goal → choice → secret modal (wrong value) →
error shown → re-entry → connected, tools visible → remove. Screenshots go to
``test-artifacts/browser/``. The canary value must be in no websocket frame and not in the page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.page import close_leaking_nothing, open_page, shot
from tests.browser.serve import STUB, make_catalog, start_serve, stop_serve
from tests.helpers.timeouts import scaled


def test_a_person_adds_the_stub_server_with_a_wrong_key_first_sees_it_connected_and_removes_it(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    wrong = "wrong-" + canary[::-1]
    served = start_serve(tmp_path, make_catalog(tmp_path, canary, extra=True))
    try:
        context, page, watch = open_page(browser, served)
        expect(page.get_by_text("No servers installed yet")).to_be_visible()
        shot(page, artifacts, "01-start")

        # Button → goal.
        page.get_by_role("button", name="Add MCP server…").click()
        goal = page.get_by_label("What do you want to set up?")
        expect(goal).to_be_focused()
        goal.fill("set up the stub server")
        shot(page, artifacts, "02-goal")
        goal.press("Enter")

        # Choice: two servers are called "stub"; the assistant asks which one.
        question = page.locator(".msg.question").first
        expect(question).to_contain_text("Which one do you mean?")
        ours = question.get_by_role("button", name=re.compile(r"^io\.github\.mcp-setup\/stub \(local\)"))
        expect(question.get_by_role("button").first).to_be_focused()  # keyboard users land on the choices
        shot(page, artifacts, "03-choice")
        ours.click()

        # Secret modal: which server, which key, the prompt; masked; typed with the keyboard.
        dialog = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text(STUB)
        expect(dialog).to_contain_text("API key for the stub server")
        field = dialog.get_by_label("Your STUB_API_KEY")
        expect(field).to_be_focused()
        expect(field).to_have_attribute("type", "password")
        page.keyboard.type(wrong)
        shot(page, artifacts, "04-secret-modal", full_page=False)
        page.keyboard.press("Enter")
        expect(dialog).to_be_hidden()
        assert wrong not in page.content()

        # The error is shown where it happened, in plain words, with a way on.
        problem = page.locator(".steps .problem")
        expect(problem).to_contain_text("The server refused the settings it was given")
        first_test = page.locator(".steps").first
        expect(first_test.locator("[data-stage=handshake]")).to_have_attribute("data-status", "failed")
        expect(first_test.locator("[data-stage=downloading]")).to_have_attribute(
            "data-status", "done"
        )  # an MCPB bundle
        expect(first_test.locator("[data-stage=tools_listed]")).to_have_attribute("data-status", "pending")
        retry = page.get_by_role("button", name="Re-enter STUB_API_KEY")
        expect(retry).to_be_visible()
        shot(page, artifacts, "05-error-shown")

        # Re-entry of that one key.
        retry.click()
        expect(dialog).to_be_visible()
        expect(field).to_have_value("")
        expect(field).to_be_focused()
        # A short value is flagged as the user types (#10 item 2); a real token is not.
        field.fill("4821")
        expect(page.locator("#secret-weak")).to_be_visible()
        expect(page.locator("#secret-weak")).to_contain_text("cannot be protected against a determined agent")
        field.fill(canary)
        expect(page.locator("#secret-weak")).to_be_hidden()
        shot(page, artifacts, "06-secret-modal-390px", narrow=True, full_page=False)
        dialog.get_by_role("button", name="Save").click()
        expect(dialog).to_be_hidden()
        expect(page.locator("#secret-value")).to_have_value("")  # the field was cleared
        assert canary not in page.content()

        # Connected; the tools are visible in the thread and in the list.
        done = page.locator(".result-card.installed")
        expect(done).to_contain_text("Installed and connected", timeout=scaled(60_000))
        expect(done).to_contain_text("echo")
        install = page.locator(".steps[data-action=mcp_setup_install_and_connect]")
        expect(install).to_contain_text("Connected. Found 2 tools.")
        # Six steps: the install adopts the process its test started (#17), so its bundle is not
        # downloaded again.
        expect(install.locator(".step")).to_have_count(6)
        expect(install.locator(".step[data-status=done]")).to_have_count(6)
        expect(install.locator("[data-stage=connected]")).to_contain_text("Connect it")
        server = page.locator(".server", has_text=STUB)
        expect(server.locator(".badge")).to_have_text("Connected")
        expect(server).to_contain_text("Installed by you, in this page")
        server.locator("summary", has_text=re.compile(r"\d+ tools")).click()
        expect(server).to_contain_text("Echo the given text back.")
        shot(page, artifacts, "07-connected-tools")
        shot(page, artifacts, "08-connected-390px", narrow=True)
        assert canary not in page.content() and wrong not in page.content()

        # Reconnect (by keyboard) restarts it; it comes back connected and the focus stays put.
        reconnect = server.get_by_role("button", name=f"Reconnect {STUB}")
        reconnect.focus()
        page.keyboard.press("Enter")
        expect(server.locator(".badge")).to_have_text("Connected")
        expect(reconnect).to_be_enabled()
        expect(reconnect).to_be_focused()

        # Remove, with a confirmation.
        server.get_by_role("button", name=f"Remove {STUB}").click()
        confirm = page.get_by_role("dialog", name="Remove this server?")
        expect(confirm).to_be_visible()
        expect(confirm.get_by_role("button", name="Keep it")).to_be_focused()
        shot(page, artifacts, "09-confirm-remove", full_page=False)
        confirm.get_by_role("button", name="Remove").click()
        expect(page.get_by_text("No servers installed yet")).to_be_visible()
        expect(page.locator(".server")).to_have_count(0)
        shot(page, artifacts, "10-removed")

        received = close_leaking_nothing(context, page, watch, canary, wrong)
        assert received, "the page received no websocket frame"
        assert any('"secret_request"' in f for f in received)
        assert served.rpc("servers.list")["result"] == {"ok": True, "servers": []}
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert canary not in served.stderr() and wrong not in served.stderr()


def test_a_server_picked_in_the_search_pane_is_set_up_and_escape_in_the_secret_box_tells_the_assistant(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary, extra=True))
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        page.get_by_text("Or browse the registries").click()
        search = page.get_by_label("Search for a server")
        search.fill("stub")
        search.press("Enter")
        expect(page.get_by_role("status").filter(has_text="2 servers found.")).to_be_visible()
        shot(page, artifacts, "11-search-pane")
        page.get_by_role("button", name=f"Set up {STUB}").click()
        expect(page.locator(".msg.user")).to_have_text(re.compile(f"set up {re.escape(STUB)}"))
        dialog = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
        expect(dialog).to_be_visible()
        expect(dialog.get_by_label("Your STUB_API_KEY")).to_be_focused()
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        expect(page.get_by_text("You cancelled entering STUB_API_KEY. The assistant was told.")).to_be_visible()
        card = page.locator(".result-card.cancelled")
        expect(card).to_contain_text("Setup cancelled")
        expect(page.get_by_role("button", name="Set up another server")).to_be_focused()
        shot(page, artifacts, "12-cancelled")
        expect(page.get_by_text("No servers installed yet")).to_be_visible()
        context.close()
        assert watch.page_errors == [] and watch.console_errors == []
    finally:
        assert stop_serve(served) == 0
