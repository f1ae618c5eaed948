"""Each member's own keys: which keys of a server every member of a team gateway
enters for themselves, and each member's value of them, encrypted with the data key.

A mixin of :class:`~setup_agent.store.database.Store` (its vault, sessions, audit and change
marker). A member is the name of a named token (``token:NAME``, see ``tokens.py``). Every write
is audited under the member's label and bumps the change counter, so every process on the
database restarts (rotation) or ends (removal, revocation) that member's downstream sessions.
Values are never returned in clear except to :meth:`member_values` (the launch of that member's
own session) and :meth:`member_secrets` (the redactor).
"""

from __future__ import annotations

import builtins
import json
import logging
import re
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from setup_agent.errors import InvalidInput, NotFound, StoreError
from setup_agent.secrets import SecretValue

from .engine import translated
from .models import MemberValueRow, ServerRow, _aware, _check_text

__all__ = ["MemberValues", "member_label"]

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
_MAX_VALUE = 64 * 1024


def member_label(member: str) -> str:
    """The audit's name of a member: ``token:alice``."""
    return f"token:{member}"


class MemberValues:
    """Per-member keys of installed servers and each member's encrypted values."""

    def set_member_keys(self, server_id: str, keys: Iterable[str], *, actor: str) -> builtins.list[str]:
        """Mark exactly ``keys`` of the server as per member (an empty list: none). A member's value
        of a key no longer marked is deleted. Returns the keys, sorted."""
        wanted = sorted(set(_check_keys(keys)))
        with translated(f"update the member keys of server {server_id}"), self._session() as s, s.begin():
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
            self._audit(s, "member_keys", row, actor, detail="per member: " + (", ".join(wanted) or "none"))
            self._bump(s)
        self._changed()
        return wanted

    def set_member_value(self, server_id: str, member: str, key: str, value: str | SecretValue) -> None:
        """Store (or replace: a rotation) ``member``'s own value of ``key``, audited as theirs."""
        _check_text("A member", member, 64)
        plain = value.reveal() if isinstance(value, SecretValue) else value
        if not isinstance(plain, str) or not plain.strip() or len(plain) > _MAX_VALUE:
            raise InvalidInput(f"Enter a value for {key}; it cannot be empty.", key=key)
        token = self._vault.encrypt(value)
        with translated(f"store a member's value of server {server_id}"), self._session() as s, s.begin():
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
            now = _aware(self._clock())
            if found is None:
                s.add(
                    MemberValueRow(server_id=server_id, member=member, key=key, value_encrypted=token, updated_at=now)
                )
            else:
                found.value_encrypted, found.updated_at = token, now
            self._audit(
                s,
                "member_value_set" if found is None else "member_value_rotated",
                row,
                member_label(member),
                detail=f"{key} of {member_label(member)}",
            )
            self._bump(s)
        self._changed()

    def forget_member_values(
        self, member: str, server_id: str | None = None, key: str | None = None, *, actor: str | None = None
    ) -> int:
        """Delete ``member``'s values (of one server, or all; one key, or every key); returns how
        many. Audited per server."""
        with translated("remove a member's values"), self._session() as s, s.begin():
            done = self._forget_member_in(s, member, server_id, key, actor=actor or member_label(member))
        if done:
            self._changed()
        return done

    def _forget_member_in(
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
                self._audit(s, "member_value_removed", server, actor, detail=f"{keys} of {member_label(member)}")
        self._bump(s)
        return len(rows)

    def _carry_members(self, s: Session, old_id: str, new: ServerRow) -> builtins.list[tuple[Any, ...]]:
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
    def _restore_members(s: Session, new: ServerRow, carried: builtins.list[tuple[Any, ...]]) -> None:
        for member, key, token, at in carried:
            s.add(MemberValueRow(server_id=new.server_id, member=member, key=key, value_encrypted=token, updated_at=at))

    def member_values(self, server_id: str, member: str) -> dict[str, SecretValue]:
        """``member``'s own values of the server (only for that member's own session)."""
        with translated(f"read a member's values of server {server_id}"), self._session() as s:
            rows = s.execute(
                select(MemberValueRow.key, MemberValueRow.value_encrypted).where(
                    MemberValueRow.server_id == server_id, MemberValueRow.member == member
                )
            ).all()
        return {key: self._decrypt(token, server_id, key) for key, token in rows}

    def member_keys_set(self, member: str) -> dict[str, builtins.list[str]]:
        """``{server_id: [key, …]}`` of the keys ``member`` has a value for (names only)."""
        with translated("list a member's keys"), self._session() as s:
            rows = s.execute(
                select(MemberValueRow.server_id, MemberValueRow.key).where(MemberValueRow.member == member)
            ).all()
        out: dict[str, builtins.list[str]] = {}
        for sid, key in sorted(rows):
            out.setdefault(sid, []).append(key)
        return out

    def members_of(self, server_id: str) -> dict[str, builtins.list[str]]:
        """``{member: [key, …]}`` of the members with an own value of the server (names only)."""
        with translated(f"list the members of server {server_id}"), self._session() as s:
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
        with translated("read the member values' stamps"), self._session() as s:
            rows = s.execute(query).all()
        return {(sid, member): f"{count}:{latest}:{top}" for sid, member, count, latest, top in rows}

    def member_secrets(self) -> builtins.list[tuple[str, str, SecretValue]]:
        """``(member, key, value)`` of every member's value, for the redactor; an undecryptable one is skipped."""
        with translated("read the member values"), self._session() as s:
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
