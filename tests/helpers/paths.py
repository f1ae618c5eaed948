"""Where things are, for tests at any depth under ``tests/``: the checkout, the stub servers and
the fixture files."""

from __future__ import annotations

from pathlib import Path

#: The tests' own folder.
TESTS = Path(__file__).resolve().parent.parent
#: The checkout (the folder that holds ``pyproject.toml``, ``app/`` and ``setup_agent/``).
REPO = TESTS.parent
#: The stub MCP servers (``tests/stub_server``).
STUB_DIR = TESTS / "stub_server"
#: Fixture files (``tests/fixtures``).
FIXTURES = TESTS / "fixtures"
