"""A server card's Network part in Debian's Chromium at 1280×800 and 390×844: "Only these" is one
step away after an install.

The stub is installed as an install after a test through mcp-setup's proxy stores it (its test
connected to api.notion.com:443; the person had allowed 127.0.0.1:5432). Its card says where the
test connected and that it may reach the public internet, with "Allow only these" and the same
step for a terminal; pressing it holds the server to that list (stored, audited as the page),
the card says so and offers the way back, which a phone-sized page takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.page import NARROW, close_leaking_nothing, open_page
from tests.browser.redraws import scroll_to
from tests.browser.serve import start_serve, stop_serve
from tests.helpers.data_dir import STUB, DataDir

DESKTOP = {"width": 1280, "height": 800}
TESTED = "api.notion.com:443"


def test_a_card_says_where_the_test_connected_and_holds_the_server_to_it_in_one_step_and_back(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    data = DataDir(tmp_path)
    sid = data.install_tested(STUB, [TESTED], granted=("127.0.0.1:5432",), value=canary)
    served = start_serve(tmp_path, data.catalog, MCP_SETUP_DATA_KEY_FILE=str(data.key))
    try:
        context, page, watch = open_page(browser, served)
        page.set_viewport_size(DESKTOP)
        part = page.locator(f'li.server[data-server-id="{sid}"] .network-part')
        expect(part.locator(".net-tested")).to_have_text(f"During the test it connected to {TESTED}.")
        expect(part.locator(".net-policy")).to_have_text(
            "It may connect to the public internet, not to this computer or your local network."
        )
        expect(part.locator(".net-allowed")).to_have_text("You also allowed: 127.0.0.1:5432.")
        expect(part.locator(".net-terminal")).to_have_text(
            "Then anything else it tries is refused, and you are told with the one step that allows it. "
            "In a terminal: mcp-setup allow stub-search --only-tested"
        )
        only = part.get_by_role(
            "button", name="Allow Stub Search to connect only to what it connected to during its test"
        )
        expect(only).to_have_text("Allow only these")
        scroll_to(only)
        page.screenshot(path=str(artifacts / "44-network-1280.png"), full_page=True)
        only.click()

        expect(part).to_have_attribute("data-mode", "strict")
        expect(part.locator(".net-policy")).to_have_text(
            f"It may connect only to these: {TESTED}. Anything else it tries is refused, and you are told."
        )
        expect(part.locator(".net-allowed")).to_have_text("You also allowed: 127.0.0.1:5432.")
        expect(part.get_by_role("button", name="Let Stub Search connect to the public internet again")).to_have_text(
            "Back to the default: the public internet"
        )
        expect(part.locator(".net-terminal")).to_have_text(
            "In a terminal: mcp-setup allow stub-search --public-internet"
        )
        with data.store() as store:
            server = store.servers.get(sid)
            audited = [(r.event, r.actor) for r in store.audit.entries(server_id=sid)]
        assert server is not None and server.launch_spec["sandbox_net"]["mode"] == "strict"
        assert server.launch_spec["sandbox_net"]["only"] == [TESTED]
        assert audited[-1] == ("network", "user:web")
        page.screenshot(path=str(artifacts / "44-network-strict-1280.png"), full_page=True)

        page.set_viewport_size(NARROW)
        page.reload()
        expect(page.locator("#conn")).to_have_text("Connected")
        back = part.get_by_role("button", name="Let Stub Search connect to the public internet again")
        scroll_to(back)
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]  # nothing wider than a phone
        page.screenshot(path=str(artifacts / "44-network-390.png"), full_page=True)
        back.click()
        expect(part).to_have_attribute("data-mode", "default")
        expect(only).to_have_text("Allow only these")
        with data.store() as store:
            server = store.servers.get(sid)
        assert server is not None and server.launch_spec["sandbox_net"]["mode"] == "default"
        assert server.launch_spec["sandbox_net"]["granted"] == ["127.0.0.1:5432"]
        close_leaking_nothing(context, page, watch, canary)
    finally:
        code = stop_serve(served)
    assert code == 0, served.stderr()
