"""The agent's tool arguments at the edge, before they are parsed into a tool's model
(``tool_requests.py``): their size bounds, and how the agent's own strings are kept out of what
comes back (no guessing oracle).

A name the agent gives is echoed only when it matches :data:`NAME_PATTERN` (the models refuse any
other); an error built from upstream words has the agent's strings taken out
(:func:`without_echo`), always, by the redactor's length rules. Calls are logged with key names
only (:func:`describe_args`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from setup_agent.errors import InvalidInput, SetupError

__all__ = [
    "MAX_ARGUMENTS_CHARS",
    "MAX_NAME_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_VALUE_CHARS",
    "NAME_PATTERN",
    "check_bounds",
    "describe_args",
    "scrub",
    "scrubbed",
    "valid_name",
    "without_echo",
]

#: A name the agent gives (server names, ids, sources, package ids, setting names) may be echoed
#: in a result only when it matches this and is at most this long: anything else
#: is "an invalid name", never quoted, so an error cannot carry a guess back through the redactor.
NAME_PATTERN = re.compile(r"[A-Za-z0-9@_][A-Za-z0-9@._/:+\-]{0,199}")
MAX_NAME_CHARS = 200
MAX_QUERY_CHARS = 200
#: The agent's values are bounded: one string (a value or a key) at most this
#: long, and a tool's arguments at most this much text in all (strings, plus one for each
#: other item); beyond is ``invalid_input``, never quoted.
MAX_VALUE_CHARS = 1024
MAX_ARGUMENTS_CHARS = 16 * 1024


def check_bounds(args: object) -> None:
    """Refuse (``invalid_input``, unquoted) arguments with a string over :data:`MAX_VALUE_CHARS`
    or over :data:`MAX_ARGUMENTS_CHARS` in all; iterative, so any depth is fine."""
    total = 0
    stack = [args]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > MAX_VALUE_CHARS:
                raise InvalidInput(
                    f"An argument is too long: each value and name is at most {MAX_VALUE_CHARS} characters."
                )
            total += len(item)
        else:
            total += 1
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, (list, tuple)):
                stack.extend(item)
        if total > MAX_ARGUMENTS_CHARS:
            raise InvalidInput(f"The arguments are too large: at most {MAX_ARGUMENTS_CHARS} characters in all.")


def valid_name(value: object) -> bool:
    """May ``value`` be echoed as a name the agent gave?"""
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS and NAME_PATTERN.fullmatch(value) is not None


def scrub(message: str, text: str | None) -> str:
    """``message`` (built from upstream words) without the agent's ``text`` in it, by the
    redactor's length rules (under 4 characters nothing to hide, under 8 whole tokens only)."""
    if not text or not isinstance(message, str) or len(text) < 4:
        return message
    from urllib.parse import quote, quote_plus

    alts = []
    for form in sorted({text, quote(text, safe=""), quote_plus(text), quote(text)}, key=len, reverse=True):
        alt = re.escape(form)
        alts.append(alt if len(form) >= 8 else rf"(?<![A-Za-z0-9_]){alt}(?![A-Za-z0-9_])")
    return re.sub("|".join(alts), _YOUR_INPUT, message, flags=re.IGNORECASE)


#: The arguments whose text an error may otherwise quote (their values are the agent's).
_ECHOED_ARGS = ("qualified_name", "source", "package", "server_id", "server", "query", "key_name")
_YOUR_INPUT = "(the name you gave)"


def without_echo(error: SetupError, args: dict, *, known: Collection[str] = ()) -> dict[str, Any]:
    """``error`` as a dict, with the agent's own strings taken out of its text, always (not only
    when one holds a secret, which would itself answer the guess), by the redactor's length rules.
    Only what may quote the outside (a server, a registry, a library) is scrubbed: mcp-setup's own
    words added to the error (``own_spans``, ``own_details``) stay whole, so "pypi" from the
    agent never takes "pypi" out of "Launched: pypi package …".
    ``known``: names of ours (the configured registries) that the agent may have named: saying
    them back tells it nothing it did not already know."""
    out = error.to_dict()
    # Longer texts were refused unquoted before anything could echo them (names, query: 200).
    texts = sorted(
        {
            v.strip()
            for k in _ECHOED_ARGS
            if isinstance(v := args.get(k), str) and 0 < len(v.strip()) <= 1000 and v.strip() not in known
        },
        key=len,
        reverse=True,
    )
    if not texts:
        return out

    def clean(obj: Any) -> Any:
        if isinstance(obj, str):
            for text in texts:
                obj = scrub(obj, text)
            return obj
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    message, pieces, at = error.message, [], 0
    for start, end in sorted(error.own_spans):
        pieces += [clean(message[at:start]), message[start:end]]
        at = end
    out["message"] = "".join([*pieces, clean(message[at:])])
    if "details" in out:
        out["details"] = {k: v if k in error.own_details else clean(v) for k, v in out["details"].items()}
    return out


def scrubbed(error: dict[str, Any], text: str | None) -> dict[str, Any]:
    if isinstance(error.get("message"), str):
        error = {**error, "message": scrub(error["message"], text)}
    return error


def describe_args(args: dict) -> str:
    """Key names only: never a value of env or env_refs."""
    parts = []
    for key, value in args.items():
        if key in ("env", "env_refs") and isinstance(value, dict):
            parts.append(f"{key} keys={sorted(value)}")
        elif key in ("qualified_name", "source", "package", "server_id", "key_name", "query", "page", "page_size"):
            parts.append(f"{key}={value!r}")
        else:
            parts.append(f"{key}=…")
    return ", ".join(parts)
