"""Names, descriptions and input schemas of the ``mcp_setup_*`` tools, shared by every face."""

from __future__ import annotations

from typing import Any

from .per_member import PER_MEMBER_SPEC

__all__ = ["TOOL_NAMES", "TOOL_SPECS", "tool_spec"]

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_OAUTH_REF = {
    "type": "string",
    "description": "For a server that signs in with OAuth: the ref from mcp_setup_authorize.",
}
_VERSION = {
    "type": "string",
    "description": "A version the registry lists for this server (e.g. '1.2.0'); the latest when left out.",
}
_ALLOW_DEPRECATED = {"type": "boolean", "description": "Accept a server the registry marks deprecated."}
_REPAIR = {
    "type": "string",
    "description": "A repair a failed test offered (details.repair.code): start the server with the changed command "
    "shown there; the user approves it at consent.",
}

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "mcp_setup_search",
        "description": (
            "Search MCP server registries (official MCP registry, Smithery, local catalog). "
            "Returns summaries with qualified_name; registries that failed are listed in errors; "
            "did_you_mean, when present, suggests the query with its typos corrected."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for, e.g. 'notion' or 'github'."},
                "page": {"type": "integer", "minimum": 1, "default": 1},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "source": {"type": "string", "description": "Only this registry: official, smithery or local."},
            },
        },
    },
    {
        "name": "mcp_setup_get",
        "description": (
            "Details of one server: its settings (required_env_keys; secret ones must be requested with "
            "mcp_setup_request_secret) and its packages with whether each can run here."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "qualified_name": {"type": "string"},
                "source": {"type": "string"},
            },
            "required": ["qualified_name"],
        },
    },
    {
        "name": "mcp_setup_request_secret",
        "description": (
            "Ask the user for a secret value (API key, token, password) out of band. You receive only an opaque "
            "ref (secret://…) to pass in env_refs; never ask the user to paste a secret into the chat."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "key_name": {"type": "string", "description": "The setting's name, e.g. NOTION_API_KEY."},
                "prompt": {"type": "string", "description": "What to tell the user: what this is and where to get it."},
                "server": {"type": "string", "description": "The server's qualified_name, shown to the user."},
            },
            "required": ["key_name", "prompt"],
        },
    },
    {
        "name": "mcp_setup_test_connection",
        "description": (
            "Start the server in a scratch workspace with the given settings and list its tools, without "
            "installing anything. Errors carry a code (rejected, timeout, exited, runtime_missing, …)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "qualified_name": {"type": "string"},
                "source": {"type": "string"},
                "env_refs": {**_STR_MAP, "description": "Secret settings: {KEY: secret://ref}."},
                "env": {**_STR_MAP, "description": "Non-secret settings: {KEY: value}."},
                "package": {"type": "string", "description": "Package id or type from mcp_setup_get."},
                "version": _VERSION,
                "oauth_ref": _OAUTH_REF,
                "allow_deprecated": _ALLOW_DEPRECATED,
                "repair": _REPAIR,
            },
            "required": ["qualified_name"],
        },
    },
    {
        "name": "mcp_setup_install_and_connect",
        "description": (
            "Test, then install the server (settings encrypted at rest) and connect it so its tools are live. "
            "Nothing is saved unless the server answers. ok: true means it is installed; status says whether "
            "it is connected now (connected, or failed with a reason: it is retried)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "qualified_name": {"type": "string"},
                "source": {"type": "string"},
                "env_refs": _STR_MAP,
                "env": _STR_MAP,
                "package": {"type": "string"},
                "version": _VERSION,
                "oauth_ref": _OAUTH_REF,
                "allow_deprecated": _ALLOW_DEPRECATED,
                "repair": _REPAIR,
                "per_member": PER_MEMBER_SPEC,
            },
            "required": ["qualified_name"],
        },
    },
    {
        "name": "mcp_setup_authorize",
        "description": (
            "Sign in to a remote server that answered oauth_required: the user is shown the sign-in service's host "
            "and the permissions asked for, and signs in in their browser. You receive only a ref (secret://…) "
            "bound to that server: pass it as oauth_ref to mcp_setup_test_connection and "
            "mcp_setup_install_and_connect. status 'pending' means the user has not finished yet."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "qualified_name": {"type": "string"},
                "source": {"type": "string"},
                "package": {"type": "string", "description": "The remote package id, if the server lists several."},
                "env_refs": _STR_MAP,
                "env": _STR_MAP,
                "version": _VERSION,
                "allow_deprecated": _ALLOW_DEPRECATED,
                "repair": _REPAIR,
                "client_id": {
                    "type": "string",
                    "description": "A client id registered for mcp-setup, for a sign-in service without dynamic registration.",
                },
            },
            "required": ["qualified_name"],
        },
    },
    {
        "name": "mcp_setup_list_servers",
        "description": "Installed servers with their status and tools.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "wait_seconds": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 120,
                    "description": "Wait up to this long for servers that are still connecting.",
                }
            },
        },
    },
    {
        "name": "mcp_setup_remove",
        "description": "Disconnect and uninstall a server (its settings and files are deleted).",
        "inputSchema": {
            "type": "object",
            "properties": {"server_id": {"type": "string"}},
            "required": ["server_id"],
        },
    },
]

#: Titles and MCP tool annotations: hints for clients deciding what to
#: confirm. Registries are an open world; the install dir and store are not.
_HINTS: dict[str, tuple[str, dict[str, bool]]] = {
    "mcp_setup_search": ("Search MCP servers", {"readOnlyHint": True, "openWorldHint": True}),
    "mcp_setup_get": ("Get server details", {"readOnlyHint": True, "openWorldHint": True}),
    "mcp_setup_request_secret": (
        "Ask the user for a secret",
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
    ),
    "mcp_setup_test_connection": (
        "Test a server",
        {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True},
    ),
    "mcp_setup_install_and_connect": (
        "Install a server",
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    ),
    "mcp_setup_authorize": (
        "Sign in to a server",
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    ),
    "mcp_setup_list_servers": ("List installed servers", {"readOnlyHint": True, "openWorldHint": False}),
    "mcp_setup_remove": (
        "Remove a server",
        {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False},
    ),
}
for _spec in TOOL_SPECS:
    _title, _annotations = _HINTS[_spec["name"]]
    _spec["title"] = _title
    _spec["annotations"] = {"title": _title, **_annotations}


#: The tool names, in the order above: the one list every face and the harness use.
TOOL_NAMES: tuple[str, ...] = tuple(spec["name"] for spec in TOOL_SPECS)


def tool_spec(name: str) -> dict[str, Any]:
    for spec in TOOL_SPECS:
        if spec["name"] == name:
            return spec
    raise KeyError(name)
