#!/usr/bin/env python3
"""A server whose tools declare an input schema without ``type``, as the npm ``mcp-obsidian``
1.0.0 lists them (``{"$schema": "http://json-schema.org/draft-07/schema#"}``, a zod conversion
that lost its object): stdlib only, newline-delimited JSON-RPC, the classic handshake.
``read_notes`` answers the paths it was given."""

import json
import sys

DRAFT_07 = {"$schema": "http://json-schema.org/draft-07/schema#"}


def answer(msg):
    method = msg.get("method")
    if method == "initialize":
        return {
            "protocolVersion": (msg.get("params") or {}).get("protocolVersion") or "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "schemaless", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {
            "tools": [
                {"name": "read_notes", "description": "Read the contents of multiple notes.", "inputSchema": DRAFT_07},
                {"name": "search_notes", "description": "Searches for a note by its name.", "inputSchema": DRAFT_07},
            ]
        }
    if method == "tools/call":
        paths = ((msg.get("params") or {}).get("arguments") or {}).get("paths") or []
        return {"content": [{"type": "text", "text": "read: " + ", ".join(paths)}]}
    if method == "ping":
        return {}
    raise LookupError(method)


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "method" not in msg or msg.get("id") is None:
            continue
        try:
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        except LookupError:
            out = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "method not found"}}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
