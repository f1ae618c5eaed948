"""Consent in the web modal, in Debian's Chromium, against ``mcp-setup serve`` (MCP_SETUP_CONSENT=ask).

A person asks for the stub server, enters the key, then reads the consent's document (who asked,
their settings first, one sandbox block, the package, sha256 and command line folded under
"Technical details", templates in words) and approves once: the approval covers the install,
which follows the passing test with the tools it listed, with no second question. A
direct JSON-RPC test call gets ``consent_required`` with the prompt id, and the modal opens in
the tab, where Deny ends it. The canary is in no frame, no page and no log.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.consent_steps import _ask_for_the_stub
from tests.browser.page import close_leaking_nothing, open_page, shot
from tests.browser.serve import STUB, make_catalog, start_serve, stop_serve
from tests.helpers.timeouts import scaled


def test_a_person_approves_once_in_the_consent_modal_and_the_server_is_tested_and_installed(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        consent = _ask_for_the_stub(page, canary)
        expect(consent).to_be_visible()
        expect(consent).to_contain_text(STUB)
        # One document: who asked, the person's settings first, one sandbox block, the internals folded.
        expect(consent.locator("#consent-asked")).to_have_text(
            f"You asked to install {STUB}."
        )  # the person started the setup on the page
        expect(consent.locator("#consent-intro")).to_contain_text("no second question")  # it covers the install
        headings = consent.locator("#consent-launch > h3")
        expect(headings.first).to_have_text("Your settings")
        expect(consent.locator("#consent-launch")).to_contain_text("STUB_API_KEY")
        expect(consent.locator("#consent-launch")).to_contain_text("this computer")
        expect(consent.locator("#consent-launch > h3", has_text="Sandbox")).to_have_count(1)
        expect(consent.locator("#consent-launch dt", has_text="Sandbox")).to_have_count(0)
        technical = consent.locator("details.technical")
        expect(technical.locator("summary")).to_have_text("Technical details")
        expect(technical.get_by_text("python3 <its own folder>/server/server.py")).to_be_hidden()  # folded
        technical.locator("summary").click()
        expect(technical).to_contain_text("mcpb: file://")
        expect(technical).to_contain_text("sha256")
        expect(technical).to_contain_text("python3 <its own folder>/server/server.py")
        expect(technical).to_contain_text("STUB_API_KEY=<your STUB_API_KEY>")
        expect(consent).not_to_contain_text("${")
        assert canary not in page.content()
        shot(page, artifacts, "consent-01-modal", full_page=False)
        consent.get_by_role("button", name="Approve").click()
        expect(consent).to_be_hidden()
        done = page.locator(".result-card.installed")
        expect(done).to_contain_text("Installed and connected", timeout=scaled(60_000))
        requests = [f for f in watch.received if '"consent_request"' in f]
        assert len(requests) == 1  # the test's, which covered the install: one approval per install
        card = page.locator("li.server", has_text="stub")
        expect(card.locator("details.tools summary")).to_have_text("2 tools")  # every tool the test listed
        # The agent's run (its transcript and results, relayed in these frames) held no approval
        # link and no consent id: the person answered in the modal, the agent only waited.
        consent_id = json.loads(requests[0])["consent_id"]
        agent_frames = [f for f in watch.received if '"consent_request"' not in f and '"consent_done"' not in f]
        assert agent_frames and not any("/secrets/consents/" in f or consent_id in f for f in agent_frames)

        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert canary not in served.stderr()


def test_a_json_rpc_caller_gets_consent_required_and_the_modal_opens_in_the_tab(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        asked = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key", "server": STUB})
        ref = asked["result"]["ref"]
        secret = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
        secret.get_by_label("Your STUB_API_KEY").fill(canary)
        secret.get_by_role("button", name="Save").click()
        expect(secret).to_be_hidden()

        params = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
        first = served.rpc("mcp_setup_test_connection", params)
        data = first["error"]["data"]
        assert data["code"] == "consent_required", first
        assert data["details"] == {"status": "pending"} and "/consents/" not in json.dumps(first)  # no link: a client
        consent = page.get_by_role("dialog", name=re.compile(r"Allow mcp-setup to test"))
        expect(consent).to_be_visible()
        consent.get_by_role("button", name="Deny").click()
        expect(consent).to_be_hidden()
        assert served.rpc("mcp_setup_test_connection", params)["error"]["data"]["code"] == "consent_required"
        expect(consent).to_be_visible()  # denied is not remembered: asked again
        consent.get_by_role("button", name="Approve").click()
        expect(consent).to_be_hidden()
        tested = served.rpc("mcp_setup_test_connection", params)
        assert {t["name"] for t in tested["result"]["tools"]} == {"echo", "whoami"}, tested

        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert canary not in served.stderr()


def test_a_deny_is_drawn_as_the_persons_own_choice_in_their_words(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    """#25 item 3: no "It did not work", no ✗ on a step, no agent-facing placeholder."""
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        consent = _ask_for_the_stub(page, canary)
        expect(consent).to_be_visible()
        consent.get_by_role("button", name="Deny").click()
        expect(consent).to_be_hidden()
        expect(page.locator(".own-choice").first).to_contain_text(
            "You did not allow it. Nothing was run.", timeout=scaled(60) * 1000
        )
        shot(page, artifacts, "consent-deny-own-choice", full_page=False)
        thread = page.locator("main").inner_text()
        assert "the name you gave" not in thread, thread
        assert "It did not work" not in thread and "✗" not in thread and "Waiting for you to approve" not in thread
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
