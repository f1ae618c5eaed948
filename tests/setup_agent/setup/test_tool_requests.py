"""A tool's arguments are parsed once into its model, by the rules the agent was always held to:
stripped strings, "required" meaning a non-empty string, names echoed only when valid, whole
numbers (never booleans) within bounds, booleans that are booleans, ``env``/``env_refs`` as string
maps, ``per_member`` as a short list of names. A refusal is ``invalid_input`` in our own words,
naming the field, never quoting the value (pydantic's own messages can)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from setup_agent.errors import InvalidInput
from setup_agent.setup.tool_requests import (
    GetRequest,
    InstallRequest,
    ListRequest,
    RemoveRequest,
    SearchRequest,
    SecretRequest,
    TestRequest,
    ToolRequest,
)
from setup_agent.translation import translate

GUESS = "Hunter2-guess-7c1e"


@pytest.mark.parametrize(
    ("model", "arguments", "message"),
    [
        (GetRequest, {}, "qualified_name is required and must be a non-empty string."),
        (GetRequest, {"qualified_name": "   "}, "qualified_name is required and must be a non-empty string."),
        (GetRequest, {"qualified_name": ["x"]}, "qualified_name is required and must be a non-empty string."),
        (GetRequest, {"qualified_name": f"{GUESS} !"}, "qualified_name is an invalid name"),
        (GetRequest, {"qualified_name": "a/b", "source": 5}, "source must be a string."),
        (RemoveRequest, {"server_id": f"drop {GUESS}; --"}, "server_id is an invalid name"),
        (SearchRequest, {"page": 0}, "page must be a whole number from 1 to 10000."),
        (SearchRequest, {"page": True}, "page must be a whole number from 1 to 10000."),
        (SearchRequest, {"page": 10_001}, "page must be a whole number from 1 to 10000."),
        (SearchRequest, {"page_size": "ten"}, "page_size must be a whole number from 1 to 100."),
        (SearchRequest, {"page_size": 2.0}, "page_size must be a whole number from 1 to 100."),
        (SearchRequest, {"query": GUESS * 20}, "query is too long (at most 200 characters)."),
        (SecretRequest, {"key_name": "K"}, "prompt is required and must be a non-empty string."),
        (
            TestRequest,
            {"qualified_name": "a/b", "env_refs": [GUESS]},
            "env_refs must be an object mapping setting names to strings.",
        ),
        (
            TestRequest,
            {"qualified_name": "a/b", "env": {"K": 5}},
            "env must be an object mapping setting names to strings.",
        ),
        (TestRequest, {"qualified_name": "a/b", "allow_deprecated": "yes"}, "allow_deprecated must be true or false."),
        (TestRequest, {"qualified_name": "a/b", "allow_deprecated": None}, "allow_deprecated must be true or false."),
        (TestRequest, {"qualified_name": "a/b", "version": f"{GUESS} x"}, "version is an invalid name"),
        (
            InstallRequest,
            {"qualified_name": "a/b", "per_member": [GUESS, ""]},
            "per_member must be a list of at most 32 setting names.",
        ),
        (
            InstallRequest,
            {"qualified_name": "a/b", "per_member": ["K"] * 33},
            "per_member must be a list of at most 32 setting names.",
        ),
        (ListRequest, {"wait_seconds": 121}, "wait_seconds must be a number from 0 to 120."),
        (ListRequest, {"wait_seconds": float("nan")}, "wait_seconds must be a number from 0 to 120."),
        (ListRequest, {"wait_seconds": False}, "wait_seconds must be a number from 0 to 120."),
    ],
)
def test_a_refused_argument_is_invalid_input_in_our_words_without_its_value(
    model: type[ToolRequest], arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        model.parse(arguments)
    assert refused.value.message.startswith(message), refused.value.message
    assert GUESS not in refused.value.message and "input_value" not in refused.value.message


def test_the_first_refused_argument_in_the_tools_order_is_the_one_said() -> None:
    with pytest.raises(InvalidInput) as refused:
        TestRequest.parse({"qualified_name": "", "env": 5, "package": "%%"})
    assert refused.value.message == "qualified_name is required and must be a non-empty string."


def test_strings_are_stripped_empty_optionals_are_absent_and_defaults_apply() -> None:
    request = TestRequest.parse(
        {"qualified_name": "  io.x/y ", "source": "", "repair": " fix ", "env": None, "extra": {"ignored": 1}}
    )
    assert (request.qualified_name, request.source, request.repair, request.env) == ("io.x/y", None, "fix", {})
    assert request.allow_deprecated is False and request.env_refs == {} and request.oauth_ref is None
    search = SearchRequest.parse({"page": None, "page_size": 25})
    assert (search.query, search.page, search.page_size, search.source) == (None, 1, 25, None)
    assert ListRequest.parse({"wait_seconds": 3}).wait_seconds == 3.0
    assert InstallRequest.parse({"qualified_name": "a/b", "per_member": ["B", "A"]}).per_member == ["B", "A"]


def test_another_validation_error_stays_an_internal_error() -> None:
    class Answer(BaseModel):
        count: int

    with pytest.raises(ValidationError) as failed:
        Answer.model_validate({"count": GUESS})
    err = translate(failed.value)
    assert err.code == "internal" and GUESS not in err.message
