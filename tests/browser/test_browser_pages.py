"""The one-time consent and secret pages in Chromium (#25 item 6): styled like the main page, Deny
the safe default (first, focused, the main button), and readable on a phone (390×844: the rows
stack instead of squeezing values one word per line). Screenshots in test-artifacts/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from app.pages.server import SecretPageServer
from setup_agent.secrets.prompts import PromptBroker
from setup_agent.secrets.refs import SecretRefStore
from setup_agent.setup.consent import ConsentBroker
from tests.helpers.consent_page import open_remote

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture
def pages() -> Iterator[tuple[SecretPageServer, ConsentBroker]]:
    consents = ConsentBroker(ttl_seconds=600)
    with SecretPageServer(PromptBroker(SecretRefStore(ttl_seconds=600)), consents=consents) as server:
        yield server, consents


@pytest.mark.parametrize(("size", "name"), [(DESKTOP, "desktop"), (PHONE, "phone")])
def test_the_consent_page_is_styled_with_deny_as_the_safe_default(
    browser: Any, artifacts: Path, pages, size: dict[str, int], name: str
) -> None:
    server, consents = pages
    pending = open_remote(consents, warnings=True)
    context = browser.new_context(viewport=size)
    page = context.new_page()
    try:
        page.goto(server.consent_url(pending.consent_id))
        deny = page.get_by_role("button", name="Deny")
        approve = page.get_by_role("button", name="Approve")
        expect(deny).to_be_focused()  # Enter or a stray key press denies
        assert "primary" in (deny.get_attribute("class") or "") and "primary" not in (
            approve.get_attribute("class") or ""
        )
        first = page.locator(".buttons button").first
        assert first.inner_text() == "Deny"
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background != "rgba(0, 0, 0, 0)" and background != "rgb(255, 255, 255)"  # the stylesheet applies
        dt, dd = page.locator("#launch dt").first.bounding_box(), page.locator("#launch dd").first.bounding_box()
        assert dt and dd
        if name == "phone":
            assert abs(dt["x"] - dd["x"]) < 2 and dd["y"] > dt["y"]  # stacked: a value has the whole width
            assert dd["width"] > 300
        else:
            assert dd["x"] > dt["x"] + 50  # two columns where there is room
        page.screenshot(path=str(artifacts / f"consent-page-{name}.png"), full_page=True)
        deny.click()
        expect(page.get_by_role("heading", name="Denied")).to_be_visible()
        assert consents.status(pending.consent_id) == "denied"
    finally:
        context.close()


def test_the_secret_page_shares_the_style_and_its_submit_is_the_main_button(
    browser: Any, artifacts: Path, pages
) -> None:
    server, _ = pages
    prompt = server.broker.open("API_KEY", "Paste your key", server="example")
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    try:
        page.goto(server.url_for(prompt))
        expect(page.get_by_label("Your API_KEY")).to_be_focused()
        assert "primary" in (page.get_by_role("button", name="Submit").get_attribute("class") or "")
        page.screenshot(path=str(artifacts / "secret-page-phone.png"), full_page=True)
    finally:
        context.close()
