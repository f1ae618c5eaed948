"""The ``mcp_setup_*`` tools as every face lists them: name, title, description, annotations, and
the input schema generated from the tool's argument model (``tool_requests.py``), as the MCP
SDK's ``Tool.from_function`` does. :data:`TOOL_REQUESTS` is the one table of which model parses
which tool's arguments.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from setup_agent.gateway import DISCOVER_SPECS, estimated_tokens

from .tool_requests import (
    AuthorizeRequest,
    GetRequest,
    InstallRequest,
    ListRequest,
    RemoveRequest,
    SearchRequest,
    SecretRequest,
    TestRequest,
    ToolRequest,
)

__all__ = ["FACE_TOKENS", "TOOL_NAMES", "TOOL_REQUESTS", "TOOL_SPECS", "tool_spec"]


class _WireSchema(GenerateJsonSchema):
    """The schema an agent reads: no generated titles, an optional argument is its type (left out
    rather than null), and a default is shown only where a field says so (``json_schema_extra``):
    a default of "nothing" says nothing."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def generate(self, schema: Any, mode: Any = "validation") -> JsonSchemaValue:
        out = super().generate(schema, mode)
        out.pop("title", None)
        return out


def _input_schema(model: type[ToolRequest]) -> dict[str, Any]:
    schema = model.model_json_schema(schema_generator=_WireSchema)
    return {"type": schema.pop("type"), **schema}


# name: (model, title, description, annotations). Titles and annotations are hints for clients
# deciding what to confirm: registries are an open world; the install dir and store are not.
_TOOLS: dict[str, tuple[type[ToolRequest], str, str, dict[str, bool]]] = {
    "mcp_setup_search": (
        SearchRequest,
        "Search MCP servers",
        "Search MCP server registries (official MCP registry, Smithery, local catalog). "
        "Returns summaries with qualified_name; registries that failed are listed in errors; "
        "did_you_mean, when present, suggests the query with its typos corrected.",
        {"readOnlyHint": True, "openWorldHint": True},
    ),
    "mcp_setup_get": (
        GetRequest,
        "Get server details",
        "Details of one server: its settings (required_env_keys; secret ones must be requested with "
        "mcp_setup_request_secret) and its packages with whether each can run here.",
        {"readOnlyHint": True, "openWorldHint": True},
    ),
    "mcp_setup_request_secret": (
        SecretRequest,
        "Ask the user for a secret",
        "Ask the user for a secret value (API key, token, password) out of band. You receive only an opaque "
        "ref (secret://…) to pass in env_refs; never ask the user to paste a secret into the chat.",
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
    ),
    "mcp_setup_test_connection": (
        TestRequest,
        "Test a server",
        "Start the server in a scratch workspace with the given settings and list its tools, without "
        "installing anything. Errors carry a code (rejected, timeout, exited, runtime_missing, …).",
        {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": True},
    ),
    "mcp_setup_install_and_connect": (
        InstallRequest,
        "Install a server",
        "Test, then install the server (settings encrypted at rest) and connect it so its tools are live. "
        "Nothing is saved unless the server answers. ok: true means it is installed; status says whether "
        "it is connected now (connected, or failed with a reason: it is retried).",
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    ),
    "mcp_setup_authorize": (
        AuthorizeRequest,
        "Sign in to a server",
        "Sign in to a remote server that answered oauth_required: the user is shown the sign-in service's host "
        "and the permissions asked for, and signs in in their browser. You receive only a ref (secret://…) "
        "bound to that server: pass it as oauth_ref to mcp_setup_test_connection and "
        "mcp_setup_install_and_connect. status 'pending' means the user has not finished yet.",
        {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    ),
    "mcp_setup_list_servers": (
        ListRequest,
        "List installed servers",
        "Installed servers with their status and tools.",
        {"readOnlyHint": True, "openWorldHint": False},
    ),
    "mcp_setup_remove": (
        RemoveRequest,
        "Remove a server",
        "Disconnect and uninstall a server (its settings and files are deleted).",
        {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False},
    ),
}

#: Which model parses each tool's arguments.
TOOL_REQUESTS: dict[str, type[ToolRequest]] = {name: tool[0] for name, tool in _TOOLS.items()}

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": description,
        "inputSchema": _input_schema(model),
        "title": title,
        "annotations": {"title": title, **annotations},
    }
    for name, (model, title, description, annotations) in _TOOLS.items()
]

#: The tool names, in the order above: the one list every face and the harness use.
TOOL_NAMES: tuple[str, ...] = tuple(_TOOLS)


#: What a face's own tools take of a model's context (these and the find/call pair): the part of
#: every ``tools/list`` that a context budget always spends.
FACE_TOKENS = estimated_tokens([*TOOL_SPECS, *DISCOVER_SPECS])


def tool_spec(name: str) -> dict[str, Any]:
    for spec in TOOL_SPECS:
        if spec["name"] == name:
            return spec
    raise KeyError(name)
