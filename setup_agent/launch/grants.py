"""The sandbox in words and the paths a user grants (the mechanism is ``sandbox.py``).

:func:`profile_words` is what the consent, ``mcp-setup show``, ``doctor`` and the web page say a
server can see; :func:`granted_paths` the paths a server's settings name, which the sandbox lets
it read and write (stored with the install as ``LaunchSpec.sandbox_grants``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

__all__ = ["NOT_ISOLATED", "PATH_FORMATS", "granted_paths", "profile_words"]

#: What every face says where no sandbox runs.
NOT_ISOLATED = "not isolated on this system"

#: Formats of a setting whose value is a path the server is meant to use: the official registry's
#: ``filepath``, an MCPB ``user_config`` of type ``directory`` or ``file``.
PATH_FORMATS = ("filepath", "directory", "file")
#: A setting named for a folder or a path (``vaultPath``, ``directory``, ``notes_dir``, ``vault``),
#: matched on its name lower-cased without separators: many entries give no ``format``.
PATH_NAME = re.compile(r"(path|paths|dir|dirs|directory|directories|folder|folders|root)$|^vault")
#: Flags whose value is a folder (``--directory ${input:dir}``).
PATH_FLAGS = ("--directory", "--dir", "--folder", "--path", "--root", "--vault")


def granted_paths(keys: Sequence[object], values: Mapping[str, object], args: Sequence[str] = ()) -> list[str]:
    """The paths the user's settings name (a filesystem server's directory, a vault, a config
    file): the sandbox lets the server read and write them. Shown in the consent, stored with the
    install; only absolute paths that exist, never ``/`` (a grant holding mcp-setup's data dir shows
    all of it but that dir: :meth:`Sandbox.wrap`). Plain settings only: a secret (masked) is no
    path to show.

    A setting is a path by its ``format`` (:data:`PATH_FORMATS`), by its name (:data:`PATH_NAME`),
    by the flag before it in ``args`` (:data:`PATH_FLAGS`), or because its value is a folder that
    exists here."""
    out: list[str] = []
    flagged = _after_path_flags(args)
    for key in keys:
        name = getattr(key, "name", "")
        if getattr(key, "secret", False):
            continue
        given = values.get(name)
        value = given.strip() if isinstance(given, str) else ""
        path = os.path.normpath(value) if value else ""
        if not path or not os.path.isabs(path) or path == "/" or not os.path.exists(path) or path in out:
            continue
        named = PATH_NAME.search(re.sub(r"[-_.\s]", "", name.lower())) is not None
        if getattr(key, "format", None) in PATH_FORMATS or named or name in flagged or os.path.isdir(path):
            out.append(path)
    return out


def _after_path_flags(args: Sequence[str]) -> set[str]:
    """The keys whose template follows a folder flag (``--directory ${dir}``, ``--dir=${dir}``)."""
    found: set[str] = set()
    for i, arg in enumerate(args):
        flag, eq, rest = arg.partition("=")
        if flag not in PATH_FLAGS:
            continue
        text = rest if eq else (args[i + 1] if i + 1 < len(args) else "")
        found |= set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}", text))
    return found


def profile_words(
    mechanism: str,
    *,
    grants: Sequence[str] = (),
    network: bool = True,
    container: bool = False,
    reads: Sequence[str] = (),
    user_home: str | None = None,
    chosen_reads: Sequence[str] = (),
) -> list[str]:
    """The profile in plain words, for the consent, ``mcp-setup show``, ``doctor`` and the page.

    ``reads``: files the command line names; those in ``user_home`` are kept from the server (the
    sandbox never shows a file of the person's home that an entry names), and said so."""
    home = os.path.normpath(user_home) if user_home else None
    kept = [r for r in reads if home is not None and (r == home or r.startswith(home.rstrip("/") + "/"))]
    reads = [*(r for r in reads if r not in kept), *chosen_reads]
    if container:
        return ["It runs in its own container (Docker), which isolates it; mcp-setup adds no sandbox of its own."]
    if mechanism == "none":
        return [f"Sandbox: none — {NOT_ISOLATED}. It runs as you and can read what you can read."]
    chosen = ", ".join(grants)
    return [
        "It can read and write: its own folder" + (f", the folder you chose ({chosen})" if grants else "") + ".",
        *([f"It can read: {', '.join(reads)} (named in its command line)."] if reads else []),
        *([f"Kept from it: {', '.join(kept)} (named in its command line, but in your home folder)."] if kept else []),
        "It cannot see: your home folder, other servers, mcp-setup's keys and database.",
        "Network: " + ("allowed." if network else "none."),
        f"Sandbox: {mechanism}.",
    ]
