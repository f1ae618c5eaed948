"""Where the context budget comes from (the environment's, else the page's, else the default) and
where it stands, in the words the page and the consent show."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from setup_agent.gateway import (
    Budget,
    ToolsBudget,
    adds_words,
    estimated_tokens,
    parse_budget,
    source_words,
    standing_of,
    within_budget,
)
from setup_agent.secrets.vault import Vault
from setup_agent.store import TOOLS_BUDGET, Catalog
from setup_agent.store.catalog import CatalogServer
from setup_agent.store.database import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.for_data_dir(tmp_path / "data", Vault.in_memory())
    yield s
    s.close()


def test_without_a_saved_value_or_the_environment_the_default_is_the_budget(store: Store) -> None:
    budget = ToolsBudget(store.preferences, default=8000)
    assert budget.reload() is False
    assert budget.current == Budget(8000, "default")


def test_the_value_saved_on_the_page_replaces_the_default_in_every_process(store: Store) -> None:
    here, elsewhere = ToolsBudget(store.preferences, default=8000), ToolsBudget(store.preferences, default=8000)
    assert here.save(5000, actor="user:web") == Budget(5000, "saved")
    assert elsewhere.reload() is True and elsewhere.current == Budget(5000, "saved")
    assert elsewhere.reload() is False  # nothing moved since


def test_the_environment_decides_for_its_process_whatever_the_page_saved(store: Store) -> None:
    store.preferences.set(TOOLS_BUDGET, "5000", actor="user:web")
    budget = ToolsBudget(store.preferences, default=8000, override=2000)
    assert budget.reload() is False
    assert budget.current == Budget(2000, "environment")
    budget.save(3000, actor="user:web")  # kept for the processes without it
    assert budget.current == Budget(2000, "environment")
    assert store.preferences.get(TOOLS_BUDGET) == "3000"


def test_a_saved_value_that_is_not_a_budget_is_read_as_none() -> None:
    assert parse_budget("6000") == 6000 and parse_budget(" 0 ") == 0
    assert parse_budget("lots") is None and parse_budget("-1") is None and parse_budget(None) is None


def tools(count: int, words: int = 30) -> tuple[dict[str, object], ...]:
    return tuple(
        {"name": f"t{i}", "description": " ".join(["word"] * words), "inputSchema": {"type": "object"}}
        for i in range(count)
    )


CATALOG = Catalog.build([CatalogServer("srv_a", "io.test/a", "a", "Server A", True, tools(40))])


def test_under_the_budget_the_page_says_every_tool_is_listed() -> None:
    standing = standing_of(CATALOG, 2000, Budget(1_000_000, "default"), [])
    assert standing.unlisted_tools == 0 and standing.listed_tools == 40
    assert standing.listed_tokens == standing.total_tokens
    assert standing.words() == (
        f"Tool definitions listed to AI clients: {standing.listed_tokens:,} of 1,000,000 tokens; "
        "every installed tool is listed"
    )


def test_past_the_budget_the_page_says_how_many_tools_are_left_to_find_tools() -> None:
    standing = standing_of(CATALOG, 2000, Budget(2500, "saved"), ["a__t3", "a__t5"])
    assert 2 < standing.listed_tools < 40  # the recent two, and as many more as the room left takes
    assert standing.listed_tools + standing.unlisted_tools == 40
    listing = within_budget(CATALOG, 2000, 2500, ["a__t3", "a__t5"])
    assert standing.listed_tokens == 2000 + estimated_tokens(listing.tools) + listing.note_tokens()  # the note too
    assert standing.listed_tokens <= 2500 < standing.total_tokens
    assert standing.words() == (
        f"Tool definitions listed to AI clients: {standing.listed_tokens:,} of 2,500 tokens; "
        f"{standing.unlisted_tools} tools reachable through mcp_setup_find_tools"
    )
    assert standing.public()["source"] == "saved"


def test_with_no_budget_the_page_says_everything_is_listed() -> None:
    standing = standing_of(CATALOG, 2000, Budget(0, "environment"), [])
    assert standing.words().endswith("tokens (no budget: every installed tool is listed)")


def test_in_discover_mode_only_mcp_setups_own_tools_are_listed() -> None:
    standing = standing_of(CATALOG, 2000, Budget(8000, "default"), [], discover=True)
    assert (standing.listed_tokens, standing.listed_tools, standing.unlisted_tools) == (2000, 0, 40)


def test_the_consent_says_what_a_server_adds_and_where_that_leaves_the_budget() -> None:
    assert adds_words(1200, 4900, 8000) == (
        "Its tools add about 1,200 tokens to what your AI clients are listed: 6,100 of your budget of 8,000 tokens."
    )
    past = adds_words(1200, 7500, 8000)
    assert past.startswith("Its tools add about 1,200 tokens to what your AI clients are listed: 8,700 of your ")
    assert "Past the budget" in past and "mcp_setup_find_tools" in past
    assert "then, as room is left, the others by server in the order the servers were installed" in past
    assert adds_words(1200, 7500, 0) == (
        "Its tools add about 1,200 tokens to what your AI clients are listed (no budget is set: every tool is listed)."
    )


def test_after_a_sentence_that_said_what_it_adds_the_consent_says_only_where_that_leaves_the_budget() -> None:
    assert (
        adds_words(1200, 4900, 8000, lead=False)
        == "With them, AI clients are listed 6,100 of your budget of 8,000 tokens."
    )
    assert adds_words(1200, 4900, 0, lead=False) == "No budget is set: every tool is listed."


def test_the_page_says_where_the_budget_comes_from_and_what_wins() -> None:
    assert source_words(Budget(2000, "environment"), 8000).startswith(
        "MCP_SETUP_TOOLS_BUDGET sets it for this mcp-setup (2,000 tokens) and wins over the value saved here"
    )
    assert source_words(Budget(5000, "saved"), 8000).startswith("You saved it here;")
    assert source_words(Budget(8000, "default"), 8000).startswith("The default (8,000 tokens).")
