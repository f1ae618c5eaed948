"""One approval per install on the one-time consent page, in Debian's Chromium at 1280 and
390×844, as an MCP client's user: ``mcp-setup mcp`` shows its consent by URL elicitation (a client
with a page); the person approves the test once on the page, which says it covers the install,
and the install follows the passing test with every tool it listed, with no second page. (A tool
is left out afterwards on the server's card: tests/browser/test_browser_untick.py.) Playwright's
async API: the MCP client's callback runs in this loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from playwright.async_api import async_playwright, expect

from tests.browser.conftest import CHROMIUM_ARGS, _chromium
from tests.browser.redraws import scroll_to_async
from tests.browser.serve import STUB, make_catalog
from tests.helpers.mcp_face import Browser, Recorder, call, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

PHONE = {"width": 390, "height": 844}


class Person:
    """Types the key on the secret page (plain HTTP) and answers consent pages in Chromium."""

    def __init__(self, chromium: Any, secret: str, artifacts: Path) -> None:
        self.chromium, self.secret, self.artifacts = chromium, secret, artifacts
        self.consents = 0
        self.page_errors: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        if "/secrets/consents/" not in params.url:
            answer = await Browser().submit(params.url, self.secret)
            assert answer.status_code == 200, answer.text
            return types.ElicitResult(action="accept")
        self.consents += 1
        tab = await self.chromium.new_page(viewport={"width": 1280, "height": 900})
        tab.on("pageerror", lambda e: self.page_errors.append(str(e)))
        tab.on("console", lambda m: self.page_errors.append(m.text) if m.type == "error" else None)
        await tab.goto(params.url)
        await expect(tab.locator("#tools")).to_have_count(0)  # the test's consent: nothing ran yet
        main = tab.locator("main")
        await expect(main).to_contain_text("no second question")  # it covers the install
        await tab.screenshot(path=str(self.artifacts / "42-one-consent-page-1280.png"))
        await tab.set_viewport_size(PHONE)
        await scroll_to_async(tab.get_by_role("button", name="Approve"))
        await tab.screenshot(path=str(self.artifacts / "42-one-consent-page-390x844.png"))
        assert await tab.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        await tab.get_by_role("button", name="Approve").click()
        await expect(tab.locator("h1")).to_have_text("Approved")
        await tab.close()
        return types.ElicitResult(action="accept")


async def test_a_client_with_a_page_gets_one_consent_page_for_the_test_and_the_install_with_every_tool(
    tmp_path: Path, canary: str, artifacts: Path
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask")
    recorder = Recorder()
    async with async_playwright() as p:
        chromium = await p.chromium.launch(
            executable_path=str(_chromium()), args=CHROMIUM_ARGS, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        )
        person = Person(chromium, canary, artifacts)
        try:
            with anyio.fail_after(scaled(120)):
                async with mcp_setup_client(
                    tmp_path, tmp_path / "stderr.log", recorder, env=env, elicitation_callback=person
                ) as client:
                    secret = await call(
                        client,
                        "mcp_setup_request_secret",
                        {"key_name": "STUB_API_KEY", "prompt": "Key", "server": STUB},
                    )
                    args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": secret["ref"]}}
                    assert (await call(client, "mcp_setup_test_connection", args)).get("ok") is True
                    installed = await call(client, "mcp_setup_install_and_connect", args)
                    assert installed["status"] == "connected" and "left_out_by_user" not in installed, installed
                    assert [t["name"] for t in installed["tools"]] == ["echo", "whoami"]
                    names = {t.name for t in (await client.list_tools()).tools}
                    assert {"stub__echo", "stub__whoami"} <= names, names
        finally:
            await chromium.close()
    assert person.consents == 1 and person.page_errors == []
    assert canary not in recorder.text()
