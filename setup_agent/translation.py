"""Library exceptions become :mod:`setup_agent.errors` at the boundary, through one table.

:func:`translate` is called wherever a library's exception would otherwise leave the core (a
registry client's, the OS's when a program cannot start, a timeout): the first row of
:data:`TRANSLATIONS` whose type matches makes the :class:`~setup_agent.errors.SetupError`.

:func:`data_dir_error` is the same for the data folder, where the OS's and SQLite's errors mean
something else than when a program starts: a read-only disk, no permission, a full disk, a
damaged database, a key file that cannot be read, each as one
:class:`~setup_agent.errors.DataDirUnusable` naming the path and the fix. Its sentences are
made by :func:`data_dir_unusable`, which a check that finds the same problem before anything
fails (``mcp-setup``'s) uses too. Standard library only: the fast read-only commands use it.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import (
    CommandNotFound,
    DataDirUnusable,
    InvalidInput,
    NotFound,
    ProbeTimeout,
    RegistryAuthError,
    RegistryUnavailable,
    SetupError,
    StoreError,
)

__all__ = ["ARGUMENT_ERROR", "TRANSLATIONS", "data_dir_error", "data_dir_unusable", "not_writable", "translate"]

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


# --- the data folder ------------------------------------------------------------------------

_ELSEWHERE = "set MCP_SETUP_HOME to a folder you can write to"

#: problem -> (what is wrong, with {path} and {detail}; the fix)
_DATA_DIR_WORDS: dict[str, tuple[str, str]] = {
    "read_only": ("{path} is on a read-only disk", f"Make the disk writable or {_ELSEWHERE}"),
    "no_permission": (
        "{path} cannot be written by you (permission denied)",
        f"Give it back to your user (chown) or {_ELSEWHERE}",
    ),
    "cannot_create": ("{path} cannot be created: {detail}", _ELSEWHERE[0].upper() + _ELSEWHERE[1:]),
    "not_a_folder": ("{path} is a file, not a folder", f"Move that file aside or {_ELSEWHERE}"),
    "full": ("The disk holding {path} is full", "Free some space, then try again"),
    "not_a_database": (
        "{path} is not a database (damaged?)",
        "Move it aside (mcp-setup then starts an empty one) or set MCP_SETUP_HOME to another folder",
    ),
    "key_unreadable": (
        "The data key file {path} cannot be read ({detail}); without it the stored settings cannot be decrypted",
        "Make it readable by you (chmod 600, your user as owner) or set MCP_SETUP_DATA_KEY_FILE to the right file",
    ),
}


def data_dir_unusable(problem: str, path: Path, *, detail: str = "", check: str = "data dir") -> DataDirUnusable:
    """The one sentence for ``problem`` (a key of the table above) at ``path``: what is wrong, then the
    fix. ``check`` names doctor's line it belongs to (``data dir``, ``database``, ``data key``)."""
    what, fix = _DATA_DIR_WORDS[problem]
    what = what.format(path=path, detail=detail)
    return DataDirUnusable(
        f"{what}. {fix}.", details={"path": str(path), "problem": problem, "what": what, "fix": fix, "check": check}
    )


def not_writable(path: Path) -> str:
    """Why ``path`` cannot be written: ``read_only`` (its disk is mounted read-only) or ``no_permission``."""
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # gone, or no statvfs (Windows)
        read_only = False
    return "read_only" if read_only else "no_permission"


_OS_PROBLEMS = {
    errno.EROFS: "read_only",
    errno.EACCES: "no_permission",
    errno.EPERM: "no_permission",
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.ENOTDIR: "cannot_create",
}


def data_dir_error(
    exc: BaseException, home: Path, database: Path | None = None, key_file: Path | None = None
) -> DataDirUnusable | None:
    """The :class:`DataDirUnusable` ``exc`` (or an exception it was raised from) means for the data
    folder ``home`` with its SQLite ``database`` (None: another database) and data ``key_file``;
    None when it is not about them (a program that cannot start, another file)."""
    home = Path(os.path.abspath(home))
    for err in _chain(exc):
        if isinstance(err, DataDirUnusable):
            return err
        if isinstance(err, SetupError) and not isinstance(err, StoreError):
            return None  # the core said what it means (a program that cannot start, a bad setting)
        if isinstance(err, OSError) and err.filename is not None:
            found = _os_error(err, home, key_file)
            if found is not None:
                return found
        sqlite3 = sys.modules.get("sqlite3")  # not loaded: no SQLite error can have been raised
        if database is not None and sqlite3 is not None and isinstance(err, sqlite3.DatabaseError):
            found = _sqlite_error(err, sqlite3, database)
            if found is not None:
                return found
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during (``from None`` only hides the latter)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        err = todo.pop(0)
        if id(err) in seen:
            continue
        seen.add(id(err))
        yield err
        if isinstance(err, BaseExceptionGroup):
            todo.extend(err.exceptions)
        todo.extend(e for e in (err.__cause__, err.__context__) if e is not None)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _os_error(err: OSError, home: Path, key_file: Path | None) -> DataDirUnusable | None:
    path = Path(os.path.abspath(os.fsdecode(err.filename)))
    if key_file is not None and path == Path(os.path.abspath(key_file.expanduser())):
        return data_dir_unusable("key_unreadable", path, detail=err.strerror or type(err).__name__, check="data key")
    if not _within(path, home) or err.errno not in _OS_PROBLEMS:
        return None
    problem = _OS_PROBLEMS[err.errno]
    if problem == "read_only":
        return data_dir_unusable("read_only", home)  # the whole disk: the folder is the one to name
    if problem == "cannot_create":
        blocker = next((p for p in path.parents if os.path.lexists(p)), path)
        return data_dir_unusable("cannot_create", path, detail=f"{blocker} is a file, not a folder")
    return data_dir_unusable(problem, path)


def _sqlite_error(err: BaseException, sqlite3: Any, database: Path) -> DataDirUnusable | None:
    text = str(err).lower()
    if "not a database" in text or "malformed" in text:
        return data_dir_unusable("not_a_database", database, check="database")
    if "full" in text:
        return data_dir_unusable("full", database, check="database")
    if "readonly" in text or "unable to open" in text:
        return data_dir_unusable(not_writable(database.parent), database, check="database")
    return None
