"""Opening the page in headless Chromium, screenshots, and closing it with nothing leaked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.serve import Served
from tests.helpers.timeouts import scaled

WIDE = {"width": 1280, "height": 900}


NARROW = {"width": 390, "height": 844}


STEP_TIMEOUT = scaled(30_000)


class PageWatch:
    """Every websocket frame the page receives and sends, console errors (CSP violations) and JS errors."""

    def __init__(self, page: Page) -> None:
        self.received: list[str] = []
        self.sent: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        page.on("websocket", self._on_websocket)
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))

    def _on_websocket(self, ws: Any) -> None:
        ws.on("framereceived", lambda payload: self.received.append(_text(payload)))
        ws.on("framesent", lambda payload: self.sent.append(_text(payload)))


def _text(payload: Any) -> str:
    return payload.decode("utf-8", "replace") if isinstance(payload, (bytes, bytearray)) else str(payload)


def open_page(browser: Any, served: Served) -> tuple[Any, Page, PageWatch]:
    context = browser.new_context(viewport=WIDE, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(STEP_TIMEOUT)
    page = context.new_page()
    watch = PageWatch(page)
    page.goto(served.url)
    expect(page).to_have_url(f"{served.base}/")  # the token left the address bar
    expect(page.locator("#conn")).to_have_text("Connected")
    return context, page, watch


def shot(page: Page, artifacts: Path, name: str, *, narrow: bool = False, full_page: bool = True) -> None:
    if narrow:
        page.set_viewport_size(NARROW)
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=full_page)
    if narrow:
        page.set_viewport_size(WIDE)


def close_leaking_nothing(context: Any, page: Page, watch: PageWatch, *secrets: str) -> list[str]:
    """Close the page; no secret in its last HTML or in any websocket frame, no page or console
    error (CSP violations included). Returns the frames received, for more checks."""
    html = page.content()
    context.close()
    for secret in secrets:
        assert secret not in html
        for frame in watch.received + watch.sent:
            assert secret not in frame
    assert watch.page_errors == []
    assert watch.console_errors == []  # includes CSP violations
    return watch.received
