"""Connecting an AI client to this mcp-setup: the one code path of ``mcp-setup client
connect|list`` and the page's "Use it in your AI client" part.

* :func:`launcher_command` / :func:`launcher_env`: how a client starts this mcp-setup, and the
  paths it must pass so that it finds this data dir (never a value).
* :func:`plan_connect`: the change ``connect``/``disconnect`` makes to a client's file: an
  :class:`~app.clients.files.Edit` (its diff, then ``write()``: backup, idempotent), or, for a
  file it cannot merge (malformed), the error and the entry to paste by hand.
* :func:`client_rows`: every known client, whether it is found on this machine (its config
  file or the folder it lives in), whether it is connected already, and its file's problem.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .files import CLIENTS, ClientConfig, ConfigError, Edit, client_config, entry_for, http_entry_for, is_ours

__all__ = [
    "GATEWAY_ENTRY",
    "NEW_TOKEN_PLACEHOLDER",
    "ClientTokens",
    "ConnectPlan",
    "client_rows",
    "connect_over_http",
    "launcher_command",
    "launcher_env",
    "plan_connect",
]

GATEWAY_ENTRY = "mcp-setup"
#: What a change shown before it is made holds where the new client token will go (none is made).
NEW_TOKEN_PLACEHOLDER = "<a new client token>"


class ClientTokens(Protocol):
    """The store's named tokens (``setup_agent.store.Tokens``), as connecting a client uses them."""

    def create(
        self, name: str, *, admin: bool = False, kind: Literal["member", "client"] = "member", replace: bool = False
    ) -> str: ...

    def revoke(self, name: str) -> None: ...


def launcher_command() -> list[str]:
    """How a client starts this mcp-setup: the running script, the one on PATH, or the module."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "mcp-setup" and argv0.exists():
        return [str(argv0.resolve())]
    found = shutil.which("mcp-setup")
    return [found] if found else [sys.executable, "-m", "app.cli"]


def launcher_env(settings: Any) -> dict[str, str]:
    """What a client must pass so that mcp-setup finds this data dir (paths only, never a value)."""
    env = {"MCP_SETUP_HOME": str(Path(settings.home).expanduser())}
    if settings.data_key_file is not None:
        env["MCP_SETUP_DATA_KEY_FILE"] = str(settings.data_key_file)
    if settings.database_url:
        env["MCP_SETUP_DATABASE_URL"] = settings.database_url  # may hold a DB password: the user's own file
    return env


@dataclass
class ConnectPlan:
    """What connecting (or disconnecting) ``config`` would change."""

    config: ClientConfig
    entries: dict[str, dict[str, Any]]
    edit: Edit | None  # None: the file cannot be merged (``error``), paste ``snippet`` by hand
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.edit is not None and self.edit.changed

    @property
    def snippet(self) -> str:
        return self.config.snippet(self.entries)

    @property
    def paste_where(self) -> str:
        spec = self.config.spec
        where = f"the [{spec.key}] tables of" if spec.style == "toml" else f'the "{spec.key}" object of'
        return f"To add it by hand, add this entry to {where} {self.config.path} (create it if it is not there):"


def plan_connect(
    config: ClientConfig,
    launcher: list[str],
    env: Mapping[str, str],
    *,
    disconnect: bool = False,
    per_server: Iterable[str] | None = None,
    http: tuple[str, str] | None = None,
) -> ConnectPlan:
    """The gateway entry (or one ``run SLUG`` entry per slug in ``per_server``; or with ``http``,
    ``(url, token)``, the entry that reaches a running serve's ``/mcp`` with that client token) for
    ``config``; entries ours from before that are no longer wanted are removed. Raises ConfigError
    for a disconnect from a file it cannot read (there is nothing to paste then), and for an
    ``http`` entry the client cannot take."""
    entries: dict[str, dict[str, Any]] = {}
    if not disconnect:
        if http is not None:
            entries = {GATEWAY_ENTRY: http_entry_for(config.client, *http)}
        elif per_server is not None:
            entries = {slug: entry_for(config.client, [*launcher, "run", slug], env) for slug in per_server}
        else:
            entries = {GATEWAY_ENTRY: entry_for(config.client, [*launcher, "mcp"], env)}
    try:
        current = config.servers()
    except ConfigError as exc:
        if disconnect:
            raise
        return ConnectPlan(config, entries, None, str(exc))
    ours = tuple(name for name, entry in current.items() if is_ours(entry, launcher))
    remove = ours if disconnect else tuple(n for n in ours if n not in entries)
    return ConnectPlan(config, entries, config.set_entries(entries, remove=remove))


def connect_over_http(
    config: ClientConfig, launcher: list[str], url: str, tokens: ClientTokens, *, apply: bool
) -> tuple[ConnectPlan, Path | None]:
    """``client connect CLIENT --http`` and the page's Connect over HTTP: the entry that reaches
    ``url`` (a serve's ``/mcp``) with a client token of the client's own. Without ``apply``, the
    change with :data:`NEW_TOKEN_PLACEHOLDER` where the token goes, nothing made. With it, a new
    token named for the client (its previous one revoked in the same step) is written in, and
    the backup returned; when the file cannot be written the new token is revoked again, so no
    token is left that no config holds. The plan returned then holds the placeholder, never the token."""
    trial = plan_connect(config, launcher, {}, http=(url, NEW_TOKEN_PLACEHOLDER))
    if trial.edit is None or not apply:
        return trial, None
    token = tokens.create(config.client, kind="client", replace=True)
    try:
        edit = plan_connect(config, launcher, {}, http=(url, token)).edit
        if edit is None:  # the file changed since the trial read it, and cannot be merged now
            raise ConfigError(f"{config.path} changed meanwhile and cannot be merged; nothing was written.")
        backup = edit.write()
    except BaseException:
        tokens.revoke(config.client)
        raise
    return trial, backup


def client_rows(
    home: Path, launcher: list[str], env: Mapping[str, str], platform: str = sys.platform
) -> list[dict[str, Any]]:
    """Every known client: ``{client, path, found, connected, up_to_date, problem}``. ``found``:
    its config file exists, or the client's own folder it goes in (not the home itself)."""
    rows = []
    for name in CLIENTS:
        config = client_config(name, home, platform)
        found = config.path.exists() or (config.path.parent.is_dir() and config.path.parent != home)
        row: dict[str, Any] = {
            "client": name,
            "path": str(config.path),
            "found": found,
            "connected": False,
            "up_to_date": False,
            "problem": None,
        }
        try:
            row["connected"] = any(is_ours(e, launcher) for e in config.servers().values())
            row["up_to_date"] = row["connected"] and not plan_connect(config, launcher, env).changed
        except ConfigError as exc:
            row["problem"] = str(exc)
        rows.append(row)
    return rows
