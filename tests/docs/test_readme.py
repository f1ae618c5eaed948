"""The README a newcomer reads in two minutes (issue 37), and docs whose links all lead somewhere.

README.md stays short and opens with the two set-up commands, then what mcp-setup is; it shows
a picture that exists and `mcp-setup client connect` before any hand-written client JSON.
Every relative link in README.md, CONTRIBUTING.md and docs/*.md names a file that exists (and,
for a link into a Markdown page, a heading that exists). --help and the page point to the docs.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_README_CHARS = 6_500
SET_UP = [
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/mcp-setup serve   # use it",
    "./scripts/test.sh                                                                   # or test it",
]
TOPIC_PAGES = (
    "clients.md",
    "secrets-and-consent.md",
    "sandbox.md",
    "cli.md",
    "settings.md",
    "team.md",
    "gateway.md",
    "troubleshooting.md",
    "tool-registry.md",
    "data-folder.md",
)
# [text](target) and ![alt](target); reference-style links are not used in these files.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _fenced_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line index of the opening fence, the block's lines) for each fenced block, in order."""
    lines = text.splitlines()
    blocks, start = [], None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if start is None:
                start = i
            else:
                blocks.append((start, lines[start + 1 : i]))
                start = None
    return blocks


def _doc_files() -> list[Path]:
    return [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    text = FENCE.sub("", page.read_text())
    heads = re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_the_readme_is_short() -> None:
    size = len(README.read_text())
    assert size <= MAX_README_CHARS, f"README.md is {size} characters; at most {MAX_README_CHARS}: move detail to docs/"


def test_the_readme_opens_with_the_two_set_up_commands_then_says_what_it_is() -> None:
    text = README.read_text()
    (start, first), *_ = _fenced_blocks(text)
    assert first == SET_UP
    after = text.splitlines()[start + len(first) + 2 : start + len(first) + 12]  # ten lines after the block
    joined = " ".join(after)
    assert "mcp-setup" in joined and "MCP servers" in joined, after
    assert "never sees your" in joined and "you approve what runs" in joined, after


def test_the_readme_shows_a_picture_that_is_in_the_repository() -> None:
    images = [t for t in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README.read_text()) if "://" not in t]
    assert images, "README.md shows no picture of the page"
    for target in images:
        path = REPO / target
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", target
        assert path.stat().st_size > 10_000, f"{target} looks empty: run .venv/bin/python scripts/screenshot.py"


def test_client_connect_comes_before_any_hand_written_client_json() -> None:
    text = README.read_text()
    connect = text.find("mcp-setup client connect")
    assert connect != -1
    for key in ('"mcpServers"', '"servers"', '"context_servers"', "[mcp_servers"):
        at = text.find(key)
        assert at == -1 or connect < at, key
    for client in ("claude-desktop", "cursor", "vscode", "claude-code", "gemini", "codex"):
        assert f"mcp-setup client connect {client}" in text


def test_the_clients_the_readme_names_are_the_ones_the_code_knows() -> None:
    from app.clients.files import CLIENTS

    named = set(re.findall(r"mcp-setup client connect ([a-z-]+)", README.read_text()))
    assert named and named <= set(CLIENTS), named - set(CLIENTS)
    clients_page = (REPO / "docs" / "clients.md").read_text()
    for client in CLIENTS:
        assert f"`{client}`" in clients_page, client


def test_the_harness_is_in_contributing_and_the_topic_pages_exist() -> None:
    contributing = (REPO / "CONTRIBUTING.md").read_text()
    for words in (
        "./scripts/test.sh",
        "--under-load",
        "MCP_SETUP_TEST_POSTGRES_URL",
        "MCP_SETUP_TEST_TIMEOUT_SCALE",
        "bench/",
        "ruff check",
    ):
        assert words in contributing, words
    assert "MCP_SETUP_TEST_" not in README.read_text()
    for page in TOPIC_PAGES:
        assert (REPO / "docs" / page).is_file(), page
        assert f"docs/{page}" in README.read_text(), f"the README does not link docs/{page}"


def test_every_relative_link_in_the_docs_leads_to_a_file_that_exists() -> None:
    broken = []
    for page in _doc_files():
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path_part, _, anchor = target.partition("#")
            path = (page.parent / path_part).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken


def test_help_and_the_page_point_to_the_docs() -> None:
    from app.cli.main import _parser

    help_text = _parser().format_help()
    page = (REPO / "ui" / "index.html").read_text()
    for doc in ("docs/troubleshooting.md", "docs/clients.md"):
        assert (REPO / doc).is_file()
        assert doc in help_text and doc in page, doc
    for doc in re.findall(r"docs/[a-z-]+\.md", help_text + page):
        assert (REPO / doc).is_file(), doc
