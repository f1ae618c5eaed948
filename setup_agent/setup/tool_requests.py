"""The typed arguments of each ``mcp_setup_*`` tool: one pydantic model per tool, parsed once where
a call enters the core (:meth:`~setup_agent.setup.service.SetupService.call`). Handlers, the
installer and the preparer take these models, never a dict; the tools' input schemas are
generated from them (``tool_specs.py``).

Every rule the agent's arguments are held to is here, in our own words: a refused argument is a
:class:`~pydantic_core.PydanticCustomError` of type
:data:`~setup_agent.translation.ARGUMENT_ERROR` whose sentence names the field and its rule and
never quotes the value (pydantic's own messages may), and the translation table makes it
``invalid_input``. Strings are stripped; "required" means a non-empty string; a name is echoed
only when it matches :data:`~setup_agent.setup.tool_args.NAME_PATTERN`; numbers are whole numbers
(never a boolean) within their bounds; flags are booleans; ``env`` and ``env_refs`` map names to
strings. The size bounds (``tool_args.check_bounds``) and the guard run on the raw arguments
before these models see them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, WrapValidator, model_validator
from pydantic_core import PydanticCustomError

from setup_agent.translation import ARGUMENT_ERROR, translate

from .tool_args import MAX_NAME_CHARS, MAX_QUERY_CHARS, valid_name

__all__ = [
    "AuthorizeRequest",
    "GetRequest",
    "InstallRequest",
    "LaunchRequest",
    "ListRequest",
    "RemoveRequest",
    "SearchRequest",
    "SecretRequest",
    "TestRequest",
    "ToolRequest",
]

MAX_PER_MEMBER = 32


def _refused(message: str) -> PydanticCustomError:
    return PydanticCustomError(ARGUMENT_ERROR, message)


def _required(field: str) -> PydanticCustomError:
    return _refused(f"{field} is required and must be a non-empty string.")


def _invalid_name(field: str) -> PydanticCustomError:
    return _refused(
        f"{field} is an invalid name: use letters, digits and @ _ . / : + - (at most {MAX_NAME_CHARS} characters)."
    )


def _text(value: Any, _handler: Any, info: ValidationInfo) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _required(str(info.field_name))
    return value.strip()


def _name(value: Any, handler: Any, info: ValidationInfo) -> str:
    text = _text(value, handler, info)
    if not valid_name(text):
        raise _invalid_name(str(info.field_name))
    return text


def _optional_text(value: Any, _handler: Any, info: ValidationInfo) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _refused(f"{info.field_name} must be a string.")
    return value.strip()


def _optional_name(value: Any, handler: Any, info: ValidationInfo) -> str | None:
    text = _optional_text(value, handler, info)
    if text is not None and not valid_name(text):
        raise _invalid_name(str(info.field_name))
    return text


def _query(value: Any, handler: Any, info: ValidationInfo) -> str | None:
    text = _optional_text(value, handler, info)
    if text is not None and len(text) > MAX_QUERY_CHARS:
        raise _refused(f"query is too long (at most {MAX_QUERY_CHARS} characters).")
    return text


def _string_map(value: Any, _handler: Any, info: ValidationInfo) -> dict[str, str]:
    value = value or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _refused(f"{info.field_name} must be an object mapping setting names to strings.")
    return dict(value)


def _flag(value: Any, _handler: Any, info: ValidationInfo) -> bool:
    if not isinstance(value, bool):
        raise _refused(f"{info.field_name} must be true or false.")
    return value


def _whole_number(lo: int, hi: int) -> WrapValidator:
    def check(value: Any, _handler: Any, info: ValidationInfo) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise _refused(f"{info.field_name} must be a whole number from {lo} to {hi}.")
        return value

    return WrapValidator(check)


def _seconds(value: Any, _handler: Any, info: ValidationInfo) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not 0 <= value <= _MAX_WAIT
    ):
        raise _refused(f"{info.field_name} must be a number from 0 to {_MAX_WAIT}.")
    return float(value)


def _member_keys(value: Any, _handler: Any, info: ValidationInfo) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PER_MEMBER or not all(isinstance(k, str) and k for k in value):
        raise _refused(f"per_member must be a list of at most {MAX_PER_MEMBER} setting names.")
    return list(value)


_MAX_WAIT = 120

#: A required string, stripped (``key_name``, ``prompt``).
Text = Annotated[str, WrapValidator(_text)]
#: A required name: stripped, and matching ``NAME_PATTERN`` (it may be echoed).
Name = Annotated[str, WrapValidator(_name)]
#: An optional string: absent, null or "" is None; else stripped.
OptText = Annotated[str | None, WrapValidator(_optional_text)]
#: An optional name: as :data:`OptText`, and matching ``NAME_PATTERN``.
OptName = Annotated[str | None, WrapValidator(_optional_name)]
#: Setting names to strings (``env``, ``env_refs``); absent or empty is ``{}``.
StrMap = Annotated[dict[str, str], WrapValidator(_string_map)]
Flag = Annotated[bool, WrapValidator(_flag)]

_VERSION = "A version the registry lists for this server (e.g. '1.2.0'); the latest when left out."
_OAUTH_REF = "For a server that signs in with OAuth: the ref from mcp_setup_authorize."
_ALLOW_DEPRECATED = "Accept a server the registry marks deprecated."
_REPAIR = (
    "A repair a failed test offered (details.repair.code): start the server with the changed command "
    "shown there; the user approves it at consent."
)
_PER_MEMBER = (
    "Team gateways: the setting names each member enters for themselves (each person's own token). "
    "A member is asked for their own value out of band at their first call; nobody else's calls use it."
)


class ToolRequest(BaseModel):
    """A tool's arguments, parsed. Unknown arguments are ignored, as an agent may send more."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @classmethod
    def parse(cls, arguments: Mapping[str, Any]) -> Self:
        """``arguments`` as this tool's request; the first refused argument (in field order) is
        ``invalid_input`` in our own words, through the translation table."""
        try:
            return cls.model_validate(dict(arguments))
        except ValidationError as exc:
            raise translate(exc) from None

    @model_validator(mode="before")
    @classmethod
    def _required_are_given(cls, data: Any) -> Any:
        # A missing required argument is said in the same words as an empty one.
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                if field.is_required() and name not in data:
                    raise _required(name)
        return data


class SearchRequest(ToolRequest):
    query: Annotated[
        str | None, WrapValidator(_query), Field(description="Words to look for, e.g. 'notion' or 'github'.")
    ] = None
    page: Annotated[int, Field(ge=1, json_schema_extra={"default": 1}), _whole_number(1, 10_000)] = 1
    page_size: Annotated[int, Field(ge=1, le=100, json_schema_extra={"default": 10}), _whole_number(1, 100)] = 10
    source: Annotated[OptName, Field(description="Only this registry: official, smithery or local.")] = None

    @model_validator(mode="before")
    @classmethod
    def _null_numbers_are_defaults(cls, data: Any) -> Any:
        # ``page: null`` is the first page, as if left out.
        if isinstance(data, dict) and any(data.get(k, 0) is None for k in ("page", "page_size")):
            return {k: v for k, v in data.items() if not (k in ("page", "page_size") and v is None)}
        return data


class GetRequest(ToolRequest):
    qualified_name: Name
    source: OptName = None


class SecretRequest(ToolRequest):
    key_name: Annotated[Text, Field(description="The setting's name, e.g. NOTION_API_KEY.")]
    prompt: Annotated[Text, Field(description="What to tell the user: what this is and where to get it.")]
    server: Annotated[OptName, Field(description="The server's qualified_name, shown to the user.")] = None


class LaunchRequest(ToolRequest):
    """What a test, an install and a sign-in share: the entry, its package and its settings."""

    qualified_name: Name
    source: OptName = None
    env_refs: StrMap = {}
    env: StrMap = {}
    package: OptName = None
    version: Annotated[OptName, Field(description=_VERSION)] = None
    allow_deprecated: Annotated[Flag, Field(description=_ALLOW_DEPRECATED)] = False
    repair: Annotated[OptText, Field(description=_REPAIR)] = None


class TestRequest(LaunchRequest):
    __test__: ClassVar[bool] = False  # not a pytest class, whatever its name

    env_refs: Annotated[StrMap, Field(description="Secret settings: {KEY: secret://ref}.")] = {}
    env: Annotated[StrMap, Field(description="Non-secret settings: {KEY: value}.")] = {}
    package: Annotated[OptName, Field(description="Package id or type from mcp_setup_get.")] = None
    oauth_ref: Annotated[OptText, Field(description=_OAUTH_REF)] = None


class InstallRequest(LaunchRequest):
    oauth_ref: Annotated[OptText, Field(description=_OAUTH_REF)] = None
    per_member: Annotated[
        list[str], Field(max_length=MAX_PER_MEMBER, description=_PER_MEMBER), WrapValidator(_member_keys)
    ] = []


class AuthorizeRequest(LaunchRequest):
    package: Annotated[OptName, Field(description="The remote package id, if the server lists several.")] = None
    client_id: Annotated[
        OptText,
        Field(description="A client id registered for mcp-setup, for a sign-in service without dynamic registration."),
    ] = None


_ONE_SERVER = "An installed server: its slug, qualified name or server_id (as mcp_setup_list_servers shows)."


class ListRequest(ToolRequest):
    wait_seconds: Annotated[
        float,
        Field(ge=0, le=_MAX_WAIT, description="Wait up to this long for servers that are still connecting."),
        WrapValidator(_seconds),
    ] = 0.0
    server: Annotated[
        OptName,
        Field(description=_ONE_SERVER + " Lists that one server with its tools' descriptions and input schemas."),
    ] = None


class RemoveRequest(ToolRequest):
    server: Annotated[OptName, Field(description=_ONE_SERVER)] = None
    server_id: Annotated[OptName, Field(description="The same as server (older name).")] = None

    @model_validator(mode="after")
    def _one(self) -> RemoveRequest:
        if (self.server is None) == (self.server_id is None):
            raise _refused("Give the server to remove: its slug, qualified name or server_id.")
        return self

    @property
    def name(self) -> str:
        return self.server or self.server_id or ""
