"""The records the store hands out (:class:`InstalledServer`, :class:`EnvKey`: key names and
secret flags, never values), and :func:`read_sqlite_servers`, which reads them from a SQLite
data dir with the standard library alone.

That reader (and :func:`read_sqlite_audit`) is for the read-only commands (``mcp-setup
list``/``show``/``logs``/``audit``):
they answer at the speed of ``python -c pass`` because they load neither SQLAlchemy nor the
vault. It opens the file read-only and never migrates; None means "ask the real store" (no
file yet, or a schema this reader does not know).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .catalog import CatalogServer, _read_only, parse_tools
from .pins import summarize
from .sampling import SAMPLING_DEFAULT, Sampling, sampling_of
from .schema import AUDIT, CLIENT_ENV, SERVERS, VERSIONS

__all__ = ["AuditEntry", "EnvKey", "InstalledServer", "read_sqlite_audit", "read_sqlite_servers"]


@dataclass(frozen=True)
class EnvKey:
    key: str
    secret: bool


@dataclass(frozen=True)
class InstalledServer:
    """An installed server as stored; its env appears only as key names and secret flags."""

    server_id: str
    qualified_name: str
    source: str
    version: str | None
    package_type: str
    launch_spec: dict[str, Any]
    enabled: bool
    installed_at: datetime
    installed_by: str
    tools_hash: str
    env_keys: tuple[EnvKey, ...]
    slug: str = ""
    title: str | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tools_recorded: bool = False  # False until a test or a connection has listed its tools
    # Pinning (pins.py): ``tools`` above is what is exposed; these say what was approved and what is offered.
    pinned_tools: tuple[dict[str, Any], ...] = ()
    live_tools: tuple[dict[str, Any], ...] = ()
    pinned_hash: str | None = None
    live_hash: str | None = None
    pinned_at: datetime | None = None
    pinned_version: str | None = None
    tools_state: str = "pinned"  # pinned | changed (waiting for the user) | rejected
    tools_diff: dict[str, Any] | None = None
    needs_sign_in: bool = False  # its OAuth sign-in could not be renewed
    member_keys: tuple[str, ...] = ()  # keys each member enters for themselves (values.py)
    #: The artifact's digest recorded at install (npm integrity, ``sha256:…``); None for servers installed before digests were recorded.
    artifact_digest: str | None = None
    #: May it ask the person's AI to write text (sampling.py); the gateway's relay enforces it.
    sampling: Sampling = SAMPLING_DEFAULT

    def tools_change(self) -> dict[str, Any] | None:
        """The waiting or rejected change for a face: ``{state, summary, diff}`` (names only)."""
        if self.tools_state not in ("changed", "rejected") or not self.tools_diff:
            return None
        return {"state": self.tools_state, "summary": summarize(self.tools_diff), "diff": self.tools_diff}

    def catalog_entry(self) -> CatalogServer:
        return CatalogServer(
            self.server_id,
            self.qualified_name,
            self.slug,
            self.title,
            self.enabled,
            self.tools,
            self.package_type,
            self.version,
        )


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit: what happened to which server, when, by whom; hashes, never values."""

    id: int
    at: datetime
    event: str  # installed | removed | enabled | disabled | pinned | tools_changed | tools_approved | tools_rejected | consent_approved | consent_denied
    server_id: str | None
    qualified_name: str | None
    actor: str
    old_hash: str | None = None
    new_hash: str | None = None
    detail: str | None = None

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "event": self.event,
            "server_id": self.server_id,
            "qualified_name": self.qualified_name,
            "actor": self.actor,
            "old_hash": self.old_hash,
            "new_hash": self.new_hash,
            "detail": self.detail,
        }


_SERVERS = SERVERS.select(
    "server_id",
    "qualified_name",
    "source",
    "version",
    "package_type",
    "launch_spec",
    "enabled",
    "installed_at",
    "installed_by",
    "tools_hash",
    "slug",
    "title",
    "tools_json",
    "pinned_tools_json",
    "live_tools_json",
    "pinned_hash",
    "live_hash",
    "pinned_at",
    "pinned_version",
    "tools_state",
    "tools_diff",
    "needs_sign_in",
    "member_keys",
    "artifact_digest",
    "sampling",
    order_by=("installed_at", "qualified_name"),
)
_ENV_KEYS = CLIENT_ENV.select("server_id", "key", "secret")
_AUDIT_COLUMNS = ("id", "at", "event", "server_id", "qualified_name", "actor", "old_hash", "new_hash", "detail")
_AUDIT_COUNTS = AUDIT.select("event", group_by=("event",), count=True)


def _utc(value: Any) -> datetime | None:
    """A stored datetime (SQLite keeps naive UTC text) as an aware UTC datetime."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def newest_migration() -> str:
    """The newest migration's revision, from the file names in ``migrations/versions`` (``0007_x.py``
    is revision ``0007_x``; a test checks it is ``engine.HEAD_REVISION``)."""
    return max(p.stem for p in (Path(__file__).parent / "migrations" / "versions").glob("[0-9]*.py"))


def _migrated(db_path: Path) -> bool:
    """The SQLite store exists and is at the newest revision (what these readers know how to read)."""
    version = _read_only(db_path, VERSIONS.select("version_num"))
    return bool(version) and version[0][0] == newest_migration()


def read_sqlite_servers(db_path: Path) -> list[InstalledServer] | None:
    """The installed servers of a SQLite store, oldest first, as :meth:`Servers.list` returns them;
    None when there is no store file, it is not migrated to the newest revision, or a row cannot be read."""
    if not _migrated(db_path):  # not migrated yet: the store migrates it
        return None
    rows = _read_only(db_path, _SERVERS)
    env_rows = _read_only(db_path, _ENV_KEYS)
    if rows is None or env_rows is None:
        return None
    env: dict[str, list[EnvKey]] = {}
    for server_id, key, secret in env_rows:
        env.setdefault(server_id, []).append(EnvKey(key, bool(secret)))
    try:
        return [
            InstalledServer(
                server_id=r[0],
                qualified_name=r[1],
                source=r[2],
                version=r[3],
                package_type=r[4],
                launch_spec=json.loads(r[5]),
                enabled=bool(r[6]),
                installed_at=_utc(r[7]),
                installed_by=r[8],
                tools_hash=r[9],
                slug=r[10],
                title=r[11],
                tools=parse_tools(r[12]),
                tools_recorded=r[12] is not None,
                pinned_tools=parse_tools(r[13]),
                live_tools=parse_tools(r[14]),
                pinned_hash=r[15],
                live_hash=r[16],
                pinned_at=_utc(r[17]),
                pinned_version=r[18],
                tools_state=r[19] or "pinned",
                tools_diff=json.loads(r[20]) if r[20] else None,
                needs_sign_in=bool(r[21]),
                member_keys=tuple(json.loads(r[22])) if r[22] else (),
                artifact_digest=r[23],
                sampling=sampling_of(r[24]),
                env_keys=tuple(sorted(env.get(r[0], ()), key=lambda e: e.key)),
            )
            for r in rows
        ]
    except (TypeError, ValueError):  # a row this reader cannot read: the real store can
        return None


def read_sqlite_audit(db_path: Path, limit: int | None = None) -> tuple[list[AuditEntry], dict[str, int]] | None:
    """The audit of a SQLite store as :meth:`AuditLog.entries` and :meth:`AuditLog.counts` return it
    (oldest first; the last ``limit`` rows when given), for ``mcp-setup audit``; None as
    :func:`read_sqlite_servers` says."""
    if not _migrated(db_path):
        return None
    rows = _read_only(db_path, AUDIT.select(*_AUDIT_COLUMNS, order_by=("id DESC",), limit=limit))
    pairs = _read_only(db_path, _AUDIT_COUNTS)
    if rows is None or pairs is None:
        return None
    try:
        entries = [AuditEntry(r[0], _utc(r[1]), *r[2:]) for r in reversed(rows)]
    except (TypeError, ValueError):
        return None
    counts = {str(event): int(n) for event, n in pairs}
    counts["total"] = sum(counts.values())
    return entries, counts
