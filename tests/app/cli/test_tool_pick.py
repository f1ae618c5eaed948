"""The terminal's tool boxes (#29 item 10): which numbers a person may type to untick tools."""

from __future__ import annotations

import io

from app.cli.tool_pick import parse_picks, pick_hidden
from setup_agent.setup.consent_request import ConsentRequest


def test_numbers_and_ranges_pick_tools_and_anything_else_is_asked_again() -> None:
    assert parse_picks("", 3) == set() and parse_picks(" 2 ", 3) == {2} and parse_picks("1-2,3", 3) == {1, 2, 3}
    for bad in ("0", "4", "2-1", "x", "1-4", "-1", "1.5"):
        assert parse_picks(bad, 3) is None, bad


def test_unticking_every_tool_is_allowed_and_said_plainly() -> None:
    request = ConsentRequest.from_public(
        {
            "server": "s",
            "version": None,
            "action": "install",
            "package_type": "npm",
            "package": "p",
            "runner": None,
            "sha256": None,
            "transport": "stdio",
            "command_line": [],
            "url": None,
            "env": {},
            "headers": {},
            "secrets": [],
            "destinations": [],
            "tools": [{"name": "a"}, {"name": "b\x1b[2J"}],
        }
    )
    answers = iter(["9", "1-2"])
    out = io.StringIO()
    assert pick_hidden(request, lambda _q: next(answers), out) == ["a", "b\x1b[2J"]
    assert "Type numbers from 1 to 2" in out.getvalue() and "You unticked all 2 tools" in out.getvalue()
    assert "\x1b" not in out.getvalue()
