"""Wiring from Settings: credentials from the keyring, what the core is handed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings
from tests.fakes.smithery_registry import DEFAULT_API_KEY

pytestmark = pytest.mark.anyio


async def test_the_smithery_key_can_come_from_the_keyring_and_is_redacted(
    new_runtime, tmp_path: Path, memory_keyring, smithery_fake
) -> None:
    memory_keyring.set_password("mcp-setup", "smithery-api-key", DEFAULT_API_KEY)
    settings = Settings(home=tmp_path, registries="smithery", smithery_url=smithery_fake.url)
    runtime = new_runtime(settings, keyring_backend=memory_keyring)
    try:
        page = await runtime.hub.search(None, page=1, page_size=5)
        assert page.servers and not page.errors
        assert DEFAULT_API_KEY not in runtime.redactor.redact(f"key={DEFAULT_API_KEY}")
    finally:
        await runtime.aclose()


async def test_without_a_smithery_key_the_search_says_it_was_skipped(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    settings = Settings(home=tmp_path, registries="smithery,local")
    runtime = new_runtime(settings, keyring_backend=memory_keyring)
    try:
        page = await runtime.hub.search("x", page=1, page_size=5)
        assert [e.source for e in page.errors] == ["smithery"]
        assert "MCP_SETUP_SMITHERY_API_KEY" in page.errors[0].message
    finally:
        await runtime.aclose()
