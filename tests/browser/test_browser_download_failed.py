"""A setup in the page with the package registry unreachable: the download row fails at once with
the package, the registry and why; Try again, once the registry answers, installs it.

``mcp-setup serve`` (a subprocess) with a local catalog whose npm entry names a registry on a
closed loopback port; a real ``npx``. Then a one-package npm registry (tests/fakes/npm_registry.py)
starts on that port and the person presses Try again.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.page import close_leaking_nothing, open_page, shot
from tests.browser.serve import start_serve, stop_serve
from tests.fakes import closed_port_url
from tests.fakes.npm_registry import serve_npm_package
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.timeouts import scaled

NAME = "io.test/npm-offline"
PACKAGE = "mcp-setup-npm-offline"

pytestmark = pytest.mark.skipif(shutil.which("npx") is None, reason="needs Node's npx")


def enter_key(page: Any, value: str) -> None:
    dialog = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
    expect(dialog).to_be_visible(timeout=scaled(30_000))
    dialog.get_by_label("Your STUB_API_KEY").fill(value)
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_be_hidden()


def test_a_download_from_an_unreachable_registry_fails_at_once_and_try_again_installs_it_once_it_answers(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    registry = closed_port_url()
    write_catalog_entry(
        tmp_path / "catalog",
        NAME,
        "The stub server as an npm package, from a registry that is not answering yet.",
        {"registryType": "npm", "registryBaseUrl": registry, "identifier": PACKAGE},
    )
    served = start_serve(tmp_path, tmp_path / "catalog")
    try:
        context, page, watch = open_page(browser, served)
        page.get_by_role("button", name="Add MCP server…").click()
        goal = page.get_by_label("What do you want to set up?")
        goal.fill(f"set up {NAME}")
        goal.press("Enter")
        enter_key(page, canary)

        problem = page.locator(".steps .problem")
        expect(problem).to_contain_text(
            f"Could not download {PACKAGE}@1.0.0 from {registry}: nothing answers there (connection refused).",
            timeout=scaled(15_000),
        )
        steps = page.locator(".steps").first
        expect(steps.locator("[data-stage=downloading]")).to_have_attribute("data-status", "failed")
        expect(steps.locator("[data-stage=starting]")).to_have_attribute("data-status", "pending")
        expect(page.locator(".result-card")).to_contain_text("Setup did not finish")
        try_again = problem.get_by_role("button", name="Try again")
        expect(try_again).to_be_visible()
        shot(page, artifacts, "42-download-failed", full_page=False)

        with serve_npm_package(PACKAGE, "1.0.0", port=int(registry.rsplit(":", 1)[1])) as answering:
            try_again.click()
            enter_key(page, canary)
            done = page.locator(".result-card.installed")
            expect(done).to_contain_text("Installed and connected", timeout=scaled(120_000))
        assert len(answering.tarball_requests) == 1
        assert canary not in page.content()
        close_leaking_nothing(context, page, watch, canary)
    finally:
        stop_serve(served)
