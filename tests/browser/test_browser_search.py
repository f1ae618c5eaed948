"""The page's search box says "Did you mean …?" from the search result, and the suggestion,
a button, searches for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.page import open_page, shot
from tests.browser.serve import STUB, make_catalog, start_serve, stop_serve

PLAYWRIGHT = "io.example.search/playwright"


def test_a_search_with_a_typo_says_did_you_mean_and_the_suggestion_searches_for_it(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    doc = {"name": PLAYWRIGHT, "description": "Automate a browser.", "version": "1.0.0"}
    (catalog / "playwright.json").write_text(json.dumps(doc))
    served = start_serve(tmp_path, catalog)
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        page.get_by_text("Or browse the registries").click()
        search = page.get_by_label("Search for a server")
        status = page.locator("#search-status")
        cards = page.locator("#search-results .result")

        # three edits from "playwright": too far to search in its place, near enough to offer
        search.fill("playwrite")
        search.press("Enter")
        expect(status).to_have_text("Nothing found. Did you mean playwright?")
        expect(cards).to_have_count(0)
        shot(page, artifacts, "41-search-did-you-mean")
        page.get_by_role("button", name="Search for playwright").click()
        expect(search).to_have_value("playwright")
        expect(cards.filter(has_text=PLAYWRIGHT)).to_have_count(1)
        expect(status).to_have_text("1 server found.")

        # one edit: searched in its place, and said
        search.fill("stbu")
        search.press("Enter")
        expect(status).to_have_text("1 server found. Did you mean stub?")
        expect(cards.filter(has_text=STUB)).to_have_count(1)
        assert not watch.page_errors and not watch.console_errors
        context.close()
    finally:
        assert stop_serve(served) == 0, served.stderr()
