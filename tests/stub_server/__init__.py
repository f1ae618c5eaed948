"""Stub MCP servers (stdio, SDK-based stdio, streamable HTTP) and MCPB bundle helpers for tests."""
