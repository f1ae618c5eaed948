"""The user's own channel from the stdio face when the client has none: the consent page opened
in the user's graphical browser (never a terminal browser: stdin and stdout are the MCP wire)."""

from __future__ import annotations

import logging
import os

__all__ = ["has_browser", "open_in_browser"]

logger = logging.getLogger("app.mcp.face")


def has_browser() -> bool:
    """Whether a graphical browser can be opened here (never a terminal browser: stdin and stdout
    are the MCP wire)."""
    import sys

    if sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return True
    logger.warning(
        "A consent request waits for the user: this client has no URL elicitation and there is no "
        "graphical browser to open the consent page in; `mcp-setup approve` in a terminal answers it"
    )
    return False


def open_in_browser(url: str) -> None:
    """Open ``url`` in the user's graphical browser (a page mcp-setup opens itself: a user channel)."""
    import threading
    import webbrowser

    def run() -> None:
        try:
            webbrowser.open(url)
        except Exception as exc:  # noqa: BLE001
            logger.info("could not open the consent page in a browser (%s)", type(exc).__name__)

    threading.Thread(target=run, daemon=True, name="mcp-setup-consent-browser").start()
