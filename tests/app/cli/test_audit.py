"""The audit chain's key stays the core's: it is in the database only encrypted under the data
key, and no command prints it or logs it, whether the chain verifies, is broken, or the data key
is rotated under it."""

from __future__ import annotations

import base64
import logging
import sqlite3
from datetime import datetime

import pytest

from setup_agent.secrets.vault import Vault
from setup_agent.store.audit import LinkContent, row_digest
from setup_agent.store.audit_key import read_chain_key
from tests.helpers.canary import all_bytes_under
from tests.helpers.data_dir import OTHER, STUB, DataDir, cli, data  # noqa: F401 - the data fixture

_CHAINED = ("id", "at", "event", "server_id", "qualified_name", "actor", "old_hash", "new_hash", "detail")


def _forms(secret: bytes) -> list[bytes]:
    """The chain key as it could leak: raw, hex (either case), base64 (either alphabet, padded or not)."""
    encoded = [base64.b64encode(secret), base64.urlsafe_b64encode(secret)]
    return [secret, secret.hex().encode(), secret.hex().upper().encode(), *encoded, *(e.rstrip(b"=") for e in encoded)]


def _rewrite_and_rechain_unkeyed(db_path: object, target: int) -> None:
    with sqlite3.connect(str(db_path)) as conn:
        conn.execute("DROP TRIGGER IF EXISTS mcp_audit_no_update")
        conn.execute("UPDATE mcp_audit SET actor = 'someone else' WHERE id = ?", (target,))
        rows = conn.execute(f"SELECT {', '.join(_CHAINED)}, row_hash FROM mcp_audit ORDER BY id").fetchall()
        prev = rows[target - 2][-1] if target > 1 else "0" * 64
        for row in rows[target - 1 :]:
            fields = dict(zip(_CHAINED, row[:-1], strict=True))
            fields["at"] = datetime.fromisoformat(fields["at"])
            digest = row_digest(LinkContent(prev, **fields))
            conn.execute("UPDATE mcp_audit SET prev_hash = ?, row_hash = ? WHERE id = ?", (prev, digest, row[0]))
            prev = digest
    conn.close()


def test_the_chain_key_never_appears_in_clear_in_the_database_the_logs_the_audit_or_an_export(
    data: DataDir, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, canary: str
) -> None:
    caplog.set_level(logging.DEBUG)
    data.install(STUB, canary)
    data.install(OTHER, "other-value-123")
    printed: list[str] = []

    def run(expected: int, *argv: str) -> str:
        code, out, err = cli(capsys, *argv)
        printed.append(out + err)
        assert code == expected, (argv, out, err)
        return out

    assert "chain is whole" in run(0, "audit", "--verify")
    run(0, "audit", "--json")
    run(0, "audit", "--verify", "--json")
    run(0, "export")
    run(0, "list", "--json")
    _rewrite_and_rechain_unkeyed(data.home / "mcp-setup.db", 2)  # a failure too: the chain broken
    assert "broken at row 2" in run(1, "audit", "--verify")
    run(1, "audit", "--verify", "--json")
    assert "Re-encrypted" in run(0, "key", "rotate")  # the key re-encrypted under a new data key
    assert "broken at row 2" in run(1, "audit", "--verify")
    run(0, "audit", "--json")
    run(0, "export")
    with data.store() as store, store.database.session() as s:
        key = read_chain_key(s, Vault.from_key_file(data.key))
    assert key is not None and len(key.secret) == 32 and "secret" not in repr(key) and key.secret.hex() not in repr(key)
    places = [("printed", "\n".join(printed).encode()), ("logs", caplog.text.encode())]
    places += [(str(path), content) for path, content in all_bytes_under(data.root)]
    assert any(path.endswith("mcp-setup.db") for path, _ in places)
    for form in _forms(key.secret):
        assert [where for where, content in places if form in content] == []
    assert [where for where, content in places if canary.encode() in content] == []
