"""The store's encrypted env values: write one, read them back, re-encrypt all under a new key.

A mixin of :class:`~setup_agent.store.database.Store` (it uses the store's vault, session and
translation); the key itself lives in :mod:`setup_agent.secrets.vault`.
"""

from __future__ import annotations

import builtins
import logging

from sqlalchemy import select, text, true, update

from setup_agent.errors import NotFound, StoreError
from setup_agent.secrets import SecretValue, Vault

from .engine import translated
from .models import ClientEnvRow, MemberValueRow, ServerRow, _check_text

__all__ = ["EncryptedValues"]


class EncryptedValues:
    """Env values encrypted by the vault; key rotation in one transaction."""

    def set_env_value(self, server_id: str, key: str, value: str | SecretValue, secret: bool) -> None:
        """Write one env value (encrypted), replacing it: e.g. a renewed OAuth sign-in."""
        _check_text("An env key", key, 128)
        token = self._vault.encrypt(value)
        with translated(f"update the env of server {server_id}"), self._session() as s, s.begin():
            if s.get(ServerRow, server_id) is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            done = s.execute(
                update(ClientEnvRow)
                .where(ClientEnvRow.server_id == server_id, ClientEnvRow.key == key)
                .values(value_encrypted=token, secret=secret)
            )
            if not done.rowcount:
                s.add(ClientEnvRow(server_id=server_id, key=key, value_encrypted=token, secret=secret))

    def secret_values(self) -> builtins.list[tuple[str, str, SecretValue]]:
        """``(server_id, key, value)`` of every stored secret; one that cannot be decrypted is skipped."""
        with translated("read the stored secrets"), self._session() as s:
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
        with translated(f"read the env of server {server_id}"), self._session() as s:
            server = s.get(ServerRow, server_id)
            if server is None:
                raise NotFound(f"No installed server has the id {server_id}.")
            name = f"{server.qualified_name} ({server_id})"
            rows = s.execute(
                select(ClientEnvRow.key, ClientEnvRow.value_encrypted).where(ClientEnvRow.server_id == server_id)
            ).all()
        return {key: self._decrypt(token, name, key) for key, token in rows}

    def rotate_key(self, new_vault: Vault) -> int:
        """Re-encrypt every stored value with ``new_vault`` in one transaction; returns how many.

        Nothing changes unless all of them were re-encrypted: a failure midway (a value this
        store's vault cannot decrypt, the database) rolls back and leaves the old values intact.
        Afterwards this store uses ``new_vault``.
        """
        done: set[int] = set()
        with translated("re-encrypt the stored values"), self._session() as s, s.begin():
            if s.get_bind().dialect.name == "postgresql":  # no install may slip in under the old key
                s.execute(text("LOCK TABLE mcp_client_env IN SHARE ROW EXCLUSIVE MODE"))
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
            for row_id, key, token in members:  # each member's own values (member_values.py)
                value = self._decrypt(token, "a member's value", key)
                s.execute(
                    update(MemberValueRow)
                    .where(MemberValueRow.id == row_id)
                    .values(value_encrypted=new_vault.encrypt(value))
                )
        self._vault = new_vault
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
