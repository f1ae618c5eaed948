"""``mcp-setup add --secret KEY=-`` / ``--secret KEY=@FILE``: a script hands a
secret over without a terminal, and never on the command line (every process can read argv
with ``ps``): ``-`` is the whole of stdin, ``@FILE`` a file's contents, one trailing newline
dropped. The values live in this process only until the secret prompt asks for that key;
they are answered into the core (``broker.answer``) as a typed value would be.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["SecretArgError", "read_secret_args"]

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SecretArgError(ValueError):
    """A ``--secret`` argument this command refuses (exit 2), said in one line."""


def _strip_newline(text: str) -> str:
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def read_secret_args(items: Sequence[str], stdin: TextIO) -> dict[str, str]:
    """``{KEY: value}`` from ``KEY=-`` / ``KEY=@FILE`` arguments; a value itself in argv is refused."""
    out: dict[str, str] = {}
    if sum(item.endswith("=-") for item in items) > 1:
        raise SecretArgError("Only one --secret can be read from stdin (KEY=-); use KEY=@FILE for the others.")
    for item in items:
        key, sep, source = item.partition("=")
        if not sep or not _KEY.match(key):
            raise SecretArgError(f"--secret takes KEY=- or KEY=@FILE, not {key or item!r}.")
        if key in out:
            raise SecretArgError(f"--secret {key} is given twice.")
        if source == "-":
            out[key] = _strip_newline(stdin.read())
        elif source.startswith("@") and len(source) > 1:
            path = Path(source[1:]).expanduser()
            try:
                out[key] = _strip_newline(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:  # never the contents, not even a byte of them
                why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
                raise SecretArgError(f"--secret {key}: cannot read {path}: {why}.") from None
        else:  # the value itself: never (argv is public to every process on this machine)
            raise SecretArgError(
                f"--secret {key}: give the value as {key}=- (stdin) or {key}=@FILE, never on the "
                "command line, where every process can read it."
            )
        if not out[key]:
            raise SecretArgError(f"--secret {key}: the value is empty.")
    return out
