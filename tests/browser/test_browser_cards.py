"""Rough edges 4, 5 and 6 of #12 in Chromium: search cards say how a server runs, which keys it
asks for and whether this computer can run it (item 5); a success shows the tool list once,
under the server's title (item 6); a slow start shows the time spent, the deadline and the
server's last stderr line (item 4)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.page import open_page, shot
from tests.browser.serve import STUB, make_catalog, start_serve, stop_serve
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json


def _server_json(name: str, package: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": f"Card test server {name}.",
        "version": "1.0.0",
        "packages": [package],
    }


def _env(name: str, *, secret: bool) -> dict[str, Any]:
    return {"name": name, "description": name, "isRequired": True, "isSecret": secret}


def test_search_cards_show_the_package_type_the_keys_and_whether_it_runs_here(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    npm = {"registryType": "npm", "identifier": "@cards/npm-server", "version": "1.0.0", "transport": {"type": "stdio"}}
    nuget = {
        "registryType": "nuget",
        "identifier": "Cards.Nuget",
        "version": "1.0.0",
        "transport": {"type": "stdio"},
        "environmentVariables": [_env("CARDS_TOKEN", secret=True), _env("CARDS_REGION", secret=False)],
    }
    (catalog / "npm.json").write_text(json.dumps(_server_json("io.example.cards/npm-card", npm)))
    (catalog / "nuget.json").write_text(json.dumps(_server_json("io.example.cards/nuget-card", nuget)))
    # This computer has npx (a stand-in that is never run, with no node) and no dnx.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npx").write_text("#!/bin/sh\nexit 1\n")
    os.chmod(bin_dir / "npx", 0o755)
    served = start_serve(tmp_path, catalog, PATH=str(bin_dir))
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        page.get_by_text("Or browse the registries").click()
        search = page.get_by_label("Search for a server")
        search.fill("card")
        search.press("Enter")
        cards = page.locator("#search-results .result")
        nuget_card = cards.filter(has_text="io.example.cards/nuget-card")
        expect(nuget_card.locator("[data-fact=type]")).to_have_text(".NET package")
        expect(nuget_card.locator("[data-fact=keys]")).to_have_text("Needs 2 keys (1 secret)")
        expect(nuget_card.locator("[data-fact=runs]")).to_contain_text("Cannot run here yet: needs dnx")
        npm_card = cards.filter(has_text="io.example.cards/npm-card")
        expect(npm_card.locator("[data-fact=type]")).to_have_text("npm package")
        expect(npm_card.locator("[data-fact=keys]")).to_have_text("No keys needed")
        # the stand-in npx has no node to run it: the Node.js that comes with mcp-setup runs, and the card says so
        expect(npm_card.locator("[data-fact=runs]")).to_have_text(
            re.compile(r"^Runs on this computer with Node\.js [0-9.]+ \(comes with mcp-setup\)$")
        )
        shot(page, artifacts, "31-search-cards")

        search.fill("stub")
        search.press("Enter")
        stub_card = cards.filter(has_text="io.github.mcp-setup/stub")
        expect(stub_card.locator("[data-fact=type]")).to_have_text("MCPB bundle")
        expect(stub_card.locator("[data-fact=keys]")).to_have_text("Needs 1 key (1 secret)")
        expect(stub_card.locator("[data-fact=runs]")).to_have_text("Runs on this computer")
        assert not watch.page_errors and not watch.console_errors
        context.close()
    finally:
        assert stop_serve(served) == 0, served.stderr()


def _titled_catalog(tmp_path: Path, canary: str, title: str) -> Path:
    catalog = make_catalog(tmp_path, canary)
    doc = json.loads((catalog / "stub.json").read_text())
    doc["title"] = title
    (catalog / "stub.json").write_text(json.dumps(doc))
    return catalog


def _set_up_from_search(page: Any, canary: str) -> None:
    page.get_by_role("button", name="Add MCP server…").click()
    page.get_by_text("Or browse the registries").click()
    search = page.get_by_label("Search for a server")
    search.fill("stub")
    search.press("Enter")
    page.get_by_role("button", name=f"Set up {STUB}").click()
    dialog = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
    dialog.get_by_label("Your STUB_API_KEY").fill(canary)
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()


def test_after_a_success_the_tools_are_listed_once_under_the_servers_title(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, _titled_catalog(tmp_path, canary, "Stub Server"))
    try:
        context, page, watch = open_page(browser, served)
        _set_up_from_search(page, canary)
        card = page.locator(".result-card.installed")
        expect(card).to_contain_text("Installed and connected", timeout=scaled(60_000))
        expect(card.locator(".server-title")).to_have_text("Stub Server")
        expect(card.locator(".qualified-name")).to_have_text(STUB)
        # One list of tools in the whole thread, in the card; the test's steps only count them.
        thread = page.locator("#thread")
        expect(thread.locator(".tool-list")).to_have_count(1)
        expect(card.locator(".tool-list li")).to_have_count(2)
        expect(thread.get_by_text("echo", exact=True)).to_have_count(1)
        expect(thread.locator(".steps[data-action=mcp_setup_test_connection] .tools-found")).to_have_text(
            "Found 2 tools (listed below)."
        )
        expect(card).not_to_contain_text("Tools now available: echo")
        # The installed list leads with the title too, the qualified name under it.
        server = page.locator(".server", has_text=STUB)
        expect(server.locator(".server-name")).to_have_text("Stub Server")
        expect(server.locator(".qualified-name")).to_have_text(STUB)
        shot(page, artifacts, "32-tools-once-title")
        assert canary not in page.content()
        assert not watch.page_errors and not watch.console_errors
        context.close()
    finally:
        assert stop_serve(served) == 0, served.stderr()
    assert canary not in served.stderr()


def test_a_slow_start_shows_the_time_spent_the_deadline_and_the_servers_last_stderr_line_redacted(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    # The stub prints its environment (the key too) to stderr, then sleeps before it answers.
    bundle, sha = build_stub_bundle(
        tmp_path / "dist", expected_value=canary, mode="echo_env,slow", extra_env={"STUB_SLOW_SECONDS": "8"}
    )
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha)))
    served = start_serve(tmp_path, catalog)
    try:
        context, page, watch = open_page(browser, served)
        _set_up_from_search(page, canary)
        first = page.locator(".steps").first
        expect(first.locator("[data-stage=handshake]")).to_have_attribute("data-status", "started")
        clock = first.locator(".starting-watch .elapsed")
        expect(clock).to_have_text(re.compile(r"^Starting: \d+ s of at most 60 s$"))
        expect(clock).to_have_text(re.compile(r"^Starting: [1-9]\d* s of"))  # it moves
        says = first.locator(".server-says")
        expect(says).to_contain_text("The server says: stub: slow: sleeping")
        shot(page, artifacts, "33-slow-start")
        # Once it answers, the watch goes; the test's steps are done.
        expect(first.locator(".starting-watch")).to_have_count(0, timeout=scaled(60_000))
        expect(first.locator("[data-stage=tools_listed]")).to_have_attribute("data-status", "done")
        expect(page.locator(".result-card.installed")).to_be_visible(timeout=scaled(60_000))
        assert any('"stderr_line"' in frame for frame in watch.received)
        html = page.content()
        context.close()
        assert canary not in html
        for frame in watch.received + watch.sent:
            assert canary not in frame
        assert not watch.page_errors and not watch.console_errors
    finally:
        assert stop_serve(served) == 0, served.stderr()
    assert canary not in served.stderr()
