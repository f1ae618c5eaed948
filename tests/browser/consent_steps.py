"""Asking for the stub's consent on the page."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect


def _ask_for_the_stub(page: Any, key: str) -> Any:
    """The person starts a setup of the stub and types its key; returns the consent dialog."""
    page.get_by_role("button", name="Add MCP server…").click()
    goal = page.get_by_label("What do you want to set up?")
    goal.fill("set up the stub server")
    goal.press("Enter")
    secret = page.get_by_role("dialog", name=re.compile("Enter your STUB_API_KEY"))
    expect(secret).to_be_visible()
    secret.get_by_label("Your STUB_API_KEY").fill(key)
    secret.get_by_role("button", name="Save").click()
    return page.get_by_role("dialog", name=re.compile(r"Allow mcp-setup to test"))
