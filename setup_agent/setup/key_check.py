"""The test checks the credential when it can.

Many servers start and list their tools with any key, checking it only when a tool is called
(Notion, Brave): a made-up key would pass a test that stops at ``tools/list``. So after it,
when the server offers a tool that says it is read-only (``annotations.readOnlyHint: true``)
and needs no arguments, the probe calls it once, through the same session (inside the same
sandbox), bounded in time. A result that is an authentication failure fails the test as
:class:`~setup_agent.errors.CredentialRejected`, naming the keys; any other answer lets it
pass. The result is only read here: a person sees a short excerpt, redacted, never the rest.

A tool that does not declare itself read-only is never called, whatever its name.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp import MCPError

from setup_agent.errors import CredentialRejected
from setup_agent.secrets import Redactor, SecretValue

__all__ = [
    "CHECK_SECONDS",
    "UNCHECKED_NOTE",
    "KeyCheck",
    "check_key",
    "checking_tool",
    "looks_like_auth_failure",
]

#: At most this long for the one call (less when the test's own deadline is nearer).
CHECK_SECONDS = 10.0
#: What a passing test says when the server offers nothing to check the key with.
UNCHECKED_NOTE = (
    "This server checks its key only when a tool is used: the test could not check it "
    "(no read-only tool without arguments to call). A wrong key shows at the first tool call."
)
#: An excerpt of the server's own words, at most this long (redacted).
EXCERPT_CHARS = 200

_AUTH_WORDS = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|unauthenticated|forbidden|not authori[sz]ed|authenticat|"
    r"(invalid|bad|wrong|incorrect|expired|revoked|missing)[\s_-]*(api[\s_-]*)?(key|token|credential|secret)|"
    r"(api[\s_-]*)?(key|token|credential)s?\b[^.\n]{0,20}\b(is|was|are)?\s*(invalid|not valid|expired|revoked|wrong)|"
    r"access[\s_-]*denied|permission[\s_-]*denied",
    re.IGNORECASE,
)


@dataclass
class KeyCheck:
    """How the test went about the key: ``checked`` with ``tool``, or not, with ``note``."""

    checked: bool
    tool: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"checked": self.checked}
        if self.tool is not None:
            out["tool"] = self.tool
        if self.note is not None:
            out["note"] = self.note
        return out


def checking_tool(tools: Iterable[Mapping[str, Any]]) -> str | None:
    """The first tool that declares ``readOnlyHint: true`` and requires no argument, if any."""
    for tool in tools:
        annotations = tool.get("annotations") or {}
        if not isinstance(annotations, Mapping) or annotations.get("readOnlyHint") is not True:
            continue
        schema = tool.get("inputSchema") or {}
        required = schema.get("required") if isinstance(schema, Mapping) else None
        if required:
            continue
        name = tool.get("name")
        if isinstance(name, str) and name:
            return name
    return None


def looks_like_auth_failure(text: str) -> bool:
    """Whether a tool's error text says the credential was refused (401, 403, invalid key, …)."""
    return bool(_AUTH_WORDS.search(text))


def secret_keys(values: Mapping[str, Any]) -> list[str]:
    """The launch's secret keys: those whose value is a masked ``SecretValue``."""
    return sorted(k for k, v in values.items() if isinstance(v, SecretValue))


async def check_key(
    client: Any, tools: Sequence[Mapping[str, Any]], values: Mapping[str, Any], redactor: Redactor, *, timeout: float
) -> KeyCheck:
    """Call the server's read-only, argument-free tool once; raise ``CredentialRejected`` when its
    answer is an authentication failure. A launch with no secret has no key to check."""
    keys = secret_keys(values)
    if not keys:
        return KeyCheck(checked=False)
    name = checking_tool(tools)
    if name is None:
        return KeyCheck(checked=False, note=UNCHECKED_NOTE)
    try:
        async with asyncio.timeout(max(0.5, timeout)):
            result = await client.call_tool(name, {})
    except TimeoutError:
        return KeyCheck(checked=False, tool=name, note=f"The key was not checked: `{name}` did not answer in time.")
    except MCPError as exc:
        if looks_like_auth_failure(exc.message or ""):
            raise _rejected(name, exc.message or "", keys, redactor) from None
        return KeyCheck(checked=False, tool=name, note=f"The key was not checked: `{name}` answered an error.")
    except Exception:  # an answer the client cannot read: the test stands on tools/list
        return KeyCheck(checked=False, tool=name, note=f"The key was not checked: `{name}` answered unreadably.")
    if not getattr(result, "is_error", False):
        return KeyCheck(checked=True, tool=name)
    text = " ".join(
        str(getattr(part, "text", "")) for part in getattr(result, "content", None) or () if hasattr(part, "text")
    )
    if looks_like_auth_failure(text):
        raise _rejected(name, text, keys, redactor)
    return KeyCheck(checked=False, tool=name, note=f"The key was not checked: `{name}` answered an error.")


def _rejected(tool: str, text: str, keys: list[str], redactor: Redactor) -> CredentialRejected:
    words = redactor.redact(" ".join(text.split()))[:EXCERPT_CHARS]
    named = ", ".join(keys)
    return CredentialRejected(
        f"The server refused the key ({named}) when the test called its read-only tool `{tool}`: {words!r}. "
        f"Check the value of {named} and enter it again.",
        key=keys[0] if len(keys) == 1 else None,
        details={"keys": keys, "tool": tool},
    )
