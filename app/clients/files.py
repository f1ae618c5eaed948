"""MCP clients' config files: where each one is, its format, and a careful merge.

==============  ==============================================  ===================  =================
client          Linux / macOS path (``~`` = home)               Windows path         servers under
==============  ==============================================  ===================  =================
claude-desktop  ~/.config/Claude/claude_desktop_config.json;    %APPDATA%\\Claude\\   ``mcpServers``
                macOS ~/Library/Application Support/Claude/…    claude_desktop_…
claude-code     ~/.claude.json (user scope)                     %USERPROFILE%\\…      ``mcpServers``
cursor          ~/.cursor/mcp.json                              %USERPROFILE%\\…      ``mcpServers``
vscode          ~/.config/Code/User/mcp.json; macOS             %APPDATA%\\Code\\     ``servers``
                ~/Library/Application Support/Code/User/mcp.json  User\\mcp.json
windsurf        ~/.codeium/windsurf/mcp_config.json             %USERPROFILE%\\…      ``mcpServers``
zed             ~/.config/zed/settings.json (both)              %APPDATA%\\Zed\\…     ``context_servers``
gemini          ~/.gemini/settings.json                         %USERPROFILE%\\…      ``mcpServers``
codex           ~/.codex/config.toml (TOML)                     %USERPROFILE%\\…      ``[mcp_servers.X]``
==============  ==============================================  ===================  =================

A merge changes only the entries it names: the file is parsed (a malformed one is reported
with its path and line and left untouched), the entry is set or removed, and the file is
written back only when something changed (so connecting twice is a no-op), after a copy
``<file>.bak-<UTC timestamp>`` of the old one (0600, created exclusively). A symlinked file is
written through to its target; the new text goes to an exclusive temp file in the target's dir
that takes the target's mode, then replaces it. Every file is edited as text, so the other
entries and settings stay byte for byte and the diff shows only what changed: a JSON file
(JSONC too: VS Code's and Zed's ``//`` and ``/* */`` comments and trailing commas are read and
kept) has the entry's own text set or cut out (:mod:`app.clients.jsonc`); the TOML file has a
table ``[mcp_servers.NAME]`` appended or cut out.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import stat
import sys
import tempfile
import textwrap
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .jsonc import JsoncError, remove_member, set_member
from .jsonc import loads as jsonc_loads

__all__ = [
    "CLIENTS",
    "http_entry_for",
    "ClientConfig",
    "ConfigError",
    "Edit",
    "client_config",
    "entry_for",
    "is_ours",
    "looks_secret",
    "secret_reason",
]


class ConfigError(Exception):
    """A config file that cannot be merged safely (malformed, wrong shape)."""


@dataclass(frozen=True)
class ClientSpec:
    key: str  # where the servers live in the file
    linux: str
    mac: str
    windows: str
    style: str = "plain"  # plain | vscode | zed | claude-code | toml


CLIENTS: dict[str, ClientSpec] = {
    "claude-desktop": ClientSpec(
        "mcpServers",
        ".config/Claude/claude_desktop_config.json",
        "Library/Application Support/Claude/claude_desktop_config.json",
        "%APPDATA%\\Claude\\claude_desktop_config.json",
    ),
    "claude-code": ClientSpec(
        "mcpServers", ".claude.json", ".claude.json", "%USERPROFILE%\\.claude.json", "claude-code"
    ),
    "cursor": ClientSpec("mcpServers", ".cursor/mcp.json", ".cursor/mcp.json", "%USERPROFILE%\\.cursor\\mcp.json"),
    "vscode": ClientSpec(
        "servers",
        ".config/Code/User/mcp.json",
        "Library/Application Support/Code/User/mcp.json",
        "%APPDATA%\\Code\\User\\mcp.json",
        "vscode",
    ),
    "windsurf": ClientSpec(
        "mcpServers",
        ".codeium/windsurf/mcp_config.json",
        ".codeium/windsurf/mcp_config.json",
        "%USERPROFILE%\\.codeium\\windsurf\\mcp_config.json",
    ),
    "zed": ClientSpec(
        "context_servers",
        ".config/zed/settings.json",
        ".config/zed/settings.json",
        "%APPDATA%\\Zed\\settings.json",
        "zed",
    ),
    "gemini": ClientSpec(
        "mcpServers", ".gemini/settings.json", ".gemini/settings.json", "%USERPROFILE%\\.gemini\\settings.json"
    ),
    "codex": ClientSpec(
        "mcp_servers", ".codex/config.toml", ".codex/config.toml", "%USERPROFILE%\\.codex\\config.toml", "toml"
    ),
}


def entry_for(client: str, command: list[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The client's entry that runs ``command`` (stdio)."""
    style = CLIENTS[client].style
    entry: dict[str, Any] = {"command": command[0], "args": list(command[1:])}
    if style in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    if style == "zed":
        entry = {"source": "custom", **entry}
    if env:
        entry["env"] = dict(env)
    return entry


#: An entry that reaches a local ``mcp-setup serve``'s ``/mcp`` (what ``client connect --http`` writes).
_OUR_URL = re.compile(r"http://(127\.0\.0\.1|localhost):\d{1,5}/mcp")
#: Where each kind of config file puts a streamable-HTTP server's address.
_URL_KEYS = ("url", "httpUrl", "serverUrl")


def http_entry_for(client: str, url: str, token: str) -> dict[str, Any]:
    """The client's entry that reaches ``url`` (streamable HTTP) with ``token`` as its bearer.

    Raises ConfigError for a client whose config file takes no HTTP servers."""
    if client == "claude-desktop":
        raise ConfigError(
            "Claude Desktop's config file takes only local servers: connect it without --http "
            "(it starts `mcp-setup mcp` itself)."
        )
    style = CLIENTS[client].style
    headers = {"Authorization": f"Bearer {token}"}
    if client == "gemini":
        return {"httpUrl": url, "headers": headers}
    if client == "windsurf":
        return {"serverUrl": url, "headers": headers}
    if style in ("vscode", "claude-code"):
        return {"type": "http", "url": url, "headers": headers}
    if style == "toml":
        return {"url": url, "http_headers": headers}
    return {"url": url, "headers": headers}


@dataclass(frozen=True)
class Edit:
    path: Path
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=str(self.path),
                tofile=f"{self.path} (new)",
            )
        )

    def target(self) -> Path:
        """The file a write changes: a symlinked config is written through (the link stays a link)."""
        return Path(os.path.realpath(self.path)) if self.path.is_symlink() else self.path

    def write(self, now: datetime | None = None) -> Path | None:
        """Write the new text (after a timestamped 0600 backup of the old file); returns the backup.

        Through a symlink to its target; the temp file is made exclusively with a
        random name in the target's own dir and takes the target's mode, so a link planted in a
        shared dir is never followed; the backup is created exclusively, 0600."""
        if not self.changed:
            return None
        target = self.target()
        target.parent.mkdir(parents=True, exist_ok=True)
        backup, mode = None, 0o600
        if target.exists():
            stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
            backup = target.with_name(f"{target.name}.bak-{stamp}")
            _write_exclusive(backup, target.read_bytes())
            mode = stat.S_IMODE(target.stat().st_mode)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".mcp-setup-tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self.after)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return backup


def _write_exclusive(path: Path, data: bytes) -> None:
    """A new file at ``path`` (never through a link, never over a file), 0600, holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


class ClientConfig:
    """One client's config file: read its entries, and compute edits."""

    def __init__(self, client: str, path: Path) -> None:
        if client not in CLIENTS:
            raise ConfigError(f"Unknown client {client!r}; known: {', '.join(CLIENTS)}.")
        self.client, self.spec, self.path = client, CLIENTS[client], path
        self.text = path.read_text(encoding="utf-8") if path.exists() else ""

    # -- reading ------------------------------------------------------------------------
    def servers(self) -> dict[str, dict[str, Any]]:
        """The entries under the servers key, by name."""
        if self.spec.style == "toml":
            data = self._toml()
        else:
            data = self._json()
        servers = data.get(self.spec.key) or {}
        if not isinstance(servers, dict):
            raise ConfigError(f"{self.path}: {self.spec.key!r} is not an object; it was left untouched.")
        return {k: v for k, v in servers.items() if isinstance(v, dict)}

    def _json(self) -> dict[str, Any]:
        if not self.text.strip():
            return {}
        try:
            data = jsonc_loads(self.text)
        except JsoncError as exc:
            raise ConfigError(
                f"{self.path}, line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}); it was left "
                "untouched. Fix it, or add the entry by hand."
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(f"{self.path}, line 1: the file is not a JSON object; it was left untouched.")
        return data

    def _toml(self) -> dict[str, Any]:
        try:
            return tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            line = f", line {m.group(1)}" if m else ""
            raise ConfigError(f"{self.path}{line}: not valid TOML ({exc}); it was left untouched.") from None

    def snippet(self, entries: Mapping[str, dict[str, Any]]) -> str:
        """``entries`` as a person would paste them into this client's file, by hand."""
        if self.spec.style == "toml":
            return "\n\n".join(_toml_table(name, entry) for name, entry in entries.items()).rstrip("\n")
        # the entries themselves, to go inside the existing servers object (not a second top-level one)
        return textwrap.dedent(json.dumps(dict(entries), indent=2, ensure_ascii=False)[1:-1].strip("\n"))

    # -- editing ------------------------------------------------------------------------
    def set_entries(self, entries: Mapping[str, dict[str, Any]], remove: tuple[str, ...] = ()) -> Edit:
        """Set each of ``entries`` and remove ``remove``; every other entry stays as it is."""
        current = self.servers()  # validates first: a malformed file is never rewritten
        if self.spec.style == "toml":
            return Edit(self.path, self.text, self._toml_text(current, entries, remove))
        data = self._json()
        before = data.get(self.spec.key) or {}
        servers = dict(before)
        for name in remove:
            servers.pop(name, None)
        servers.update({k: dict(v) for k, v in entries.items()})
        if servers == before and (servers or self.spec.key not in data):
            return Edit(self.path, self.text, self.text)
        if not self.text.strip():
            return Edit(self.path, self.text, json.dumps({self.spec.key: servers}, indent=2, ensure_ascii=False) + "\n")
        after, path = self.text, (self.spec.key,)
        for name in remove:
            after = remove_member(after, path, name)
        for name, entry in entries.items():
            if before.get(name) != entry or not isinstance(data.get(self.spec.key), dict):
                after = set_member(after, path, name, dict(entry))
        if jsonc_loads(after) != {**data, self.spec.key: servers}:  # what we wrote must say exactly that
            raise ConfigError(f"{self.path}: mcp-setup could not edit this file in place; it was left untouched.")
        return Edit(self.path, self.text, after)

    def _toml_text(
        self, current: dict[str, Any], entries: Mapping[str, dict[str, Any]], remove: tuple[str, ...]
    ) -> str:
        text = self.text
        for name in (*remove, *(n for n in entries if current.get(n) != _toml_entry(entries[n]))):
            if name in current:
                text = _cut_toml_table(text, name)
        for name, entry in entries.items():
            if current.get(name) == _toml_entry(entry):
                continue
            text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + _toml_table(name, entry)
        tomllib.loads(text)  # what we wrote must parse
        return text


def _toml_entry(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k in ("command", "args", "env", "url", "http_headers")}


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _toml_inline(table: Mapping[str, str]) -> str:
    return "{ " + ", ".join(f"{_toml_key(k)} = {json.dumps(v)}" for k, v in table.items()) + " }"


def _toml_table(name: str, entry: dict[str, Any]) -> str:
    lines = [f"[mcp_servers.{_toml_key(name)}]"]
    if "url" in entry:  # streamable HTTP: the address and its headers
        lines.append(f"url = {json.dumps(entry['url'])}")
        if entry.get("http_headers"):
            lines.append(f"http_headers = {_toml_inline(entry['http_headers'])}")
        return "\n".join(lines) + "\n"
    lines.append(f"command = {json.dumps(entry['command'])}")
    lines.append("args = [" + ", ".join(json.dumps(a) for a in entry.get("args", [])) + "]")
    if entry.get("env"):
        lines.append(f"env = {_toml_inline(entry['env'])}")
    return "\n".join(lines) + "\n"


def _cut_toml_table(text: str, name: str) -> str:
    """Remove ``[mcp_servers.NAME]`` (and its sub-tables) up to the next other table header."""
    header = re.compile(r"^\s*\[\s*mcp_servers\s*\.\s*(\"[^\"]*\"|[A-Za-z0-9_-]+)\s*(\.[^\]]*)?\]\s*$")
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("["):
            m = header.match(line)
            table = json.loads(m.group(1)) if m and m.group(1).startswith('"') else (m.group(1) if m else None)
            skipping = table == name
        if not skipping:
            out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "".join(out))


def client_config(client: str, home: Path, platform: str = sys.platform) -> ClientConfig:
    """The client's config file under ``home`` (the user's home) for this platform."""
    if client not in CLIENTS:
        raise ConfigError(f"Unknown client {client!r}; known: {', '.join(CLIENTS)}.")
    spec = CLIENTS[client]
    if platform == "win32":
        return ClientConfig(client, Path(os.path.expandvars(spec.windows)))
    rel = spec.mac if platform == "darwin" else spec.linux
    return ClientConfig(client, home / rel)


#: A setting whose name says it holds a secret: ``MY_DB_PASS``, ``PGPWD``, ``X_TOKEN`` …
_SECRET_NAME = re.compile(r"PASS|PWD|SECRET|TOKEN|KEY|CREDENTIAL|AUTH|PRIVATE|(?:^|_)PAT(?:$|_)", re.I)


def secret_reason(key: str, value: object) -> str | None:
    """Why ``value`` under ``key`` looks like a secret (its name, or its value: a known key
    prefix, a JWT, a URL with a password, a long high-entropy token), or None. A ``${…}``
    template is not a value."""
    from setup_agent.secrets import looks_like_secret

    if not isinstance(value, str) or not value.strip() or "${" in value:
        return None
    if _SECRET_NAME.search(key):
        return "its name says it is a secret"
    if looks_like_secret(value):
        return "its value looks like a key or token"
    return None


def looks_secret(key: str, value: object) -> bool:
    """A literal value that :func:`secret_reason` finds secret-looking (any length)."""
    return secret_reason(key, value) is not None


def is_ours(entry: dict[str, Any], launcher: list[str]) -> bool:
    """An entry that runs this launcher's ``mcp`` or ``run``, or reaches a local serve's ``/mcp``:
    one that ``client connect`` wrote."""
    if any(isinstance(entry.get(key), str) and _OUR_URL.fullmatch(entry[key]) for key in _URL_KEYS):
        return True
    cmd = [entry.get("command"), *(entry.get("args") or [])]
    return cmd[: len(launcher)] == launcher and len(cmd) > len(launcher) and cmd[len(launcher)] in ("mcp", "run")


def updated_words(path: Path, backup: Path | None) -> str:
    """How a config file written by :meth:`Edit.write` is told: ``Updated PATH``, and its backup."""
    return f"Updated {path}" + (f" (the old file is {backup})" if backup else "")
