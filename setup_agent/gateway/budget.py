"""Where the context budget comes from, and where it stands, in a person's words.

The budget (tokens of tool definitions ``tools/list`` may take; see :mod:`.discover`) is, in this
order: ``MCP_SETUP_TOOLS_BUDGET`` when it is set for the process (a client's config entry may set
it for that client alone: an explicit setting wins, as environment variables do); else the value
the person saved on the page (``mcp_preferences``, shared by every process on the store); else the
default (8,000). :class:`ToolsBudget` holds it for one gateway and reads the saved value again
whenever the store's change counter moves.

:class:`Standing` says where it stands: what is listed to AI clients against the budget, and how
many tools are left to ``mcp_setup_find_tools``; :func:`adds_words` is the consent's line for a
server about to be installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from setup_agent.store import TOOLS_BUDGET, Catalog

from .discover import FIND_TOOLS, estimated_tokens, within_budget
from .offers import without_hidden

if TYPE_CHECKING:
    from setup_agent.store import Store

__all__ = [
    "ENV_VAR",
    "MAX_BUDGET",
    "Budget",
    "SavedSettings",
    "Standing",
    "ToolsBudget",
    "adds_words",
    "parse_budget",
    "source_words",
    "standing_of",
    "stored_catalog",
]

Source = Literal["environment", "saved", "default"]
#: The largest budget the page accepts (a model's whole context is about this size).
MAX_BUDGET = 1_000_000
#: The setting in the environment that decides for its process.
ENV_VAR = "MCP_SETUP_TOOLS_BUDGET"


class SavedSettings(Protocol):
    """The store's gateway-wide settings (``store.preferences``)."""

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str, *, actor: str) -> bool: ...


@dataclass(frozen=True)
class Budget:
    """The budget in force (0: none, every tool is listed) and where it comes from."""

    tokens: int
    source: Source


def parse_budget(text: str | None) -> int | None:
    """A saved value as a budget (None: not a whole number of tokens in range)."""
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    return value if 0 <= value <= MAX_BUDGET else None


class ToolsBudget:
    """One gateway's budget: the environment's ``override`` if set, else the saved value, else
    ``default``."""

    def __init__(self, saved: SavedSettings, *, default: int, override: int | None = None) -> None:
        self._saved = saved
        self.default = default
        self.override = override
        self._current = Budget(override, "environment") if override is not None else Budget(default, "default")

    @property
    def current(self) -> Budget:
        return self._current

    def reload(self) -> bool:
        """Read the saved value again (a thread: it reads the store); True when the budget changed."""
        if self.override is not None:
            return False
        saved = parse_budget(self._saved.get(TOOLS_BUDGET))
        now = Budget(saved, "saved") if saved is not None else Budget(self.default, "default")
        changed, self._current = now != self._current, now
        return changed

    def save(self, tokens: int, *, actor: str) -> Budget:
        """The person's choice, kept for every process on the store (a thread: it writes); the
        environment's value still decides for this process where it is set."""
        self._saved.set(TOOLS_BUDGET, str(int(tokens)), actor=actor)
        self.reload()
        return self._current


def _n(value: int) -> str:
    return f"{value:,}"


@dataclass(frozen=True)
class Standing:
    """What ``tools/list`` takes of an AI client's context against the budget."""

    budget: Budget
    #: Tokens of the tool definitions listed (mcp-setup's own tools, the find/call pair with its note of the
    #: tools left out, the installed ones that fit).
    listed_tokens: int
    #: Tokens of every tool's definition, were all listed.
    total_tokens: int
    #: Installed tools listed, and those left to the find/call pair.
    listed_tools: int
    unlisted_tools: int

    def words(self) -> str:
        """ "Tool definitions listed to AI clients: 6,100 of 8,000 tokens; 12 tools reachable through find_tools"."""
        head = "Tool definitions listed to AI clients: "
        if self.budget.tokens <= 0:
            return head + f"{_n(self.listed_tokens)} tokens (no budget: every installed tool is listed)"
        head += f"{_n(self.listed_tokens)} of {_n(self.budget.tokens)} tokens; "
        if not self.unlisted_tools:
            return head + "every installed tool is listed"
        many = "tool" if self.unlisted_tools == 1 else "tools"
        return head + f"{_n(self.unlisted_tools)} {many} reachable through {FIND_TOOLS}"

    def public(self) -> dict[str, object]:
        return {
            "budget": self.budget.tokens,
            "source": self.budget.source,
            "listed_tokens": self.listed_tokens,
            "total_tokens": self.total_tokens,
            "listed_tools": self.listed_tools,
            "unlisted_tools": self.unlisted_tools,
            "words": self.words(),
        }


def standing_of(
    catalog: Catalog, own_tokens: int, budget: Budget, recent: Sequence[str], *, discover: bool = False
) -> Standing:
    """Where ``budget`` stands for ``catalog`` with ``recent`` (the face's own tools take
    ``own_tokens``); ``discover``: the face lists only its own tools (every installed tool is left
    to the pair)."""
    wire = catalog.wire_tools()
    total = own_tokens + estimated_tokens(wire)
    if discover:
        return Standing(budget, own_tokens, total, 0, len(wire))
    listing = within_budget(catalog, own_tokens, budget.tokens, recent)
    listed = own_tokens + estimated_tokens(listing.tools) + listing.note_tokens()
    return Standing(budget, listed, total, len(listing.tools), sum(listing.unlisted.values()))


def adds_words(adds: int, used_before: int, budget: int, *, lead: bool = True) -> str:
    """The consent's line for a server whose tools take ``adds`` tokens, when every tool listed
    now takes ``used_before`` (mcp-setup's own included) of ``budget`` (0: none); ``lead=False``:
    without saying what they add (a sentence that follows one that did)."""
    head = f"Its tools add about {_n(adds)} tokens to what your AI clients are listed"
    if budget <= 0:
        return (
            head + " (no budget is set: every tool is listed)." if lead else "No budget is set: every tool is listed."
        )
    used = used_before + adds
    line = f"{head}: " if lead else "With them, AI clients are listed "
    line += f"{_n(used)} of your budget of {_n(budget)} tokens."
    if used > budget:
        line += (
            " Past the budget, AI clients are listed the tools used most recently, then, as room is left, the others "
            "by server in the order the servers were installed; the rest, these among them until used, are reached "
            f"through {FIND_TOOLS}."
        )
    return line


def source_words(budget: Budget, default: int) -> str:
    """Where the budget in force comes from, and what decides when (the page's note)."""
    if budget.source == "environment":
        return (
            f"{ENV_VAR} sets it for this mcp-setup ({_n(budget.tokens)} tokens) and wins over the value saved "
            "here; AI clients whose mcp-setup does not set it use the value you save."
        )
    if budget.source == "saved":
        return f"You saved it here; {ENV_VAR}, where an AI client's setup sets it, wins for that client."
    return (
        f"The default ({_n(default)} tokens). Save your own here; {ENV_VAR}, where an AI client's setup sets it, "
        "wins for that client."
    )


def stored_catalog(store: Store) -> Catalog:
    """The installed tools every face lists, read from the store (a thread): what a consent counts
    a new server's tools against."""
    offers = store.pins.offers()
    return Catalog.build(without_hidden(s.catalog_entry(), offers) for s in store.servers.list())
