"""The read-only commands' fast path: ``list``, ``show``, ``logs``, ``open`` and ``--help``
(and ``audit`` without ``--verify``) answer without loading pydantic, SQLAlchemy, the vault, the MCP SDK, the web stack or the
runtime, as the stdio face's ``tools/list`` does (tests/app/mcp/test_mcp_face_lazy_core.py).

* :class:`LightSettings` reads ``MCP_SETUP_HOME``, ``MCP_SETUP_DATABASE_URL``, ``MCP_SETUP_DATA_KEY_FILE`` and
  ``MCP_SETUP_SANDBOX`` from the environment as :class:`app.settings.Settings` does (names in any case, same
  defaults); any other setting a command asks for loads the real ``Settings`` then.
* :func:`reader` yields the SQLite data dir's servers read with the standard library
  (:func:`setup_agent.store.read_sqlite_servers`), or the real store when there is a
  ``database_url`` (PostgreSQL) or a file that reader does not know.
* Both, and :func:`open_store`, say a data folder that fails while they read it in the words
  ``mcp-setup`` uses before any command runs (app/cli/data_dir.py), so a command's own
  ``except SetupError`` prints that sentence.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from setup_agent.errors import DataDirUnusable
from setup_agent.store import SQLITE_FILE_NAME, Catalog, InstalledServer, read_sqlite_hidden, read_sqlite_servers

from .data_dir import explained

__all__ = [
    "EXIT_NOT_FOUND",
    "LightSettings",
    "NotFound",
    "open_store",
    "READ_ONLY",
    "reader",
    "resolve",
    "settings_error",
    "takes_light_settings",
    "translated",
]

#: The commands that take :class:`LightSettings` (they only read the store, the logs, serve's link).
READ_ONLY = frozenset({"list", "show", "logs", "audit", "open"})
_PREFIX = "MCP_SETUP_"


#: The exit code of every command given a server name that is not installed.
EXIT_NOT_FOUND = 3


class NotFound(Exception):
    """No installed server has that name (exit :data:`EXIT_NOT_FOUND`)."""


def takes_light_settings(args: Any) -> bool:
    """``list``, ``show``, ``logs``, ``audit`` and ``client list`` start on :class:`LightSettings`."""
    return args.command in READ_ONLY or (args.command == "client" and getattr(args, "client_command", "") == "list")


def settings_error(exc: Any) -> int:
    """Say which setting is wrong, by its variable name (a pydantic ValidationError); exit 2."""
    for err in exc.errors():
        name = _PREFIX + "_".join(str(p) for p in err["loc"]).upper()
        print(f"mcp-setup: {name}: {err['msg']}", file=sys.stderr)
    return 2


class LightSettings:
    """``home``, ``database_url``, ``data_key_file`` and ``sandbox`` as :class:`app.settings.Settings` reads them; every other
    attribute is the real ``Settings``' (loaded on first use; a wrong value exits 2 as ``main`` does)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        env = {k.upper(): v for k, v in environ.items() if k.upper().startswith(_PREFIX)}
        self.home = (
            Path(env[_PREFIX + "HOME"]) if env.get(_PREFIX + "HOME") else Path.home() / ".local" / "share" / "mcp-setup"
        )
        self.database_url: str | None = env.get(_PREFIX + "DATABASE_URL") or None
        key_file = env.get(_PREFIX + "DATA_KEY_FILE")
        self.data_key_file: Path | None = Path(key_file) if key_file else None
        self._real: Any = None
        if (sandbox := env.get(_PREFIX + "SANDBOX", "auto")) in ("auto", "bwrap", "landlock", "off"):
            self.sandbox = sandbox  # any other value: the real Settings says what is wrong with it

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._real is None:
            from pydantic import ValidationError

            from app.settings import Settings

            try:
                self._real = Settings()
            except ValidationError as exc:
                raise SystemExit(settings_error(exc)) from None
        return getattr(self._real, name)


class _SqliteServers:
    """The servers repository's reads, from rows read once."""

    def __init__(self, servers: list[InstalledServer]) -> None:
        self._servers = servers

    def list(self) -> list[InstalledServer]:
        return list(self._servers)

    def get(self, server_id: str) -> InstalledServer | None:
        return next((s for s in self._servers if s.server_id == server_id), None)

    def catalog(self) -> Catalog:
        return Catalog.build(s.catalog_entry() for s in self._servers)


class _SqliteReader:
    """What ``list``/``show``/``logs`` ask of a store (``store.servers``), from rows read once."""

    def __init__(self, servers: list[InstalledServer], hidden: dict[str, frozenset[str]] | None = None) -> None:
        self.servers = _SqliteServers(servers)
        self.hidden = hidden or {}  # the tools the user left out, by server id


def left_out(store: Any) -> dict[str, frozenset[str]]:
    """The tools the user left out at install or later, by server id."""
    if isinstance(store, _SqliteReader):
        return store.hidden
    return {sid: o.hidden_tools for sid, o in store.pins.offers().items() if o.hidden_tools}


@contextmanager
def open_store(settings: Any) -> Iterator[Any]:
    """The real store (SQLAlchemy, the vault): for writes, and reads the fast path cannot do."""
    with translated(settings):
        from app.data_key import open_vault

        vault = open_vault(settings)
        from setup_agent.store import Store

        with Store.for_data_dir(Path(settings.home).expanduser(), vault, settings.database_url) as store:
            yield store


@contextmanager
def reader(settings: Any) -> Iterator[Any]:
    """The installed servers for reading: stdlib SQLite when it can, else the real store."""
    if not settings.database_url:
        db = Path(settings.home).expanduser() / SQLITE_FILE_NAME
        if not db.exists():
            yield _SqliteReader([])  # nothing installed; and no data dir made just to say so
            return
        with translated(settings):
            servers = read_sqlite_servers(db)
            hidden = read_sqlite_hidden(db) if servers is not None else {}
        if servers is not None:
            yield _SqliteReader(servers, hidden)
            return
    with open_store(settings) as store:
        yield store


@contextmanager
def translated(settings: Any) -> Iterator[None]:
    """A failure of the data folder (the OS's, SQLite's, the store's) raised as its one sentence."""
    try:
        yield
    except DataDirUnusable:
        raise
    except Exception as exc:
        said = explained(exc, settings)
        if said is None:
            raise
        raise said from exc


def resolve(store: Any, name: str) -> InstalledServer:
    """The installed server ``name`` means (id, qualified name or slug); :class:`NotFound` names
    the close ones (a typo: ``show tikets`` -> tickets)."""
    found = store.servers.catalog().server(name)
    server = store.servers.get(found.server_id) if found is not None else None
    if server is None:
        import difflib

        servers = store.servers.list()
        near = [s.slug for s in servers if name.lower() in s.slug.lower() or name.lower() in s.qualified_name.lower()]
        near += [
            n
            for n in difflib.get_close_matches(name.lower(), [s.slug.lower() for s in servers], n=3, cutoff=0.6)
            if n not in near
        ]  # a typo: `show tikets` -> tickets
        hint = f" Did you mean {' or '.join(near[:3])}?" if near else ""
        raise NotFound(f"No installed server is named {name!r}.{hint} `mcp-setup list` shows them.")
    return server
