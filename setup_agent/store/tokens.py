"""Named bearer tokens: a team's members (``token:<name>``) and the person's own HTTP AI clients
(``client:<name>``, made by ``mcp-setup client connect CLIENT --http``).

A token is ``mcps_`` + 32 random bytes (URL-safe base64), shown once by :meth:`Tokens.create`;
the table ``mcp_tokens`` (model :class:`~setup_agent.store.models.TokenRow`) holds only its SHA-256 (a
slow hash buys nothing for 256 random bits). :meth:`Tokens.verify` is one indexed query, made
on every request, so a revocation is seen at once by every instance on the same database.
"""

from __future__ import annotations

import hashlib
import re
import secrets as _random
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import select, update

from setup_agent.errors import InvalidInput, NotFound

from .engine import Database, translated
from .models import TokenRow
from .values import Values

__all__ = ["TOKEN_PREFIX", "TokenInfo", "TokenKind", "Tokens", "hash_token"]

TOKEN_PREFIX = "mcps_"
#: ``member``: a team member's token; ``client``: one of the person's own AI clients. Neither
#: approves anything (a member token made with ``--admin`` does).
TokenKind = Literal["member", "client"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    name: str
    created_at: datetime
    revoked_at: datetime | None
    admin: bool = False
    kind: TokenKind = "member"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _info(row: TokenRow) -> TokenInfo:
    kind: TokenKind = "client" if row.kind == "client" else "member"
    return TokenInfo(row.name, row.created_at, row.revoked_at, bool(row.admin), kind)


class Tokens:
    """The token repository; a revocation forgets the member's own values (``values.py``)."""

    def __init__(self, database: Database, values: Values) -> None:
        self._db = database
        self._values = values

    def create(self, name: str, *, admin: bool = False, kind: TokenKind = "member", replace: bool = False) -> str:
        """A new token for ``name`` (returned once; only its hash is kept). A revoked name can be reused.

        A member token is a client credential; ``admin=True`` makes one that may also approve.
        ``kind="client"``: one of the person's own AI clients (never admin). ``replace``: an active
        token of the same name and kind is revoked in the same transaction (a client reconnected);
        a token of the other kind is never replaced."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidInput(
                "A token name is 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit."
            )
        if kind == "client" and admin:
            raise InvalidInput("A client's token never approves: it cannot be an admin token.")
        token = TOKEN_PREFIX + _random.token_urlsafe(32)
        with translated(f"create the token {name}"), self._db.session() as s, s.begin():
            row = s.get(TokenRow, name, with_for_update=True)
            if row is not None and row.revoked_at is None:
                same_kind = (row.kind or "member") == kind
                if not (replace and same_kind):
                    raise InvalidInput(
                        f"A token named {name} already exists; revoke it first (mcp-setup token revoke {name})."
                    )
            stored_kind = "client" if kind == "client" else None
            if row is None:
                s.add(
                    TokenRow(
                        name=name,
                        token_hash=hash_token(token),
                        created_at=self._db.clock(),
                        admin=bool(admin),
                        kind=stored_kind,
                    )
                )
            else:
                row.token_hash, row.created_at, row.revoked_at = hash_token(token), self._db.clock(), None
                row.admin, row.kind = bool(admin), stored_kind
        return token

    def list(self) -> list[TokenInfo]:
        with translated("list the tokens"), self._db.session() as s:
            rows = s.scalars(select(TokenRow).order_by(TokenRow.name)).all()
            return [_info(r) for r in rows]

    def revoke(self, name: str) -> None:
        """Refuse ``name``'s token from now on, on every instance; in the same transaction the
        member's own values are deleted (audited), so every instance ends their sessions."""
        with translated(f"revoke the token {name}"), self._db.session() as s, s.begin():
            done = s.execute(
                update(TokenRow)
                .where(TokenRow.name == name, TokenRow.revoked_at.is_(None))
                .values(revoked_at=self._db.clock())
            )
            if not done.rowcount:
                raise NotFound(f"No active token is named {name} (mcp-setup token list lists them).")
            forgot = self._values.forget_member_in(s, name, actor=f"token:{name} (revoked)")
        if forgot:
            self._db.changed()

    def verify(self, token: str | None) -> str | None:
        """The name of the active token ``token``, or None."""
        found = self.lookup(token)
        return found.name if found is not None else None

    def lookup(self, token: str | None) -> TokenInfo | None:
        """The active token ``token`` (its name and whether it is an admin's), or None."""
        if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        query = select(TokenRow).where(TokenRow.token_hash == hash_token(token), TokenRow.revoked_at.is_(None))
        with translated("check a token"), self._db.session() as s:
            row = s.scalars(query).first()
            return _info(row) if row is not None else None
