"""The store's values: each server's settings and each member's own values, encrypted with the
data key, and the rotation of that key over all of them in one transaction.

A member is the name of a named token (``token:NAME``, see ``tokens.py``); the per-member keys of a
server are the ones every member of a team gateway enters for themselves. Every member write is
audited under the member's label and bumps the change counter, so every process on the database
restarts (rotation) or ends (removal, revocation) that member's downstream sessions. Values are
never returned in clear: each is a :class:`~setup_agent.secrets.SecretValue`, revealed only where
a process is started or the redactor needs it. The key itself lives in
:mod:`setup_agent.secrets.vault`.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import os
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sqlalchemy import delete, func, select, text, true, update
from sqlalchemy.orm import Session

from setup_agent.errors import InvalidInput, NotFound, StoreError
from setup_agent.secrets import SecretValue, Vault

from .audit import AuditLog
from .engine import Database, translated
from .models import ClientEnvRow, MemberValueRow, ServerRow, _aware, _check_text

__all__ = ["Values", "member_label"]

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
_MAX_VALUE = 64 * 1024


def member_label(member: str) -> str:
    """The audit's name of a member: ``token:alice``."""
    return f"token:{member}"


class Values:
    """Encrypted server settings, each member's own values, and key rotation over both."""

    def __init__(self, database: Database, vault: Vault, audit: AuditLog) -> None:
        self._db = database
        self._vault = vault
        self._audit = audit
        #: Keys this process's settings stamps (:meth:`env_stamps`): a stamp says nothing of a value elsewhere.
        self._stamp_key = os.urandom(32)

    @property
    def vault(self) -> Vault:
        """The vault values are encrypted with now (a rotation replaces it)."""
        return self._vault

    def encrypt(self, value: str | SecretValue) -> bytes:
        return self._vault.encrypt(value)

    def set_env_value(self, server_id: str, key: str, value: str | SecretValue, secret: bool) -> None:
        """Write one env value (encrypted), replacing it: e.g. a renewed OAuth sign-in."""
        _check_text("An env key", key, 128)
        token = self._vault.encrypt(value)
        with translated(f"update the env of server {server_id}"), self._db.session() as s, s.begin():
            _write_env(s, server_id, key, token, secret)

    def replace_env_value(
        self, server_id: str, key: str, value: str | SecretValue, secret: bool, *, actor: str
    ) -> None:
        """A person replaced one setting of an installed server (``mcp-setup rotate``, the page's
        Replace): written, audited (``secret_replaced``, the key's name only) and the change counter
        bumped in one transaction, so every process running the server restarts it with the new
        value (:meth:`env_stamps`)."""
        _check_text("An env key", key, 128)
        token = self._vault.encrypt(value)
        with translated(f"update the env of server {server_id}"), self._db.session() as s, s.begin():
            row = _write_env(s, server_id, key, token, secret)
            self._audit.append(s, "secret_replaced" if secret else "setting_replaced", row, actor, detail=key)
            self._db.bump(s)
        self._db.changed()

    def env_stamps(
        self, server_id: str | None = None, *, leaving_out: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, str]:
        """``{server_id: stamp}``: the stamp changes whenever one of that server's stored settings
        changes value (the gateway's sync reads it at every change, and restarts a running server
        whose stamp moved); a data key rotation, which re-encrypts every value, moves none. Each
        value counts by its digest under this process's own random key, never read in clear.
        Internal values (named ``__…``: a sign-in's grant, renewed in place by the running
        server's own refresh) are not counted, nor the keys ``leaving_out`` names for a server
        (its per-member keys, whose shared value a member's session never uses)."""
        query = select(ClientEnvRow.server_id, ClientEnvRow.key, ClientEnvRow.value_encrypted)
        if server_id is not None:
            query = query.where(ClientEnvRow.server_id == server_id)
        left = leaving_out or {}
        with translated("read the settings' stamps"), self._db.session() as s:
            rows = [r for r in s.execute(query).all() if not r[1].startswith("__") and r[1] not in left.get(r[0], ())]
        digests: dict[str, Any] = {}
        for sid, key, token in sorted(rows, key=lambda r: (r[0], r[1])):
            try:
                value = self._vault.decrypt(token).keyed_digest(self._stamp_key)
            except StoreError:  # stored under another data key: its bytes stand for it
                value = hashlib.sha256(bytes(token)).hexdigest()
            digest = digests.setdefault(sid, hashlib.sha256())
            digest.update(f"{key}\0{value}\0".encode())
        return {sid: digest.hexdigest()[:32] for sid, digest in digests.items()}

    def secret_values(self) -> builtins.list[tuple[str, str, SecretValue]]:
        """``(server_id, key, value)`` of every stored secret; one that cannot be decrypted is skipped."""
        with translated("read the stored secrets"), self._db.session() as s:
            rows = s.execute(
                select(ClientEnvRow.server_id, ClientEnvRow.key, ClientEnvRow.value_encrypted).where(
                    ClientEnvRow.secret.is_(True)
                )
            ).all()
        out = []
        for server_id, key, token in rows:
            try:
                out.append((server_id, key, self._vault.decrypt(token)))
            except StoreError:
                logging.getLogger(__name__).warning("the stored %s of server %s cannot be decrypted", key, server_id)
        return out

    def env_values(self, server_id: str) -> dict[str, SecretValue]:
        """Decrypted env of a server, every value a :class:`SecretValue` (secret or not)."""
        with translated(f"read the env of server {server_id}"), self._db.session() as s:
            server = s.get(ServerRow, server_id)
            if server is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            name = f"{server.qualified_name} ({server_id})"
            rows = s.execute(
                select(ClientEnvRow.key, ClientEnvRow.value_encrypted).where(ClientEnvRow.server_id == server_id)
            ).all()
        return {key: self._decrypt(token, name, key) for key, token in rows}

    def rotate_key(self, new_vault: Vault) -> int:
        """Re-encrypt every stored value, and the audit chain's key, with ``new_vault`` in one
        transaction; returns how many values.

        Nothing changes unless all of them were re-encrypted: a failure midway (a value this
        store's vault cannot decrypt, the database) rolls back and leaves the old values intact.
        Afterwards this store uses ``new_vault``.
        """
        done: set[int] = set()
        self._audit.ensure_key()  # a chain not keyed yet is sealed first, under the audit's own lock
        with translated("re-encrypt the stored values"), self._db.session() as s, s.begin():
            if s.get_bind().dialect.name == "postgresql":  # no install may slip in under the old key
                s.execute(text(f"LOCK TABLE {ClientEnvRow.__tablename__} IN SHARE ROW EXCLUSIVE MODE"))
            while True:  # SQLite: rows inserted before our first write are caught on the next pass
                rows = s.execute(
                    select(ClientEnvRow.id, ClientEnvRow.key, ClientEnvRow.value_encrypted, ServerRow.qualified_name)
                    .join(ServerRow, ServerRow.server_id == ClientEnvRow.server_id)
                    .where(ClientEnvRow.id.not_in(done) if done else true())
                    .order_by(ClientEnvRow.id)
                ).all()
                if not rows:
                    break
                for row_id, key, token, name in rows:
                    value = self._decrypt(token, name, key)
                    s.execute(
                        update(ClientEnvRow)
                        .where(ClientEnvRow.id == row_id)
                        .values(value_encrypted=new_vault.encrypt(value))
                    )
                    done.add(row_id)
            members = s.execute(select(MemberValueRow.id, MemberValueRow.key, MemberValueRow.value_encrypted)).all()
            for row_id, key, token in members:  # each member's own values
                value = self._decrypt(token, "a member's value", key)
                s.execute(
                    update(MemberValueRow)
                    .where(MemberValueRow.id == row_id)
                    .values(value_encrypted=new_vault.encrypt(value))
                )
            self._audit.reencrypt_key(s, new_vault)  # the audit chain's key too: the chain stays valid
        self._vault = new_vault
        self._audit.use_vault(new_vault)
        return len(done) + len(members)

    def _decrypt(self, token: bytes, server_name: str, key: str) -> SecretValue:
        try:
            return self._vault.decrypt(token)
        except StoreError as exc:
            raise StoreError(
                f"The setting {key} of {server_name} cannot be decrypted with this data key ({exc.message}). "
                "Start mcp-setup with the key it was stored with (MCP_SETUP_DATA_KEY_FILE; `mcp-setup key export` "
                "on a machine that has it), or remove the server and install it again.",
                key=key,
                details={"server": server_name},
            ) from None

    # -- each member's own values ----------------------------------------------------

    def set_member_keys(self, server_id: str, keys: Iterable[str], *, actor: str) -> builtins.list[str]:
        """Mark exactly ``keys`` of the server as per member (an empty list: none). A member's value
        of a key no longer marked is deleted. Returns the keys, sorted."""
        wanted = sorted(set(_check_keys(keys)))
        with translated(f"update the member keys of server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id, with_for_update=True)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            before = json.loads(row.member_keys) if row.member_keys else []
            if before == wanted:
                return wanted
            row.member_keys = json.dumps(wanted) if wanted else None
            dropped = [k for k in before if k not in wanted]
            if dropped:
                s.execute(
                    delete(MemberValueRow).where(MemberValueRow.server_id == server_id, MemberValueRow.key.in_(dropped))
                )
            self._audit.append(s, "member_keys", row, actor, detail="per member: " + (", ".join(wanted) or "none"))
            self._db.bump(s)
        self._db.changed()
        return wanted

    def set_member_value(self, server_id: str, member: str, key: str, value: str | SecretValue) -> None:
        """Store (or replace: a rotation) ``member``'s own value of ``key``, audited as theirs."""
        _check_text("A member", member, 64)
        plain = value.reveal() if isinstance(value, SecretValue) else value
        if not isinstance(plain, str) or not plain.strip() or len(plain) > _MAX_VALUE:
            raise InvalidInput(f"Enter a value for {key}; it cannot be empty.", key=key)
        token = self._vault.encrypt(value)
        with translated(f"store a member's value of server {server_id}"), self._db.session() as s, s.begin():
            row = s.get(ServerRow, server_id)
            if row is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            if key not in (json.loads(row.member_keys) if row.member_keys else []):
                raise InvalidInput(f"{key} is not a per-member key of {row.qualified_name}.", key=key)
            found = s.scalars(
                select(MemberValueRow).where(
                    MemberValueRow.server_id == server_id, MemberValueRow.member == member, MemberValueRow.key == key
                )
            ).first()
            now = _aware(self._db.clock())
            if found is None:
                s.add(
                    MemberValueRow(server_id=server_id, member=member, key=key, value_encrypted=token, updated_at=now)
                )
            else:
                found.value_encrypted, found.updated_at = token, now
            self._audit.append(
                s,
                "member_value_set" if found is None else "member_value_rotated",
                row,
                member_label(member),
                detail=f"{key} of {member_label(member)}",
            )
            self._db.bump(s)
        self._db.changed()

    def forget_member_values(
        self, member: str, server_id: str | None = None, key: str | None = None, *, actor: str | None = None
    ) -> int:
        """Delete ``member``'s values (of one server, or all; one key, or every key); returns how
        many. Audited per server."""
        with translated("remove a member's values"), self._db.session() as s, s.begin():
            done = self.forget_member_in(s, member, server_id, key, actor=actor or member_label(member))
        if done:
            self._db.changed()
        return done

    def forget_member_in(
        self, s: Session, member: str, server_id: str | None = None, key: str | None = None, *, actor: str
    ) -> int:
        """:meth:`forget_member_values` inside the caller's transaction (``Tokens.revoke``)."""
        where = [MemberValueRow.member == member] + ([MemberValueRow.server_id == server_id] if server_id else [])
        where += [MemberValueRow.key == key] if key else []
        rows = s.execute(select(MemberValueRow.server_id, MemberValueRow.key).where(*where)).all()
        if not rows:
            return 0
        s.execute(delete(MemberValueRow).where(*where))
        for sid in sorted({sid for sid, _ in rows}):
            server = s.get(ServerRow, sid)
            if server is not None:
                keys = ", ".join(sorted(k for i, k in rows if i == sid))
                self._audit.append(s, "member_value_removed", server, actor, detail=f"{keys} of {member_label(member)}")
        self._db.bump(s)
        return len(rows)

    def carry_members(self, s: Session, old_id: str, new: ServerRow) -> builtins.list[tuple[Any, ...]]:
        """An update (``install(replaces=…)``): the new row keeps the old one's per-member keys and
        the members' values (still encrypted), before the old row and its cascade go."""
        old = s.get(ServerRow, old_id)
        if old is None or not old.member_keys:
            return []
        if not new.member_keys:
            new.member_keys = old.member_keys
        keep = set(json.loads(new.member_keys))
        rows = s.scalars(select(MemberValueRow).where(MemberValueRow.server_id == old_id)).all()
        return [(r.member, r.key, r.value_encrypted, r.updated_at) for r in rows if r.key in keep]

    @staticmethod
    def restore_members(s: Session, new: ServerRow, carried: builtins.list[tuple[Any, ...]]) -> None:
        for member, key, token, at in carried:
            s.add(MemberValueRow(server_id=new.server_id, member=member, key=key, value_encrypted=token, updated_at=at))

    def member_values(self, server_id: str, member: str) -> dict[str, SecretValue]:
        """``member``'s own values of the server (only for that member's own session)."""
        with translated(f"read a member's values of server {server_id}"), self._db.session() as s:
            rows = s.execute(
                select(MemberValueRow.key, MemberValueRow.value_encrypted).where(
                    MemberValueRow.server_id == server_id, MemberValueRow.member == member
                )
            ).all()
        return {key: self._decrypt(token, server_id, key) for key, token in rows}

    def member_keys_set(self, member: str) -> dict[str, builtins.list[str]]:
        """``{server_id: [key, …]}`` of the keys ``member`` has a value for (names only)."""
        with translated("list a member's keys"), self._db.session() as s:
            rows = s.execute(
                select(MemberValueRow.server_id, MemberValueRow.key).where(MemberValueRow.member == member)
            ).all()
        out: dict[str, builtins.list[str]] = {}
        for sid, key in sorted(rows):
            out.setdefault(sid, []).append(key)
        return out

    def members_of(self, server_id: str) -> dict[str, builtins.list[str]]:
        """``{member: [key, …]}`` of the members with an own value of the server (names only)."""
        with translated(f"list the members of server {server_id}"), self._db.session() as s:
            rows = s.execute(
                select(MemberValueRow.member, MemberValueRow.key).where(MemberValueRow.server_id == server_id)
            ).all()
        out: dict[str, builtins.list[str]] = {}
        for member, key in sorted(rows):
            out.setdefault(member, []).append(key)
        return out

    def member_stamps(self) -> dict[tuple[str, str], str]:
        """``{(server_id, member): stamp}``: the stamp changes whenever that member's values of that
        server do (no decryption: the sessions' sync reads it at every change)."""
        query = select(
            MemberValueRow.server_id,
            MemberValueRow.member,
            func.count(),
            func.max(MemberValueRow.updated_at),
            func.max(MemberValueRow.id),
        ).group_by(MemberValueRow.server_id, MemberValueRow.member)
        with translated("read the member values' stamps"), self._db.session() as s:
            rows = s.execute(query).all()
        return {(sid, member): f"{count}:{latest}:{top}" for sid, member, count, latest, top in rows}

    def member_secrets(self) -> builtins.list[tuple[str, str, SecretValue]]:
        """``(member, key, value)`` of every member's value, for the redactor; an undecryptable one is skipped."""
        with translated("read the member values"), self._db.session() as s:
            rows = s.execute(select(MemberValueRow.member, MemberValueRow.key, MemberValueRow.value_encrypted)).all()
        out = []
        for member, key, token in rows:
            try:
                out.append((member, key, self._vault.decrypt(token)))
            except StoreError:
                logging.getLogger(__name__).warning("a member's %s cannot be decrypted with this data key", key)
        return out


def _check_keys(keys: Iterable[str]) -> builtins.list[str]:
    out = builtins.list(keys)
    for key in out:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidInput("A per-member key is a setting's name: letters, digits, '_', '.', '-'.")
    return out


def _write_env(s: Session, server_id: str, key: str, token: bytes, secret: bool) -> ServerRow:
    """In ``s``'s transaction: the env value ``key`` of ``server_id`` set to ``token`` (encrypted),
    replacing the one there or added; the server's row (:class:`NotFound` when it has none)."""
    row = s.get(ServerRow, server_id)
    if row is None:
        raise NotFound(f"No installed server has the id {server_id}.")
    done = s.execute(
        update(ClientEnvRow)
        .where(ClientEnvRow.server_id == server_id, ClientEnvRow.key == key)
        .values(value_encrypted=token, secret=secret)
    )
    if not done.rowcount:
        s.add(ClientEnvRow(server_id=server_id, key=key, value_encrypted=token, secret=secret))
    return row
