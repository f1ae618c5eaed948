"""The context budget on the page, in Debian's Chromium at 1280×800 and 390×844: under the
installed servers, where it stands ("Tool definitions listed to AI clients: N of B tokens; M tools
reachable through mcp_setup_find_tools") and where it comes from; the person saves their own,
which every mcp-setup on the data folder then uses, and a value that is not a budget is refused
in words. Three stub servers of 32 tools each, installed before ``serve`` starts, pass the
default budget of 8,000 tokens.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from setup_agent.secrets.vault import Vault
from setup_agent.store import SQLITE_FILE_NAME, TOOLS_BUDGET, read_sqlite_preference
from tests.browser.page import NARROW, close_leaking_nothing, open_page
from tests.browser.redraws import scroll_to
from tests.browser.serve import start_serve, stop_serve
from tests.helpers.budget import install_many

DESKTOP = {"width": 1280, "height": 800}
SERVERS, TOOLS = 3, 32
STANDING = re.compile(
    r"^Tool definitions listed to AI clients: [\d,]+ of 8,000 tokens; [\d,]+ tools reachable through mcp_setup_find_tools\.$"
)


def test_the_page_says_where_the_context_budget_stands_and_the_person_saves_their_own(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    (tmp_path / "data").mkdir()
    Vault.in_memory().export_key(tmp_path / "data.key")
    install_many(tmp_path, canary, SERVERS, TOOLS)
    # Unsandboxed: each stub reads its tools file from the test's folder (a sandbox hides it).
    served = start_serve(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(tmp_path / "data.key"), MCP_SETUP_SANDBOX="off")
    try:
        context, page, watch = open_page(browser, served)
        page.set_viewport_size(DESKTOP)
        expect(page.locator("#servers > li.server")).to_have_count(SERVERS)
        standing = page.locator("#budget-standing")
        expect(standing).to_have_text(STANDING)  # nothing used yet: the budget filled in install order
        listed, budget, reachable = (int(n.replace(",", "")) for n in re.findall(r"[\d,]+", standing.inner_text()))
        assert listed <= budget == 8000 and 0 < reachable < SERVERS * TOOLS  # some listed, the rest found
        more = page.locator("#budget-more")
        more.locator("summary").click()
        expect(page.locator("#budget-source")).to_have_text(
            re.compile(r"^The default \(8,000 tokens\)\. Save your own")
        )
        expect(page.get_by_label("Tokens of tool definitions (0: list every tool)")).to_have_value("8000")
        page.screenshot(path=str(artifacts / "43-budget-1280.png"), full_page=True)

        field = page.get_by_label("Tokens of tool definitions (0: list every tool)")
        field.fill("-5")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator("#budget-error")).to_have_text(
            "The budget is a whole number of tokens from 0 (no budget: every tool is listed) to 1,000,000."
        )
        field.fill("100000")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(standing).to_have_text(
            re.compile(
                r"^Tool definitions listed to AI clients: [\d,]+ of 100,000 tokens; every installed tool is listed\.$"
            )
        )
        expect(page.locator("#budget-error")).to_be_hidden()
        expect(page.locator("#budget-source")).to_have_text(re.compile(r"^You saved it here;"))
        # Saved for every mcp-setup on this data folder (an AI client's `mcp-setup mcp` reads it there).
        assert read_sqlite_preference(tmp_path / "data" / SQLITE_FILE_NAME, TOOLS_BUDGET) == "100000"

        page.set_viewport_size(NARROW)
        page.reload()
        expect(page.locator("#conn")).to_have_text("Connected")
        expect(standing).to_contain_text("of 100,000 tokens; every installed tool is listed")
        page.locator("#budget-more summary").click()
        expect(page.get_by_label("Tokens of tool definitions (0: list every tool)")).to_have_value("100000")
        scroll_to(page.locator("#budget-save"))
        expect(page.locator("#budget-save")).to_be_in_viewport()
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]  # nothing wider than a phone
        page.screenshot(path=str(artifacts / "43-budget-390.png"), full_page=True)
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
