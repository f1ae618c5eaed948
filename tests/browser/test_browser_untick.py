"""One approval per install, and leaving a tool out on the server's card, in Debian's Chromium,
at 1280 and 390×844.

A person sets up the stub and approves its test once: the consent says it covers the install,
and the install follows the passing test with both tools it listed, with no second consent. On
the installed server's card they untick ``whoami``: the gateway's ``/mcp`` then lists
``stub__echo`` only, and a call of ``stub__whoami`` is refused with ``tool_left_out``.
"""

from __future__ import annotations

import json
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


def test_one_approval_installs_with_every_tested_tool_and_a_tool_unticked_on_the_card_is_neither_listed_nor_run(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary), MCP_SETUP_CONSENT="ask")
    try:
        context, page, watch = open_page(browser, served)
        consent = _ask_for_the_stub(page, canary)
        expect(consent).to_be_visible()
        expect(consent.locator("#consent-tools")).to_be_hidden()  # the test's consent: nothing ran yet
        expect(consent).to_contain_text("no second question")  # it covers the install
        consent.get_by_role("button", name="Approve").click()
        expect(consent).to_be_hidden()

        # No second approval: the install follows the test, with every tool it listed.
        done = page.locator(".result-card.installed")
        expect(done).to_contain_text("Installed and connected", timeout=scaled(60_000))
        sent = [json.loads(f) for f in watch.received if '"consent_request"' in f]
        assert [[t["name"] for t in f["consent"]["tools"]] for f in sent] == [[]]
        card = page.locator("li.server", has_text="stub")
        expect(card.locator("details.tools summary")).to_have_text("2 tools")
        pick = card.locator("details.tool-pick")
        pick.locator("summary").click()
        echo = pick.get_by_role("checkbox", name="Offer echo to your assistant")
        whoami = pick.get_by_role("checkbox", name="Offer whoami to your assistant")
        expect(echo).to_be_checked()
        expect(whoami).to_be_checked()
        scroll_to(pick)
        page.screenshot(path=str(artifacts / "42-tool-pick-card-1280.png"))
        whoami.uncheck()
        card = page.locator("li.server", has_text="stub")
        expect(card.locator(".left-out")).to_contain_text("You left out: whoami", timeout=scaled(30_000))
        expect(card.locator("details.tools summary")).to_have_text("1 tool")
        expect(card.locator("details.tool-pick")).to_have_attribute("open", "")  # kept open across the redraw
        expect(card.get_by_role("checkbox", name="Offer whoami to your assistant")).not_to_be_checked()
        page.set_viewport_size(PHONE)
        scroll_to(card)
        page.screenshot(path=str(artifacts / "42-tool-pick-card-390x844.png"))
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width  # nothing wider than the phone

        names, refused = listed_and_refused(served, "stub__whoami")
        assert "stub__echo" in names and "stub__whoami" not in names, names
        assert refused["isError"] is True and refused["structured"]["error"]["code"] == "tool_left_out", refused
        assert "mcp-setup enable stub --tool whoami" in refused["text"]
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
    assert canary not in served.stderr()
