"""docs/ARCHITECTURE.md stays a short map that is true of the tree.

It is at most :data:`MAX_CHARS` characters, and every repository path it names in inline code
exists. A path is a whitespace-separated token inside backticks that contains ``/`` or ends in
``.py``, ``.md``, ``.toml`` or ``.js``, read relative to the repository root (a trailing ``/``
names a folder; ``*`` is a glob that must match something). Tokens that start with ``/`` are URL
routes and anything with ``://`` is a URL: neither is a path. Fenced blocks are pictures, not
references, and are not read.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
MAX_CHARS = 16_000

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
#: An inline code span: a run of backticks, the shortest text, the same run again.
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
SUFFIXES = (".py", ".md", ".toml", ".js")
#: Punctuation around a token that is not part of it (``(app/x.py)``, ``app/x.py,``).
EDGES = "()[]{},;:'\"."


def code_tokens(markdown: str) -> list[str]:
    text = FENCE.sub("", markdown)
    return [token for _, span in SPAN.findall(text) for token in span.split()]


def named_paths(markdown: str) -> list[str]:
    paths = []
    for token in code_tokens(markdown):
        token = token.strip(EDGES)
        if not token or token.startswith("/") or "://" in token:
            continue
        if "/" in token or token.endswith(SUFFIXES):
            paths.append(token)
    return paths


def exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists() and (not path.endswith("/") or (ROOT / path).is_dir())


def test_the_architecture_doc_is_short() -> None:
    size = len(DOC.read_text(encoding="utf-8"))
    assert size <= MAX_CHARS, f"docs/ARCHITECTURE.md has {size} characters (at most {MAX_CHARS})"


def test_every_path_the_architecture_doc_names_exists() -> None:
    paths = named_paths(DOC.read_text(encoding="utf-8"))
    assert len(paths) > 20  # the doc names its files: a reader that finds none is broken
    missing = sorted({p for p in paths if not exists(p)})
    assert missing == [], f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_the_path_reader_finds_paths_and_skips_routes_urls_and_pictures() -> None:
    sample = (
        "See `setup_agent/nope.py`, `(app/web/)`, ``a `b` c.md``, `x.toml`, `ui/js/*.js` and\n"
        "`Store.servers`, `/mcp`, `https://example.org/a.py`, `mcp-setup serve`.\n"
        "```\napp/cli/ghost.py\n```\n"
    )
    assert named_paths(sample) == ["setup_agent/nope.py", "app/web/", "c.md", "x.toml", "ui/js/*.js"]
    assert not exists("setup_agent/nope.py") and exists("app/web/") and exists("ui/js/*.js")
    assert not exists("pyproject.toml/")
