"""End to end with Chromium: oauth_required, mcp_setup_authorize, the user presses Authorize on
the sign-in page, install, a tool call, a renewal after the token expires, and needs_sign_in once
the refresh token is revoked."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from setup_agent.setup.service import CallContext
from tests.browser.conftest import CHROMIUM_ARGS, _chromium
from tests.fakes.oauth_server import OAuthPair, serve_oauth_pair
from tests.helpers.oauth_runtime import NAME, oauth_runtime
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


@pytest.fixture
async def runtime(tmp_path: Path, pair: OAuthPair, memory_keyring) -> AsyncIterator[Runtime]:
    async with oauth_runtime(tmp_path, pair, memory_keyring, sign_in_timeout=scaled(30)) as rt:
        yield rt


@pytest.fixture
async def chromium(tmp_path: Path) -> AsyncIterator[Any]:
    executable = _chromium()
    from playwright.async_api import async_playwright

    home = tmp_path / "chromium-home"
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": os.environ.get("PATH", ""),
        "LANG": "en_US.UTF-8",
        "TZ": "UTC",
    }
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=str(executable), args=CHROMIUM_ARGS, env=env, timeout=scaled(30_000)
        )
        try:
            yield browser
        finally:
            await browser.close()


async def test_the_user_signs_in_in_chromium_and_the_server_installs_renews_and_then_needs_sign_in(
    runtime: Runtime, pair: OAuthPair, chromium: Any
) -> None:
    async def call(tool: str, ctx: CallContext | None = None, **args: Any) -> dict[str, Any]:
        return await runtime.service.call(tool, args, ctx or CallContext())

    first = await call("mcp_setup_test_connection", qualified_name=NAME)
    assert first["error"]["code"] == "oauth_required"

    page = await chromium.new_page()
    landed: list[str] = []

    async def sign_in(url: str) -> None:
        await page.goto(url)
        await page.get_by_role("button", name="Authorize").click()
        await page.wait_for_selector("text=Signed in", timeout=scaled(20_000))
        landed.append(await page.inner_text("h1"))

    clicked: list[asyncio.Task[None]] = []

    async def present(info: dict[str, Any]) -> dict[str, Any]:
        clicked.append(asyncio.create_task(sign_in(info["url"])))
        return {"status": "shown"}

    out = await call("mcp_setup_authorize", CallContext(present_authorization=present), qualified_name=NAME)
    assert out["status"] == "authorized", out
    await asyncio.wait_for(clicked[0], scaled(30))
    assert landed == ["Signed in"]

    installed = await call("mcp_setup_install_and_connect", qualified_name=NAME, oauth_ref=out["ref"])
    assert installed["status"] == "connected", installed
    server_id = installed["server_id"]
    echoed = await runtime.connections.call_tool(server_id, "echo", {"text": "hello"})
    assert echoed["content"][0]["text"] == "hello"

    pair.provider.expire_access_tokens()  # the server now answers 401: renewed, then answered
    echoed = await runtime.connections.call_tool(server_id, "echo", {"text": "again"})
    assert echoed["content"][0]["text"] == "again" and pair.provider.refreshes == 1

    pair.provider.revoke_refresh_tokens()
    pair.provider.expire_access_tokens()
    with pytest.raises(Exception):
        await runtime.connections.call_tool(server_id, "echo", {"text": "no"})
    await runtime.connections.wait_for_status(server_id, "needs_sign_in", timeout=scaled(10))
    listed = await call("mcp_setup_list_servers")
    (server,) = listed["servers"]
    assert server["status"] == "needs_sign_in" and "sign in again" in server["reason"]
