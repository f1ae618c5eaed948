"""The installed servers: install, replace (an update), enable or disable, remove, read.

:class:`Servers` is the repository over ``mcp_servers`` and ``mcp_client_env``: a server's row
and its settings, every value encrypted with the data key (through :class:`~setup_agent.store.values.Values`),
written in one transaction with its audit row and a bump of the change counter.
"""

from __future__ import annotations

import builtins
import json
import re
import secrets as _random
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, selectinload

from setup_agent.errors import AlreadyInstalled, InvalidInput, NotFound, StoreError
from setup_agent.secrets import SecretValue

from .audit import AuditLog
from .catalog import Catalog, make_slug
from .engine import Database, translated
from .models import ClientEnvRow, InstalledServer, ServerRow, _aware, _check_text, _record, _tools_json
from .pins import tools_hash as _pin_hash
from .sampling import SAMPLING, SAMPLING_DEFAULT, Sampling, sampling_of
from .tool_pins import Pins
from .values import Values

__all__ = ["EnvInput", "Servers"]

#: ``{KEY: (value, secret)}`` as :meth:`Servers.install` takes it.
EnvInput = Mapping[str, tuple[str | SecretValue, bool]]
_EnvItems = list[tuple[str, tuple[str | SecretValue, bool]]]


class Servers:
    """Repository of installed servers. Sync and thread-safe (one session per call)."""

    def __init__(self, database: Database, values: Values, pins: Pins, audit: AuditLog) -> None:
        self._db = database
        self._values = values
        self._pins = pins
        self._audit = audit

    # -- writes --------------------------------------------------------------------
    def install(
        self,
        *,
        qualified_name: str,
        source: str,
        version: str | None,
        package_type: str,
        launch_spec: Mapping[str, Any],
        installed_by: str,
        tools_hash: str,
        env: EnvInput,
        server_id: str | None = None,
        title: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        replaces: str | None = None,
        member_keys: Sequence[str] = (),
        artifact_digest: str | None = None,
        hidden_tools: Sequence[str] = (),
        audited_as: str | None = None,
        sampling: Sampling = SAMPLING_DEFAULT,
    ) -> InstalledServer:
        """Record a server and its env (``{KEY: (value, secret)}``) in one transaction.

        ``audited_as``: the principal that authenticated, written in the audit beside
        ``installed_by`` (``mcp:cursor (client:stdio via cursor)``).

        The server gets a gateway slug not used by any other installed server
        (:func:`~setup_agent.store.catalog.make_slug`); ``tools`` is the tool list its test saw.
        ``replaces``: the server id of the version this one replaces (``mcp-setup update``): its
        row and encrypted values are deleted in the same transaction, so a crash at
        any moment leaves exactly one of the two; its slug passes to the new row. ``member_keys``:
        the keys each member enters for themselves (``values.py``).
        ``artifact_digest``: the registry's digest of what was installed (setup_agent/launch/digests.py).
        ``hidden_tools``: the tools the user unticked in the consent, stored with the pin; an update keeps the ones of the
        version it replaces. ``sampling``: whether it may ask the person's AI to write text, as chosen
        in the consent (sampling.py); an update keeps the choice of the version it replaces.
        """
        if sampling not in SAMPLING:
            raise InvalidInput(f"sampling must be one of {', '.join(SAMPLING)}.")
        server_id = server_id or "srv_" + _random.token_hex(6)
        _check_fields(server_id=server_id, qualified_name=qualified_name, source=source, version=version)
        _check_fields(package_type=package_type, installed_by=installed_by, tools_hash=tools_hash)
        env_items = _env(env)
        spec_json = _spec_json(launch_spec, env_items)
        env_rows = [ClientEnvRow(key=k, value_encrypted=self._values.encrypt(v), secret=s) for k, (v, s) in env_items]
        row = ServerRow(
            server_id=server_id,
            qualified_name=qualified_name,
            source=source,
            version=version,
            package_type=package_type,
            launch_spec=spec_json,
            enabled=True,
            installed_at=_aware(self._db.clock()),
            installed_by=installed_by,
            tools_hash=tools_hash,
            env=env_rows,
            title=(title or None) and title[:512],
            tools_json=_tools_json(tools),
            member_keys=json.dumps(sorted(set(member_keys))) if member_keys else None,
            artifact_digest=(artifact_digest or None) and artifact_digest[:160],
            sampling=sampling,
        )
        if tools is not None:  # pinned: what the install test saw is what the user approved
            digest = _pin_hash(tools)
            row.pinned_tools_json = row.live_tools_json = row.tools_json
            row.pinned_hash = row.live_hash = digest
            row.pinned_at, row.pinned_version, row.tools_state = row.installed_at, version, "pinned"
        try:
            with translated(f"install {qualified_name}"), self._db.session() as s, s.begin():
                carried = (
                    self._values.carry_members(s, replaces, row) if replaces is not None else []
                )  # members' own keys
                if replaces is not None:
                    hidden_tools = [*hidden_tools, *self._pins.hidden_of(s, replaces)]
                    replaced = s.get(ServerRow, replaces)
                    if replaced is not None and replaced.sampling is not None:  # the person's choice stays
                        row.sampling = replaced.sampling
                    self._delete_replaced(s, replaces, qualified_name, installed_by)
                self._refuse_duplicate(s, qualified_name, server_id)
                row.slug = make_slug(qualified_name, set(s.scalars(select(ServerRow.slug))))
                s.add(row)
                s.flush()
                self._values.restore_members(s, row, carried)
                actor = f"{installed_by} ({audited_as})" if audited_as and audited_as != installed_by else installed_by
                self._audit.append(s, "installed", row, actor, new=row.pinned_hash)
                if hidden_tools:
                    self._pins.write_hidden(s, row, hidden_tools, installed_by)
                self._db.bump(s)
                result = _record(row)
        except StoreError as exc:
            if exc.details.get("cause") == "IntegrityError":  # lost a race with another writer
                with translated(f"install {qualified_name}"), self._db.session() as s:
                    self._refuse_duplicate(s, qualified_name, server_id)
            raise
        self._db.changed()
        return result

    def _delete_replaced(self, s: Session, server_id: str, qualified_name: str, actor: str) -> None:
        old = s.get(ServerRow, server_id)
        if old is None or old.qualified_name != qualified_name:
            raise NotFound(f"The server {server_id} to replace is not installed (any more).")
        self._audit.append(s, "removed", old, actor, old=old.pinned_hash, detail="replaced by a new version")
        s.execute(delete(ClientEnvRow).where(ClientEnvRow.server_id == server_id))
        s.execute(delete(ServerRow).where(ServerRow.server_id == server_id))
        s.flush()

    def set_enabled(self, server_id: str, enabled: bool, *, actor: str = "user") -> InstalledServer:
        """Turn a server on or off. Asked for what it already is, nothing changes and nothing is
        audited (``disable`` twice is one row)."""
        with translated(f"update server {server_id}"), self._db.session() as s, s.begin():
            current = s.get(ServerRow, server_id)
            if current is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            if bool(current.enabled) == bool(enabled):
                return _record(current)
            s.execute(update(ServerRow).where(ServerRow.server_id == server_id).values(enabled=bool(enabled)))
            self._db.bump(s)
            row = s.get_one(ServerRow, server_id, populate_existing=True)
            self._audit.append(s, "enabled" if enabled else "disabled", row, actor)
            result = _record(row)
        self._db.changed()
        return result

    def set_network(self, server_id: str, policy: Mapping[str, Any], *, actor: str = "user") -> InstalledServer:
        """The person's network policy for the server (``NetPolicy.to_dict()``), kept in its launch
        spec as ``sandbox_net``: its next start's proxy applies it (a running one is restarted
        by every gateway, its launch changed). Audited as ``network``; the policy it has already
        changes nothing and audits nothing."""
        with translated(f"update server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            before = json.loads(row.launch_spec)
            if before.get("sandbox_net") == dict(policy):
                return _record(row)
            spec = {**before, "sandbox_net": dict(policy)}
            row.launch_spec = json.dumps(spec, sort_keys=True, separators=(",", ":"))
            self._db.bump(s)
            self._audit.append(s, "network", row, actor, detail=json.dumps(dict(policy), sort_keys=True)[:500])
            result = _record(row)
        self._db.changed()
        return result

    def set_keep_running(self, server_id: str, keep: bool, *, actor: str = "user") -> InstalledServer:
        """The person's choice that the server is never stopped when idle (or is again), kept in its
        launch spec as ``keep_running``. Asked for what it already is, nothing is audited."""
        with translated(f"update server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            spec = json.loads(row.launch_spec)
            if bool(spec.get("keep_running")) == bool(keep):
                return _record(row)
            spec["keep_running"] = bool(keep)
            row.launch_spec = json.dumps(spec, sort_keys=True, separators=(",", ":"))
            self._db.bump(s)
            self._audit.append(s, "keep_running" if keep else "stop_when_idle", row, actor)
            result = _record(row)
        self._db.changed()
        return result

    def set_sampling(self, server_id: str, sampling: Sampling, *, actor: str) -> InstalledServer:
        """Whether the server may ask the person's AI to write text (sampling.py), audited as
        ``sampling`` with who changed it. Every gateway hears it through the change counter (its
        next sampling request is judged by it; the server is not restarted). The same choice
        again changes nothing and audits nothing."""
        if sampling not in SAMPLING:
            raise InvalidInput(f"sampling must be one of {', '.join(SAMPLING)}.")
        with translated(f"update server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            before = sampling_of(row.sampling)
            if before == sampling and row.sampling is not None:
                return _record(row)
            row.sampling = sampling
            self._db.bump(s)
            self._audit.append(s, "sampling", row, actor, detail=f"{before} -> {sampling}")
            result = _record(row)
        self._db.changed()
        return result

    def set_needs_sign_in(self, server_id: str, needed: bool) -> bool:
        """Remember that the server's sign-in could not be renewed (or works again); True when it
        changed. Not a change other processes act on (no counter bump): a face shows it."""
        with translated(f"update server {server_id}"), self._db.session() as s, s.begin():
            done = s.execute(
                update(ServerRow)
                .where(ServerRow.server_id == server_id, ServerRow.needs_sign_in.isnot(bool(needed)))
                .values(needs_sign_in=bool(needed))
            )
            return bool(done.rowcount)

    def remove(self, server_id: str, *, actor: str = "user") -> bool:
        """Delete the server and its env rows in one transaction; ``False`` if it was not there."""
        with translated(f"remove server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is not None:
                self._audit.append(s, "removed", row, actor, old=row.pinned_hash)
            s.execute(delete(ClientEnvRow).where(ClientEnvRow.server_id == server_id))
            done = s.execute(delete(ServerRow).where(ServerRow.server_id == server_id))
            if not done.rowcount:
                return False
            self._db.bump(s)
        self._db.changed()
        return True

    # -- reads ---------------------------------------------------------------------
    def get(self, server_id: str) -> InstalledServer | None:
        return self._one(ServerRow.server_id == server_id, f"read server {server_id}")

    def get_by_name(self, qualified_name: str) -> InstalledServer | None:
        return self._one(ServerRow.qualified_name == qualified_name, f"read server {qualified_name}")

    def list(self, *, enabled_only: bool = False) -> builtins.list[InstalledServer]:
        """Installed servers, oldest first."""
        query = select(ServerRow).options(selectinload(ServerRow.env))
        if enabled_only:
            query = query.where(ServerRow.enabled.is_(True))
        query = query.order_by(ServerRow.installed_at, ServerRow.qualified_name)
        with translated("list servers"), self._db.session() as s:
            return [_record(r) for r in s.scalars(query)]

    def catalog(self) -> Catalog:
        """The gateway catalog of every installed server (see :mod:`setup_agent.store.catalog`)."""
        return Catalog.build(server.catalog_entry() for server in self.list())

    def _one(self, where: Any, action: str) -> InstalledServer | None:
        with translated(action), self._db.session() as s:
            row = s.scalars(select(ServerRow).options(selectinload(ServerRow.env)).where(where)).one_or_none()
            return None if row is None else _record(row)

    @staticmethod
    def _refuse_duplicate(s: Session, qualified_name: str, server_id: str) -> None:
        taken = s.scalars(
            select(ServerRow).where((ServerRow.qualified_name == qualified_name) | (ServerRow.server_id == server_id))
        ).first()
        if taken is None:
            return
        what = qualified_name if taken.qualified_name == qualified_name else f"a server with the id {server_id}"
        raise AlreadyInstalled(
            f"{what} is already installed (server id {taken.server_id}). Remove it first "
            "(mcp_setup_remove), then install it again.",
            details={"server_id": taken.server_id, "qualified_name": taken.qualified_name},
        )


# --- helpers ----------------------------------------------------------------------------


_LIMITS = {
    "server_id": 64,
    "qualified_name": 512,
    "source": 64,
    "version": 128,
    "package_type": 32,
    "installed_by": 128,
    "tools_hash": 128,
}


def _check_fields(**fields: object) -> None:
    for name, value in fields.items():
        if not (name == "version" and value is None):
            _check_text(name, value, _LIMITS[name])


def _env(env: EnvInput) -> _EnvItems:
    items = builtins.list(env.items())
    for key, pair in items:
        _check_text("An env key", key, 128)
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], bool)):
            raise InvalidInput(f"The env entry for {key} must be a (value, secret: bool) pair.", key=key)
    return items


def _holds(text: str, value: str) -> bool:
    """``value`` in ``text``, byte-exactly: anywhere from 8 characters, as a whole token below
    (the redactor's rule, a short secret is refused from disk too)."""
    if len(value) >= 8:
        return value in text
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", text) is not None


def _spec_json(launch_spec: Mapping[str, Any], env: _EnvItems) -> str:
    try:
        text = json.dumps(dict(launch_spec), sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidInput("launch_spec must be a JSON object of plain values.") from None
    for key, (value, secret) in env:  # the launch spec is stored in clear: no secret value in it
        plain = value.reveal() if isinstance(value, SecretValue) else value
        if secret and isinstance(plain, str) and plain and _holds(text, json.dumps(plain)[1:-1]):
            raise InvalidInput(
                f"The launch spec contains the value of the secret {key}; use the template ${{{key}}} instead.",
                key=key,
            )
    return text
