"""Acting on parts of the page that the page may redraw under the test.

The server list is re-rendered when the service reports a change (a status, a log line), so an
element found a moment ago can be replaced by an equal one. Playwright retries most actions on a
replaced element, but not ``scroll_into_view_if_needed`` nor an element's ``screenshot``, which
fail with "Element is not attached to the DOM". These helpers act again, on the element that is
there now, until the test's bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from playwright.async_api import Locator as AsyncLocator
from playwright.sync_api import Error, Locator

from tests.helpers.timeouts import scaled

__all__ = ["scroll_to", "scroll_to_async", "shot_of"]


def _replaced(exc: Error) -> bool:
    return "not attached" in str(exc)


def _again_when_replaced(act: Callable[[float], None], seconds: float) -> None:
    """``act(timeout_ms)``, again on the element there now while the page replaces it, until the bound."""
    deadline = time.monotonic() + scaled(seconds)
    while True:
        try:
            act(scaled(seconds) * 1000)
            return
        except Error as exc:
            if not _replaced(exc) or time.monotonic() > deadline:
                raise


def scroll_to(locator: Locator, *, seconds: float = 15.0) -> None:
    """Scroll ``locator`` into view, again when the page replaced it meanwhile."""
    _again_when_replaced(lambda ms: locator.scroll_into_view_if_needed(timeout=ms), seconds)


def shot_of(locator: Locator, path: str, *, seconds: float = 15.0) -> None:
    """A screenshot of ``locator``, taken again when the page replaced it meanwhile."""
    _again_when_replaced(lambda ms: locator.screenshot(path=path, timeout=ms), seconds)


async def scroll_to_async(locator: AsyncLocator, *, seconds: float = 15.0) -> None:
    """:func:`scroll_to` for the async API."""
    deadline = time.monotonic() + scaled(seconds)
    while True:
        try:
            await locator.scroll_into_view_if_needed(timeout=scaled(seconds) * 1000)
            return
        except Error as exc:
            if not _replaced(exc) or time.monotonic() > deadline:
                raise
