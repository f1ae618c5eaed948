"""``tools_budget.get`` / ``tools_budget.set`` of ``mcp-setup serve`` (a real subprocess): where the
context budget stands, in numbers and words; the person's value saved for every mcp-setup on the
data folder, so an AI client's ``mcp-setup mcp`` that is already connected hears one tool-list
change; a value that is not a budget refused in our words."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.store import SQLITE_FILE_NAME, TOOLS_BUDGET, read_sqlite_preference
from tests.browser.serve import Served, serving
from tests.helpers.gateway import ListChanges
from tests.helpers.mcp_face import Recorder, mcp_setup_client
from tests.helpers.timeouts import scaled

CANARY = "canary-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("budget-rpc"), CANARY) as s:
        yield s


def test_the_budget_stands_at_the_default_with_only_mcp_setups_own_tools_listed(served: Served) -> None:
    result = served.rpc("tools_budget.get")["result"]
    assert (result["budget"], result["source"], result["default"]) == (8000, "default", 8000)
    assert result["listed_tokens"] == result["total_tokens"] > 0 and result["unlisted_tools"] == 0
    assert result["words"] == (
        f"Tool definitions listed to AI clients: {result['listed_tokens']:,} of 8,000 tokens; every installed tool is listed"
    )
    assert result["source_words"].startswith("The default (8,000 tokens). Save your own here;")


@pytest.mark.parametrize(
    "params",
    [{"tokens": -1}, {"tokens": 1_000_001}, {"tokens": "5000"}, {"tokens": True}, {}, {"tokens": 5, "for": "me"}],
)
def test_a_value_that_is_not_a_budget_is_refused_in_words(served: Served, params: dict[str, Any]) -> None:
    before = served.rpc("tools_budget.get")["result"]
    error = served.rpc("tools_budget.set", params)["error"]
    assert error["code"] == -32602 and error["data"]["code"] == "invalid_input"
    assert "tokens" in error["data"]["message"]
    assert served.rpc("tools_budget.get")["result"] == before  # nothing saved


def test_a_saved_budget_is_used_by_every_mcp_setup_and_a_connected_client_hears_one_list_change(
    served: Served, tmp_path: Path
) -> None:
    changes = ListChanges()

    async def client_hears_it() -> None:
        async with mcp_setup_client(
            served.root, tmp_path / "mcp.log", Recorder(), env=served.env, message_handler=changes
        ) as client:
            with anyio.fail_after(scaled(60)):
                await client.list_tools()
                result = await anyio.to_thread.run_sync(lambda: served.rpc("tools_budget.set", {"tokens": 5000}))
                assert (result["result"]["budget"], result["result"]["source"]) == (5000, "saved")
                await changes.wait()

    anyio.run(client_hears_it)
    assert changes.count == 1
    db = Path(served.env["MCP_SETUP_HOME"]) / SQLITE_FILE_NAME
    assert read_sqlite_preference(db, TOOLS_BUDGET) == "5000"
    result = served.rpc("tools_budget.get")["result"]
    assert (
        result["words"].startswith("Tool definitions listed to AI clients: ") and "of 5,000 tokens" in result["words"]
    )
    assert result["source_words"].startswith("You saved it here;")
    assert served.rpc("tools_budget.set", {"tokens": 8000})["result"]["source"] == "saved"
