"""The web page's sign-in box, in Chromium against ``mcp-setup serve`` (a subprocess) and the fake
OAuth pair: a person asks for the notes server, the guided run meets ``oauth_required`` (the
progress block says sign-in is needed, not that it failed, and opens the box again after "Not
now"), the box names the sign-in service's host and the scopes, its link opens the sign-in page where the person
presses Authorize, and the install completes. Then the refresh token is revoked: Reconnect shows
"Sign-in expired" with the way to sign in again. No token is in any websocket frame (a live
socket, #15 canary), the page, the log or the data dir in clear."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.page import open_page, shot
from tests.browser.serve import start_serve, stop_serve
from tests.fakes.oauth_server import OAuthPair, remote_server_json, serve_oauth_pair
from tests.helpers.timeouts import scaled

NAME = "io.test/notes"


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


def test_a_person_signs_in_through_the_sign_in_box_and_the_server_installs_then_needs_sign_in(
    browser: Any, artifacts: Path, tmp_path: Path, pair: OAuthPair
) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
    served = start_serve(tmp_path, catalog)
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        goal = page.get_by_label("What do you want to set up?")
        goal.fill("set up the notes server")
        goal.press("Enter")

        box = page.locator("#oauth-dialog")
        expect(box.locator("#oauth-title")).to_have_text(f"Sign in to {NAME}", timeout=scaled(60_000))
        expect(box).to_be_visible(timeout=scaled(60_000))
        host = urlsplit(pair.issuer).netloc
        expect(box.locator("#oauth-host")).to_have_text(host)
        expect(box.locator("#oauth-scopes")).to_have_text("notes:read")
        link = box.get_by_role("link", name=f"Sign in at {host}")
        expect(link).to_be_focused()
        shot(page, artifacts, "oauth-01-sign-in-box", full_page=False)

        box.get_by_role("button", name="Not now").click()
        expect(box).to_be_hidden()
        card = page.locator(".steps").first
        expect(card.locator(".sign-in-needed")).to_contain_text(f"Sign-in needed. {NAME} asks you to sign in")
        assert card.locator(".problem").count() == 0  # not "It did not work"
        expect(card).not_to_contain_text("mcp_setup_authorize")  # the agent-facing message stays with the agent
        shot(page, artifacts, "oauth-01b-sign-in-needed")
        card.get_by_role("button", name="Open the sign-in box").click()
        expect(box).to_be_visible()
        expect(link).to_be_focused()
        with context.expect_page() as opened:
            link.click()
        sign_in = opened.value
        expect(box).to_be_hidden()
        expect(sign_in.locator("#scopes")).to_have_text("notes:read")
        sign_in.get_by_role("button", name="Authorize").click()
        expect(sign_in.get_by_role("heading", name="Signed in")).to_be_visible()
        sign_in.close()

        done = page.locator(".result-card.installed")
        expect(done).to_contain_text("Installed and connected", timeout=scaled(60_000))
        server = page.locator(".server", has_text=NAME)
        expect(server.locator(".badge")).to_have_text("Connected")
        assert pair.provider.issued_access

        pair.provider.revoke_refresh_tokens()
        pair.provider.expire_access_tokens()
        server.get_by_role("button", name=f"Reconnect {NAME}").click()
        expect(server.locator(".badge")).to_have_text("Sign-in expired", timeout=scaled(30_000))
        expect(server.locator(".sign-in-again")).to_contain_text("Sign in again: remove it, then add it again")
        shot(page, artifacts, "oauth-02-needs-sign-in")
        html = page.content()
        context.close()
    finally:
        code = stop_serve(served)
    log = served.stderr()
    assert code == 0, log
    assert f"needs sign-in: The sign-in to {NAME} no longer works" in log
    tokens = pair.provider.issued_access + pair.provider.issued_refresh
    assert watch.received and any('"oauth_request"' in f for f in watch.received)
    data = b"".join(p.read_bytes() for p in Path(served.env["MCP_SETUP_HOME"]).rglob("*") if p.is_file())
    for token in tokens:
        assert token not in html and token not in log
        assert not any(token in frame for frame in watch.received + watch.sent)
        assert token.encode() not in data
