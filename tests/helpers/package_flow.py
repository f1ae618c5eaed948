"""The agent's flow for one packaged stub server (npm, PyPI or OCI), shared by the download-phase
and prefetch tests: a local catalog entry that wants the secret ``STUB_API_KEY``, the secret
prompt (and the prefetch it starts), and the test-connect with its progress events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from app.runtime import Runtime
from setup_agent.setup.service import CallContext

__all__ = ["open_prompt", "run_test", "write_catalog_entry"]


def write_catalog_entry(catalog: Path, name: str, description: str, package: dict[str, Any]) -> None:
    """A local catalog entry for ``name`` with one ``package`` (stdio) wanting ``STUB_API_KEY``."""
    catalog.mkdir(parents=True, exist_ok=True)
    doc = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": description,
        "version": "1.0.0",
        "packages": [
            {
                **package,
                "version": "1.0.0",
                "transport": {"type": "stdio"},
                "environmentVariables": [
                    {
                        "name": "STUB_API_KEY",
                        "description": "API key",
                        "isRequired": True,
                        "isSecret": True,
                        "format": "string",
                    }
                ],
            }
        ],
    }
    (catalog / (name.rsplit("/", 1)[-1] + ".json")).write_text(json.dumps(doc))


async def open_prompt(runtime: Runtime, name: str, *, settle_seconds: float = 90) -> dict[str, Any]:
    """Open the secret prompt for ``name`` and wait (bounded) for the prefetch it started."""
    opened = await runtime.service.call(
        "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your key", "server": name}
    )
    assert "ref" in opened, opened
    with anyio.fail_after(settle_seconds):
        await runtime.service.prefetches_settled()
    return opened


async def run_test(runtime: Runtime, name: str, ref: str, events: list[dict[str, Any]], *, timeout: float) -> dict:
    """``mcp_setup_test_connection`` of ``name`` with the key's ref; its progress into ``events``."""

    async def hear(event: dict[str, Any]) -> None:
        events.append(event)

    with anyio.fail_after(timeout):
        return await runtime.service.call(
            "mcp_setup_test_connection",
            {"qualified_name": name, "env_refs": {"STUB_API_KEY": ref}},
            CallContext(on_progress=hear),
        )
