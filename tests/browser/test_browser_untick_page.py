"""Unticking a tool on the one-time consent page (#29 item 10), in Debian's Chromium at 1280 and
390×844, as an MCP client's user: ``mcp-setup mcp`` shows its consents by URL elicitation; the
person approves the test on the page, then, on the install's page, unticks ``whoami`` and
approves. The same client's ``tools/list`` then lacks ``stub__whoami`` and its call is refused
with ``tool_left_out``. (Playwright's async API: the MCP client's callback runs in this loop.)
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
        tools = tab.locator("#tools")
        if self.consents == 1:  # the test's consent: nothing ran yet, nothing to choose
            await expect(tools).to_have_count(0)
        else:
            whoami = tab.get_by_role("checkbox", name="whoami")
            await expect(tab.get_by_role("checkbox", name="echo")).to_be_checked()
            await expect(whoami).to_be_checked()
            await expect(tab.locator("main")).to_contain_text("Its 2 tools add about")
            await expect(tab.locator("main code", has_text="--tool")).to_have_text(
                "mcp-setup enable io.github.mcp-setup/stub --tool TOOL"
            )  # this server's name, not a placeholder
            await whoami.uncheck()
            await scroll_to_async(tools)
            await tab.screenshot(path=str(self.artifacts / "29-untick-page-1280.png"))
            await tab.set_viewport_size(PHONE)
            await scroll_to_async(tools)
            await tab.screenshot(path=str(self.artifacts / "29-untick-page-390x844.png"))
            assert await tab.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        await tab.get_by_role("button", name="Approve").click()
        await expect(tab.locator("h1")).to_have_text("Approved")
        await tab.close()
        return types.ElicitResult(action="accept")


async def test_a_person_unticks_a_tool_on_the_consent_page_and_the_client_neither_lists_nor_runs_it(
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
                    assert installed["status"] == "connected" and installed["left_out_by_user"] == ["whoami"], installed
                    assert "The user left out the tools in left_out_by_user" in installed["use_now"]
                    names = {t.name for t in (await client.list_tools()).tools}
                    assert "stub__echo" in names and "stub__whoami" not in names, names
                    refused = await client.call_tool("stub__whoami", {})
                    assert refused.is_error and refused.structured_content["error"]["code"] == "tool_left_out", refused
        finally:
            await chromium.close()
    assert person.consents == 2 and person.page_errors == []
    assert canary not in recorder.text()
