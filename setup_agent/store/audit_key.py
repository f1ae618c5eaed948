"""The audit chain's key: random, and in the database only as a token of the data key's vault.

Each link of the audit's chain (``audit.py``) is an HMAC-SHA256 under this key, so a chain
recomputed by someone who can write the database but does not hold the data key fails
``mcp-setup audit --verify``. The key is 32 random bytes made once (the seal, ``audit.py``) and
kept in ``mcp_audit_key`` (one row, id 1) as a Fernet token of the vault
(``setup_agent/secrets/vault.py``), like every stored value.

Random and stored rather than derived from the data key: a rotation of the data key would
change a derived key, and every link made under the old one would then have to be recomputed,
which the audit's append-only rules refuse (and should). The stored key is re-encrypted under
the new data key instead, in the rotation's own transaction (``Values.rotate_key``), so the
chain survives a rotation unchanged.

The token also holds the id of the first row keyed under the key and when the chain was sealed:
authenticated with the key, so nobody without the data key can move the boundary between the
rows chained before the key and the rows keyed under it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets as _random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from setup_agent.errors import StoreError
from setup_agent.secrets import Vault

from .models import AuditKeyRow, _aware

__all__ = ["ChainKey", "new_chain_key", "read_chain_key", "reencrypt_chain_key", "write_chain_key"]

_ROW_ID = 1


@dataclass(frozen=True, repr=False)
class ChainKey:
    """The chain's key (never in a ``repr``), the first row keyed under it, and when it was made."""

    secret: bytes
    keyed_from: int
    sealed_at: datetime

    def mac(self, message: bytes) -> str:
        """The link of ``message``: HMAC-SHA256 under the key, as 64 hex digits."""
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def __repr__(self) -> str:
        return f"ChainKey(keyed_from={self.keyed_from}, sealed_at={self.sealed_at.isoformat()})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("ChainKey cannot be pickled")


def new_chain_key(keyed_from: int, sealed_at: datetime) -> ChainKey:
    """A fresh random key for the rows from id ``keyed_from`` on."""
    return ChainKey(_random.token_bytes(32), keyed_from, _aware(sealed_at))


def read_chain_key(s: Session, vault: Vault) -> ChainKey | None:
    """The chain's key, decrypted with ``vault``; None when the chain has none yet. A token that
    ``vault`` cannot open is a :class:`StoreError` (another data key, or a token tampered with)."""
    token = s.scalar(select(AuditKeyRow.key_encrypted).where(AuditKeyRow.id == _ROW_ID))
    if token is None:
        return None
    try:
        payload = json.loads(vault.decrypt(token).reveal())
        return ChainKey(
            bytes.fromhex(payload["key"]),
            int(payload["from"]),
            datetime.fromisoformat(payload["at"]).astimezone(UTC),
        )
    except StoreError:
        _unreadable(vault)
    except (ValueError, KeyError, TypeError):
        _unreadable(vault)


def write_chain_key(s: Session, vault: Vault, key: ChainKey) -> None:
    """Store ``key`` (the chain has none yet) encrypted with ``vault``, in ``s``'s transaction."""
    s.add(AuditKeyRow(id=_ROW_ID, key_encrypted=vault.encrypt(_payload(key)), created_at=key.sealed_at))
    s.flush()


def reencrypt_chain_key(s: Session, key: ChainKey, new_vault: Vault) -> None:
    """Store ``key`` encrypted with ``new_vault`` instead (a rotation of the data key), in ``s``'s transaction."""
    s.execute(
        update(AuditKeyRow).where(AuditKeyRow.id == _ROW_ID).values(key_encrypted=new_vault.encrypt(_payload(key)))
    )


def _payload(key: ChainKey) -> str:
    return json.dumps({"key": key.secret.hex(), "from": key.keyed_from, "at": key.sealed_at.isoformat()})


def _unreadable(vault: Vault) -> NoReturn:
    raise StoreError(
        f"The audit's chain key cannot be read with this data key ({vault.key_location}): the audit cannot be "
        "verified or written. Start mcp-setup with the data key this database was written with "
        "(MCP_SETUP_DATA_KEY_FILE); if it is the right key, the stored chain key was tampered with."
    ) from None
