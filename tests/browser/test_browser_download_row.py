"""#25 item 5: the download row of a test has its icon and a counter (seconds, packages) while
a first npx fetch runs, as the start row has. The page's own progress module is fed the core's
events (the same frames the websocket carries: an npx fetch takes 20+ s and the network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.page import close_leaking_nothing, open_page, shot
from tests.browser.serve import make_catalog, start_serve, stop_serve

FEED = """async (events) => {
  const progress = await import("/static/progress.js");
  for (const e of events) progress.onProgress(e);
}"""


def event(stage: str, status: str, **more: Any) -> dict[str, Any]:
    return {
        "type": "progress",
        "action": "mcp_setup_test_connection",
        "server": "io.example/npx-server",
        "stage": stage,
        "status": status,
        **more,
    }


def test_the_download_row_shows_its_icon_and_counts_seconds_and_packages(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    served = start_serve(tmp_path, make_catalog(tmp_path, canary))
    try:
        context, page, watch = open_page(browser, served)
        page.evaluate(
            "document.getElementById('setup').hidden = false; document.getElementById('thread-area').hidden = false"
        )
        page.evaluate(
            FEED,
            [
                event("resolving", "started"),
                event("resolving", "done"),
                event("downloading", "started"),
                event("downloading", "progress", elapsed_seconds=12.4, fetched=3),
            ],
        )
        row = page.locator(".steps [data-stage=downloading]")
        expect(row).to_have_attribute("data-status", "started")
        expect(row.locator(".icon")).to_have_text("…")
        expect(row).to_contain_text("Download its bundle")
        expect(row.locator(".counter")).to_have_text(" · 12 s, 3 packages so far")
        expect(page.locator(".steps [data-stage=resolving] .icon")).to_have_text("✓")
        shot(page, artifacts, "25-download-row", full_page=False)
        page.evaluate(
            FEED,
            [
                event("downloading", "progress", elapsed_seconds=21.0, fetched=7),
                event("downloading", "done", fetched=9, ok=True),
            ],
        )
        expect(row.locator(".icon")).to_have_text("✓")
        expect(row.locator(".counter")).to_have_text(" · 9 packages")
        close_leaking_nothing(context, page, watch, canary)
    finally:
        stop_serve(served)


def test_a_package_npm_does_not_have_is_drawn_as_a_failed_download_that_names_it(
    browser: Any, artifacts: Path, tmp_path: Path, canary: str
) -> None:
    """#25 item 4: the events the core sends for npx's E404 (tests/setup_agent/launch/test_download_phase.py) draw the
    download row ✗, no row after it done, and the sentence says what npm answered."""
    served = start_serve(tmp_path, make_catalog(tmp_path, canary))
    try:
        context, page, watch = open_page(browser, served)
        page.evaluate(
            "document.getElementById('setup').hidden = false; document.getElementById('thread-area').hidden = false"
        )
        page.evaluate(
            FEED,
            [
                event("resolving", "started"),
                event("resolving", "done"),
                event("downloading", "started"),
                event("downloading", "done", fetched=0, ok=False),
                event("starting", "started", deadline_seconds=60.0),
                event("starting", "output", stderr_line="npm error code E404"),
                event(
                    "downloading",
                    "failed",
                    code="exited",
                    reason="npm has no package mcp-setup-nope",
                    message="The server exited with code 1 before listing its tools.",
                ),
            ],
        )
        row = page.locator(".steps [data-stage=downloading]")
        expect(row).to_have_attribute("data-status", "failed")
        expect(row.locator(".icon")).to_have_text("✗")
        expect(page.locator(".steps [data-stage=starting]")).to_have_attribute("data-status", "pending")
        problem = page.locator(".steps .problem")
        expect(problem).to_contain_text("It could not be downloaded: npm has no package mcp-setup-nope.")
        expect(problem).not_to_contain_text("stopped right after it started")
        expect(page.locator(".starting-watch")).to_have_count(0)
        shot(page, artifacts, "25-download-404", full_page=False)
        close_leaking_nothing(context, page, watch, canary)
    finally:
        stop_serve(served)
