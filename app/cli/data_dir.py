"""Whether the data folder (``MCP_SETUP_HOME``) can be used: looked at before a command touches it,
and what a failure inside it means. Either way the person reads one sentence naming the path, the
cause and the fix (:func:`setup_agent.translation.data_dir_unusable`), never a traceback.

* :func:`problems` only looks (a folder that does not exist yet is not made): the folder is a
  folder you can write to, or one that can be created; the SQLite database, when there is one, is a
  SQLite file you can read and write; the data key file, when there is one, can be read. ``doctor``
  lists every problem; every other command stops at the first (:func:`check`).
* :func:`explained` maps an exception raised inside a command (the OS's, SQLite's, the store's) to
  the same sentences (:func:`setup_agent.translation.data_dir_error`).

Standard library only: ``list`` and ``show`` stay fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from setup_agent.errors import DataDirUnusable
from setup_agent.store import SQLITE_FILE_NAME
from setup_agent.translation import data_dir_error, data_dir_unusable, not_writable

__all__ = ["KEY_FILE_NAME", "check", "explained", "problems"]

#: The vault's key file in the data folder (``setup_agent.secrets.vault.KEY_FILE_NAME``; the vault
#: module loads cryptography, which the fast commands never do; a test keeps the two equal).
KEY_FILE_NAME = "data.key"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _paths(settings: Any) -> tuple[Path, Path | None, Path]:
    """The folder, its SQLite database (None: ``MCP_SETUP_DATABASE_URL`` names another) and the key file."""
    home = Path(os.path.abspath(Path(settings.home).expanduser()))
    database = None if settings.database_url else home / SQLITE_FILE_NAME
    key_file = Path(settings.data_key_file).expanduser() if settings.data_key_file else home / KEY_FILE_NAME
    return home, database, key_file


def problems(settings: Any) -> list[DataDirUnusable]:
    """Every problem of the data folder, its database and its key file, found without changing anything."""
    home, database, key_file = _paths(settings)
    found = _folder(home)
    if found:
        return found  # what is inside cannot be looked at (or there is nothing yet)
    if database is not None and database.exists():
        found += _database(database)
    if key_file.exists():
        found += _key_file(key_file)
    return found


def check(settings: Any) -> None:
    """Raise the first of :func:`problems`."""
    found = problems(settings)
    if found:
        raise found[0]


def explained(exc: BaseException, settings: Any) -> DataDirUnusable | None:
    """What ``exc`` means for this data folder, or None when it is about something else."""
    home, database, key_file = _paths(settings)
    return data_dir_error(exc, home, database, key_file)


def _folder(home: Path) -> list[DataDirUnusable]:
    if home.is_dir():
        if not os.access(home, os.W_OK | os.X_OK):
            return [data_dir_unusable(not_writable(home), home)]
        return []
    if os.path.lexists(home):
        return [data_dir_unusable("not_a_folder", home)]
    # Not there yet: it is made on first use, if its nearest existing parent lets it be.
    parent = next(p for p in home.parents if os.path.lexists(p) or p == p.parent)
    if not parent.is_dir():
        return [data_dir_unusable("cannot_create", home, detail=f"{parent} is a file, not a folder")]
    if not os.access(parent, os.W_OK | os.X_OK):
        why = "is on a read-only disk" if not_writable(parent) == "read_only" else "cannot be written by you"
        return [data_dir_unusable("cannot_create", home, detail=f"{parent} {why}")]
    return []


def _database(database: Path) -> list[DataDirUnusable]:
    try:
        with database.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError:
        problem = "not_a_database" if database.is_dir() else not_writable(database)
        return [data_dir_unusable(problem, database, check="database")]
    if head and head != _SQLITE_MAGIC:  # empty: a database being made (the store creates the file first)
        return [data_dir_unusable("not_a_database", database, check="database")]
    if not os.access(database, os.R_OK | os.W_OK):
        return [data_dir_unusable(not_writable(database), database, check="database")]
    return []


def _key_file(key_file: Path) -> list[DataDirUnusable]:
    try:
        with key_file.open("rb") as f:
            f.read(1)
    except OSError as exc:
        reason = "it is a folder" if key_file.is_dir() else (exc.strerror or type(exc).__name__).lower()
        return [data_dir_unusable("key_unreadable", key_file, detail=reason, check="data key")]
    return []
