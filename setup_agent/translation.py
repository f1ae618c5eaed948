"""Library exceptions become :mod:`setup_agent.errors` at the boundary, through one table.

:func:`translate` is called wherever a library's exception would otherwise leave the core (a
registry client's, the OS's when a program cannot start, a timeout): the first row of
:data:`TRANSLATIONS` whose type matches makes the :class:`~setup_agent.errors.SetupError`.
"""

from __future__ import annotations

from typing import Any

from .errors import (
    CommandNotFound,
    InvalidInput,
    NotFound,
    ProbeTimeout,
    RegistryAuthError,
    RegistryUnavailable,
    SetupError,
)

__all__ = ["ARGUMENT_ERROR", "TRANSLATIONS", "translate"]

#: The pydantic error type of a tool argument refused by its model (setup_agent/setup/tool_requests.py):
#: its message is our own sentence, which names the field and never quotes the value.
ARGUMENT_ERROR = "mcp_setup_argument"
_INTERNAL = "Internal error in mcp-setup; the log has details."


def _registry_error(exc: BaseException) -> SetupError:
    from registry_clients.errors import RegistryAuthFailed, RegistryNotFound

    source = getattr(exc, "source", "registry")
    if isinstance(exc, RegistryNotFound):
        return NotFound(str(exc), details={"source": source})
    if isinstance(exc, RegistryAuthFailed):
        return RegistryAuthError(str(exc), details={"source": source})
    return RegistryUnavailable(str(exc), details={"source": source})


def _file_not_found(exc: BaseException) -> SetupError:
    name = getattr(exc, "filename", None) or "the command"
    return CommandNotFound(f"Could not start {name}: no such program on this machine.")


def _permission(exc: BaseException) -> SetupError:
    name = getattr(exc, "filename", None) or "the command"
    return CommandNotFound(f"Could not start {name}: permission denied.")


def _arguments(exc: BaseException) -> SetupError:
    # Only a tool's arguments are ``invalid_input`` (the first refused one, in the model's field
    # order); any other validation error (a server's answer the SDK cannot read) stays internal.
    errors = exc.errors()  # type: ignore[attr-defined]
    if errors and all(e["type"] == ARGUMENT_ERROR for e in errors):
        return InvalidInput(errors[0]["msg"])
    return SetupError(_INTERNAL)


def _timeout(exc: BaseException) -> SetupError:
    return ProbeTimeout("The operation did not finish in time.")


def _translations() -> list[tuple[type[BaseException], Any]]:
    from pydantic import ValidationError

    from registry_clients.errors import RegistryError

    return [
        (ValidationError, _arguments),
        (RegistryError, _registry_error),
        (FileNotFoundError, _file_not_found),
        (PermissionError, _permission),
        (TimeoutError, _timeout),
    ]


#: Built lazily so importing the hierarchy costs nothing; ``translate`` walks it in order.
TRANSLATIONS: list[tuple[type[BaseException], Any]] = []


def translate(exc: BaseException) -> SetupError:
    """Return the :class:`SetupError` for ``exc`` (itself if it already is one)."""
    if isinstance(exc, SetupError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:  # a task group's one failure
        return translate(exc.exceptions[0])
    if not TRANSLATIONS:
        TRANSLATIONS.extend(_translations())
    for exc_type, make in TRANSLATIONS:
        if isinstance(exc, exc_type):
            return make(exc)
    return SetupError(_INTERNAL)
