"""Rough edges of #12 in Chromium: a search whose registry failed says which and why (item 1),
and "press Enter to stop" in the web thread stops the run (item 3)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.page import open_page, shot
from tests.browser.serve import make_catalog, start_serve, stop_serve


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_failed_registry_is_named_with_its_reason_and_enter_stops_the_run(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(
        tmp_path,
        make_catalog(tmp_path, canary),
        MCP_SETUP_REGISTRIES="local,official",
        MCP_SETUP_OFFICIAL_REGISTRY_URL=f"http://127.0.0.1:{closed_port()}",
    )
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        page.get_by_text("Or browse the registries").click()
        search = page.get_by_label("Search for a server")
        search.fill("zzz-nothing-matches")
        search.press("Enter")
        status = page.get_by_role("status").filter(has_text="Nothing found.")
        expect(status).to_contain_text("Could not search: the official MCP registry (Could not reach")
        expect(status).not_to_contain_text("Try other words")
        shot(page, artifacts, "21-search-registry-failed")

        goal = page.get_by_label("What do you want to set up?")
        goal.fill("set up zzz-nothing-matches")
        goal.press("Enter")
        question = page.locator(".msg.question").last
        expect(question).to_contain_text("press Enter to stop")
        expect(page.get_by_text("The official registry could not be searched")).to_have_count(1)  # once per search
        question.get_by_label("Your answer").press("Enter")
        expect(page.locator(".result-card")).to_contain_text("Setup did not finish")
        expect(page.locator(".msg.user").last).to_contain_text("(pressed Enter)")
        assert not watch.page_errors
        context.close()
    finally:
        stop_serve(served)
