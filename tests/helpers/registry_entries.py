"""The ``server-everything`` entry of the fake official registry."""

from __future__ import annotations

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"


EVERYTHING_VERSION = "2026.8.31"


def everything_entry() -> dict:
    return {
        "$schema": SCHEMA,
        "name": "io.github.modelcontextprotocol/server-everything",
        "description": "MCP test server exercising every protocol feature.",
        "version": EVERYTHING_VERSION,
        "packages": [
            {
                "registryType": "npm",
                "identifier": "@modelcontextprotocol/server-everything",
                "version": EVERYTHING_VERSION,
                "runtimeHint": "npx",
                "transport": {"type": "stdio"},
            }
        ],
    }
