"""Unticking tools in the consent (#29 item 10), in Debian's Chromium, at 1280 and 390×844.

The web modal: a person sets up the stub, approves its test, and the install's consent shows the
two tools it listed, both ticked; they untick ``whoami`` and approve. The gateway's ``/mcp`` then
lists ``stub__echo`` only, and a call of ``stub__whoami`` is refused with ``tool_left_out``.
The consent page (URL elicitation of ``mcp-setup mcp``): the same, with the boxes of the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import expect

from tests.browser.consent_steps import _ask_for_the_stub
from tests.browser.page import close_leaking_nothing, open_page
from tests.browser.redraws import scroll_to
from tests.browser.serve import make_catalog, start_serve, stop_serve
from tests.helpers.timeouts import scaled

PHONE = {"width": 390, "height": 844}


def listed_and_refused(served: Any, tool: str) -> tuple[set[str], dict[str, Any]]:
    """Through ``/mcp`` with the SDK's client and a client token: the tool names, and the result of
    calling ``tool``."""
    token = served.client_token()

    async def talk() -> tuple[set[str], dict[str, Any]]:
        with anyio.fail_after(scaled(60)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(30))
            async with (
                http,
                Client(streamable_http_client(f"{served.base}/mcp", http_client=http), mode="legacy") as client,
            ):
                names = {t.name for t in (await client.list_tools()).tools}
                answered = await client.call_tool(tool, {})
                return names, {
                    "isError": answered.is_error,
                    "structured": answered.structured_content,
                    "text": answered.content[0].text,
                }  # type: ignore[union-attr]

    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(talk)


def test_a_person_unticks_a_tool_in_the_modal_and_the_gateway_neither_lists_nor_runs_it(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        consent = _ask_for_the_stub(page, canary)
        expect(consent).to_be_visible()
        expect(consent.locator("#consent-tools")).to_be_hidden()  # the test's consent: nothing ran yet
        consent.get_by_role("button", name="Approve").click()
        expect(consent).to_be_hidden()

        # The install asks once more, now that the test listed the tools.
        consent = page.get_by_role("dialog", name=re.compile(r"Allow mcp-setup to install"))
        expect(consent).to_be_visible(timeout=scaled(60_000))
        tools = consent.locator("#consent-tools")
        expect(tools).to_contain_text("Tools it gives your assistant")
        echo, whoami = (
            consent.get_by_role("checkbox", name=re.compile("^echo")),
            consent.get_by_role("checkbox", name=re.compile("^whoami")),
        )
        expect(echo).to_be_checked()
        expect(whoami).to_be_checked()
        expect(tools).to_contain_text("You keep 2 of its 2 tools")
        expect(tools).to_contain_text("Echo the given text back.")
        budget = tools.locator(".budget-line")  # where the ticked tools leave the context budget, kept up to date
        expect(budget).to_have_text(
            re.compile(r"^ With them, AI clients are listed [\d,]+ of your budget of 8,000 tokens\.$")
        )
        with_both = budget.inner_text()
        whoami.uncheck()
        expect(tools).to_contain_text("You keep 1 of its 2 tools")
        expect(budget).not_to_have_text(with_both)
        expect(tools.locator("#consent-tools-note code")).to_have_text(
            "mcp-setup enable io.github.mcp-setup/stub --tool TOOL"
        )
        scroll_to(tools)
        page.screenshot(path=str(artifacts / "29-untick-modal-1280.png"))
        echo.uncheck()
        expect(consent.locator("#consent-tools-none")).to_be_visible()  # all unticked: said plainly
        echo.check()
        expect(consent.locator("#consent-tools-none")).to_be_hidden()
        page.set_viewport_size(PHONE)
        scroll_to(tools)
        page.screenshot(path=str(artifacts / "29-untick-modal-390x844.png"))
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width  # nothing wider than the phone
        consent.get_by_role("button", name="Approve").click()
        expect(consent).to_be_hidden()

        done = page.locator(".result-card.installed")
        expect(done).to_contain_text("Installed and connected", timeout=scaled(60_000))
        card = page.locator("li.server", has_text="stub")
        expect(card.locator(".left-out")).to_contain_text("You left out: whoami")  # the installed list says so
        expect(card.locator("details.tools summary")).to_have_text("1 tool")
        scroll_to(card)
        page.screenshot(path=str(artifacts / "29-untick-list-390x844.png"))
        sent = [json.loads(f) for f in watch.received if '"consent_request"' in f]
        assert [[t["name"] for t in f["consent"]["tools"]] for f in sent] == [[], ["echo", "whoami"]]

        names, refused = listed_and_refused(served, "stub__whoami")
        assert "stub__echo" in names and "stub__whoami" not in names, names
        assert refused["isError"] is True and refused["structured"]["error"]["code"] == "tool_left_out", refused
        assert "mcp-setup enable stub --tool whoami" in refused["text"]
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert canary not in served.stderr()
