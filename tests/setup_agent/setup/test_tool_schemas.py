"""What every face lists for the ``mcp_setup_*`` tools stays what agents were given: names, order,
titles, descriptions, annotations and input schemas (properties, types, bounds, defaults,
descriptions, required keys) equal the snapshot in ``tests/fixtures/tool_schemas.json``, taken from
the hand-written schemas before they were generated from the tools' argument models."""

from __future__ import annotations

import json
from typing import Any

import pytest

from setup_agent.setup.tool_specs import TOOL_NAMES, TOOL_SPECS
from tests.helpers.paths import FIXTURES

SNAPSHOT: list[dict[str, Any]] = json.loads((FIXTURES / "tool_schemas.json").read_text(encoding="utf-8"))


def test_the_tools_are_the_snapshots_in_its_order() -> None:
    assert list(TOOL_NAMES) == [s["name"] for s in SNAPSHOT]


@pytest.mark.parametrize("expected", SNAPSHOT, ids=[s["name"] for s in SNAPSHOT])
def test_each_tool_is_listed_exactly_as_the_snapshot_says(expected: dict[str, Any]) -> None:
    listed = json.loads(json.dumps(next(s for s in TOOL_SPECS if s["name"] == expected["name"])))
    assert listed == expected
    # Required keys in the same order too: JSON equality above ignores only key order in objects.
    assert listed["inputSchema"].get("required") == expected["inputSchema"].get("required")
