"""Each tool's schema, its parse and its handler are one thing: the schema every face lists is
generated from the model ``SetupService.call`` parses the arguments into, and the handler takes
that model. An argument the schema declares is one the handler receives, and no other."""

from __future__ import annotations

import typing

import pytest

from setup_agent.setup.service import SetupService
from setup_agent.setup.tool_requests import ToolRequest
from setup_agent.setup.tool_specs import TOOL_NAMES, TOOL_REQUESTS, tool_spec


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_a_tools_schema_is_generated_from_the_model_its_handler_takes(tool: str) -> None:
    model = TOOL_REQUESTS[tool]
    assert issubclass(model, ToolRequest)
    assert set(tool_spec(tool)["inputSchema"].get("properties", {})) == set(model.model_fields)
    handler = SetupService._handlers(object.__new__(SetupService))[tool]  # type: ignore[arg-type]
    hints = typing.get_type_hints(handler)
    first = next(iter(k for k in hints if k not in ("ctx", "return")))
    assert hints[first] is model, f"{tool}'s handler takes {hints[first]}, not {model.__name__}"


def test_install_declares_the_version_to_install_with_a_description() -> None:
    version = tool_spec("mcp_setup_install_and_connect")["inputSchema"]["properties"]["version"]
    assert version["type"] == "string" and "version" in version["description"]
