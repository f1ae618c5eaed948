"""Known failures of npx, uvx and docker, read from a server's error output, and their repairs.

A package that fails to start often says why, and sometimes how to fix it, in its runner's own
words: ``uvx`` names the executables a package does provide, an unpinned FastMCP
server under mcp 2.x says to pin ``mcp<2``, a package that needs a newer Python says which. A
person would have to dig for that; :func:`diagnose` reads the stderr tail and answers a
:class:`Diagnosis`:

- ``part``: which of the three failed — the **runner** (uvx/npx/docker itself, or what it
  needs: a Python, node, the Docker daemon), the **package** (not found, no such executable, a
  missing module), or the **server** (it ran, then exited: its own error);
- ``repair`` when one is known: a :class:`Repair` with a stable ``code`` the agent passes back
  (``repair: "uvx-executable:mcp_weather_server"``, ``"uvx-native-tls"``; several space-separated when a repaired launch
  fails again for another known reason), why, and the changed command.

:func:`apply_repair` turns a code into the repaired :class:`LaunchSpec` (refusing codes it does
not know or whose values are not plain names). The repaired command is what the consent shows
and the user approves; the test runs it and the install records it as tested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from setup_agent.errors import InvalidInput, SetupError

from .spec import LaunchSpec

__all__ = ["Diagnosis", "Repair", "apply_repair", "diagnose", "explain_failure", "launched"]

Part = Literal["runner", "package", "server"]

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9_.\-\[\]]+(?:[<>=!~]=?[0-9A-Za-z.*]+,?)*$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_PLATFORM = re.compile(r"^linux/(?:amd64|arm64|arm/v7)$")


@dataclass(frozen=True)
class Repair:
    """A changed launch for a known failure: ``code`` is what the agent passes back as ``repair``."""

    code: str
    why: str
    args: list[str]

    def command(self, spec: LaunchSpec) -> str:
        return " ".join([spec.command or "", *self.args]).strip()


@dataclass(frozen=True)
class Diagnosis:
    part: Part
    reason: str
    repair: Repair | None = None


def launched(spec: LaunchSpec) -> str:
    """``pypi package mcp-weather-server 1.0.0 (uvx)``: what was started, for every failure message."""
    kind = spec.package_type or "package"
    version = f" {spec.version}" if spec.version and spec.version != "latest" else ""
    runner = f" ({spec.runner or spec.command})" if spec.runner or spec.command else ""
    return f"{kind} package {spec.identifier or spec.command}{version}{runner}"


# --- repairs --------------------------------------------------------------------------------


def _package_index(spec: LaunchSpec) -> int | None:
    """Where the package itself (``name==1.0`` for uvx) sits in ``spec.args``."""
    ident = (spec.identifier or "").lower()
    if not ident:
        return None
    for i, arg in enumerate(spec.args):
        low = arg.lower()
        if low == ident or low.startswith((ident + "==", ident + "@", ident + "[")):
            return i
    return None


def _uvx_option(spec: LaunchSpec, *option: str) -> list[str] | None:
    at = _package_index(spec)
    if spec.command != "uvx" or at is None:
        return None
    if at > 0 and spec.args[at - 1] == "--from":
        at -= 1
    return [*spec.args[:at], *option, *spec.args[at:]]


def _repaired_args(spec: LaunchSpec, code: str) -> list[str] | None:
    kind, _, value = code.partition(":")
    if kind == "uvx-executable" and _NAME.match(value):
        at = _package_index(spec)
        if spec.command != "uvx" or at is None or "--from" in spec.args[:at]:
            return None
        return [*spec.args[:at], "--from", spec.args[at], value, *spec.args[at + 1 :]]
    if kind == "uvx-with" and _REQUIREMENT.match(value):
        return _uvx_option(spec, "--with", value)
    if kind == "uvx-native-tls" and not value:
        return None if "--native-tls" in spec.args else _uvx_option(spec, "--native-tls")
    if kind == "uvx-python" and _PYTHON.match(value):
        return _uvx_option(spec, "--python", value)
    if kind == "docker-platform" and _PLATFORM.match(value):
        if spec.command != "docker" or spec.args[:1] != ["run"] or "--platform" in spec.args:
            return None
        return ["run", "--platform", value, *spec.args[1:]]
    return None


def apply_repair(spec: LaunchSpec, code: str) -> LaunchSpec:
    """``spec`` with the repair ``code`` applied (several, space-separated, in order: a second
    failure's repair comes on top of the first); InvalidInput when one does not apply to it."""
    codes = code.split()
    for one in codes or [code]:
        args = _repaired_args(spec, one)
        if args is None:
            raise InvalidInput(
                f"The repair {one!r} does not apply to this launch ({spec.command or 'no command'}); pass the code "
                "a failed mcp_setup_test_connection offered in details.repair.code."
            )
        spec = spec.model_copy(update={"args": args})
    return spec


def _offer(spec: LaunchSpec, code: str, why: str) -> Repair | None:
    args = _repaired_args(spec, code)
    return None if args is None else Repair(code, why, args)


# --- signatures -----------------------------------------------------------------------------

_UVX_EXECUTABLE = re.compile(r"An executable named `([^`]+)` is not provided by package `([^`]+)`")
_UVX_USE = re.compile(r"Use `uvx --from \S+ ([A-Za-z0-9_.\-]+)` instead")
_UVX_AVAILABLE = re.compile(r"executables are available:\s*\n-\s*([A-Za-z0-9_.\-]+)")
_FASTMCP = re.compile(r"No module named '(mcp\.server\.fastmcp)'[^\n]*?(?:mcp 2\.x|pin 'mcp<2')?")
_PY_NEEDED = re.compile(r"(?:requires[- ]python|Python)\s*>=\s*(3\.\d{1,2})", re.IGNORECASE)
_PY_MISMATCH = re.compile(
    r"current Python version \([^)]*\) does not satisfy|requires-python|Requires-Python|No interpreter found for Python"
    r"|requires Python",
    re.IGNORECASE,
)
#: uv (rustls, its own roots) refused the index's certificate; ``--native-tls`` reads the
#: computer's store instead (every uv since 0.1; newer ones also call it ``--system-certs``).
_UNTRUSTED_CERT = re.compile(r"invalid peer certificate: UnknownIssuer|UnknownIssuer")
_MCP2_IMPORT = re.compile(
    r"ImportError: cannot import name '[^']+' from 'mcp(?:\.[a-z_.]+)?'"
    # mcp 1.x's low-level Server took its handlers by decorators; 2.x takes them in its constructor
    r"|AttributeError: 'Server' object has no attribute '(?:list_tools|call_tool|list_resources|read_resource"
    r"|list_resource_templates|list_prompts|get_prompt|subscribe_resource|unsubscribe_resource|set_logging_level"
    r"|completion|progress_notification)'"
)
#: A module the package's code imports but does not depend on → the distribution that brings it
#: (only well-known ones: a guessed name could be anyone's package).
_MODULE_DIST = {
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "yaml": "PyYAML",
    "bs4": "beautifulsoup4",
    "PIL": "Pillow",
    "requests": "requests",
    "httpx": "httpx",
    "pydantic": "pydantic",
    "aiohttp": "aiohttp",
    "uvicorn": "uvicorn",
    "starlette": "starlette",
    "pytz": "pytz",
}
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'|ImportError: ")
#: npm's own words for a package (E404) or a version (ETARGET) its registry does not have.
_NPM_NO_PACKAGE = re.compile(
    r"'(@?[^'@\s]+)(?:@[^'\s]*)?' is not in this registry|404 Not Found - GET https?://\S+?/(@[^/\s%]+(?:%2[fF]|/)[^/\s]+|[^/@\s]+)(?:\s|$)"
)
_NPM_NO_VERSION = re.compile(r"No matching version found for (@?[^@\s]+)@(\S+?)\.?(?:\s|$)")
_DOCKER_PLATFORM = re.compile(r"no matching manifest for (linux/[a-z0-9/]+)|exec format error", re.IGNORECASE)

#: (pattern, part, reason): failures whose repair is for the person (no command change).
_KNOWN: list[tuple[re.Pattern[str], Part, str]] = [
    # First: uv says it as a hint below "No solution found", npm as "your token seems to be
    # invalid… npm login", though the person's own login may be right. A server starts without
    # its runner where the download noted what it installed (direct.py); one that still starts
    # through it is never given the registry's login, which only the sandboxed download gets.
    (
        re.compile(r"npm (?:ERR!|error) code E40[13]\b|lack of valid authentication credentials", re.I),
        "runner",
        "its package registry wants a login, and the runner asked it again as the server started: mcp-setup "
        "gives a registry's login to the download only, never to a server's start, so this package cannot "
        "start through its runner from there (with no sandbox, the login in your .npmrc or index settings "
        "was refused)",
    ),
    (
        re.compile(r"No solution found when resolving|Because .* we can conclude"),
        "runner",
        "uvx could not resolve the package's requirements",
    ),
    (
        re.compile(r"Failed to fetch|error sending request for url|Could not connect to|dns error", re.I),
        "runner",
        "the runner could not reach its package index",
    ),
    (
        re.compile(r"npm (?:ERR!|error) (?:code )?E404|npm (?:ERR!|error) 404", re.I),
        "package",
        "npm has no such package (or version)",
    ),
    (
        re.compile(r"could not determine executable to run", re.I),
        "package",
        "npx found no executable in the package (it lists none, or several)",
    ),
    (
        re.compile(r"EBADENGINE|Unsupported engine|requires node|The engine \"node\" is incompatible", re.I),
        "runner",
        "the package needs another Node.js version",
    ),
    (
        re.compile(r"Cannot connect to the Docker daemon|Is the docker daemon running", re.I),
        "runner",
        "the Docker engine is not running",
    ),
    (
        re.compile(r"pull access denied|repository does not exist|manifest unknown|not found: manifest", re.I),
        "package",
        "the image was not found (or needs a login)",
    ),
    (
        re.compile(r"port is already allocated|address already in use", re.I),
        "runner",
        "the port the server needs is taken by another program",
    ),
    (re.compile(r"error: (?:Failed to|No such)|× Failed to", re.I), "runner", "uvx failed before starting the package"),
]


def diagnose(spec: LaunchSpec, stderr_tail: str) -> Diagnosis:
    """What failed, from ``stderr_tail`` (already redacted), and a repair when one is known."""
    tail = stderr_tail or ""
    if m := _UVX_EXECUTABLE.search(tail):
        exe = _UVX_USE.search(tail) or _UVX_AVAILABLE.search(tail)
        why = f"the package {m.group(2)} provides no executable named {m.group(1)}" + (
            f"; its executable is {exe.group(1)}" if exe else ""
        )
        repair = _offer(spec, f"uvx-executable:{exe.group(1)}", why) if exe else None
        return Diagnosis("package", why, repair)
    if _FASTMCP.search(tail) or _MCP2_IMPORT.search(tail):
        why = "the server is written for mcp 1.x and uvx installed mcp 2.x, whose API changed (FastMCP, McpError…)"
        return Diagnosis("package", why, _offer(spec, "uvx-with:mcp<2", why))
    if _UNTRUSTED_CERT.search(tail):
        why = (
            "uv does not trust the certificate its package index answered with (a network that inspects "
            "secure connections, with its own certificate authority in this computer's trust store)"
        )
        return Diagnosis("runner", why, _offer(spec, "uvx-native-tls", why + "; use this computer's certificates"))
    if spec.command == "uvx" and _PY_MISMATCH.search(tail) and (m := _PY_NEEDED.search(tail)):
        why = f"the package needs Python {m.group(1)} or newer, and uvx picked an older one"
        return Diagnosis("runner", why, _offer(spec, f"uvx-python:{m.group(1)}", why))
    if m := _DOCKER_PLATFORM.search(tail):
        why = "the image has no build for this machine's architecture"
        if m.group(1) and "amd64" not in m.group(1):
            return Diagnosis("package", why, _offer(spec, "docker-platform:linux/amd64", why + "; run its amd64 build"))
        return Diagnosis("package", why)
    if m := _NPM_NO_VERSION.search(tail):
        return Diagnosis("package", f"npm has no version {m.group(2)} of {m.group(1)}")
    if m := _NPM_NO_PACKAGE.search(tail):
        name = (m.group(1) or m.group(2) or "").replace("%2f", "/").replace("%2F", "/")
        return Diagnosis("package", f"npm has no package {name}")
    for pattern, part, reason in _KNOWN:
        if pattern.search(tail):
            return Diagnosis(part, reason)
    if m := _NO_MODULE.search(tail):
        module = (m.group(1) or "").split(".", 1)[0]
        why = f"the package's code imports {module or 'a module'} but does not depend on it"
        dist = _MODULE_DIST.get(module)
        return Diagnosis("package", why, _offer(spec, f"uvx-with:{dist}", why) if dist else None)
    return Diagnosis("server", "the server started and then exited with an error of its own")


_PART_WORDS = {"runner": "the runner failed", "package": "the package failed", "server": "the server failed"}


def explain_failure(exc: Exception, spec: LaunchSpec, prior: str | None = None) -> None:
    """Add to a failed start of a local package (in place): what was launched, which part failed
    and why, and the repair when one is known (``details.repair``: code, why, command). A launch
    already repaired (``prior``) is offered both repairs together."""
    if not spec.command or not isinstance(exc, SetupError):
        return
    what = launched(spec)
    exc.add_words(f" Launched: {what}.", own=True, launched=what)
    if exc.code == "exited":
        found = diagnose(spec, str(exc.details.get("stderr_tail") or ""))
        exc.add_words(f" {_PART_WORDS[found.part].capitalize()}:", own=True, failed=found.part)
        # the reason and the repair may quote the server's output: an echo there is scrubbed
        exc.add_words(f" {found.reason}.", own=False, reason=found.reason)
        if found.repair is not None:
            command = found.repair.command(spec)
            code = f"{prior} {found.repair.code}" if prior else found.repair.code
            exc.add_words(
                " mcp-setup can repair this launch: call mcp_setup_test_connection again with repair: ", own=True
            )
            exc.add_words(repr(code), own=False, repair={"code": code, "why": found.repair.why, "command": command})
            exc.add_words("; the user is shown the changed command (", own=True)
            exc.add_words(command, own=False)
            exc.add_words(") to approve.", own=True)
