"""The vault: data key in the keyring or a 0600 file, values encrypted at rest."""

from __future__ import annotations

import logging
import stat
import uuid
from pathlib import Path

import keyring
import pytest
from cryptography.fernet import Fernet
from keyring.backends import fail
from keyring.errors import KeyringLocked, PasswordSetError

from setup_agent.errors import StoreError
from setup_agent.secrets.refs import SecretValue
from setup_agent.secrets.vault import KEYRING_USERNAME, Vault
from tests.conftest import MemoryKeyring


class RefusingKeyring(MemoryKeyring):
    """Reads work (nothing stored); writes fail, quoting what they were given."""

    def set_password(self, service: str, username: str, password: str) -> None:
        raise PasswordSetError(f"cannot store {password}")


class LockedKeyring(MemoryKeyring):
    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("the keyring is locked")


class ForgetfulKeyring(MemoryKeyring):
    """Accepts writes and silently drops them (like the null backend)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        pass


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_encrypt_then_decrypt_returns_the_value_as_a_masked_secret(data_dir: Path) -> None:
    vault = Vault.open(data_dir, keyring_backend=MemoryKeyring())
    token = vault.encrypt("s3cret-value")
    value = vault.decrypt(token)
    assert isinstance(value, SecretValue)
    assert value.reveal() == "s3cret-value"
    assert "s3cret" not in repr(value) and "s3cret" not in str(value)
    assert b"s3cret" not in token


def test_encrypt_accepts_a_secret_value(data_dir: Path) -> None:
    vault = Vault.open(data_dir, keyring_backend=MemoryKeyring())
    assert vault.decrypt(vault.encrypt(SecretValue("abc"))).reveal() == "abc"


def test_key_is_created_in_the_keyring_and_reused_by_the_next_open(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = MemoryKeyring()
    first = Vault.open(data_dir, keyring_backend=backend, service_name="svc")
    token = first.encrypt("hello")
    second = Vault.open(data_dir, keyring_backend=backend, service_name="svc")
    assert first.key_location == second.key_location == "keyring"
    assert ("svc", KEYRING_USERNAME) in backend.passwords
    assert second.decrypt(token).reveal() == "hello"
    assert not (data_dir / "data.key").exists()
    assert _warnings(caplog) == []


def test_fallback_creates_a_0600_key_file_and_logs_exactly_one_warning(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    vault = Vault.open(data_dir, keyring_backend=fail.Keyring())
    key_file = data_dir / "data.key"
    assert vault.key_location == f"file:{key_file}"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    [warning] = _warnings(caplog)
    assert str(key_file) in warning.getMessage()
    assert "keyring" in warning.getMessage()
    assert key_file.read_bytes().strip().decode() not in caplog.text
    assert sorted(data_dir.iterdir()) == [key_file, data_dir / "data.key.warned"]  # no temp file left behind


def test_key_file_is_reused_when_the_keyring_still_does_not_work_and_the_warning_is_not_repeated(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = Vault.open(data_dir, keyring_backend=fail.Keyring()).encrypt("kept")
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    again = Vault.open(data_dir, keyring_backend=fail.Keyring())
    assert again.decrypt(token).reveal() == "kept"
    assert _warnings(caplog) == []  # once per data dir (#12 item 8); still there at DEBUG
    assert any("not in the OS keyring" in r.getMessage() for r in caplog.records)


def test_existing_key_file_is_reused_when_a_working_keyring_has_no_key(data_dir: Path) -> None:
    token = Vault.open(data_dir, keyring_backend=fail.Keyring()).encrypt("kept")
    backend = MemoryKeyring()
    again = Vault.open(data_dir, keyring_backend=backend)
    assert again.key_location.startswith("file:")
    assert again.decrypt(token).reveal() == "kept"
    assert backend.passwords == {}


def test_keyring_key_wins_and_an_older_key_file_still_decrypts(data_dir: Path) -> None:
    old_token = Vault.open(data_dir, keyring_backend=fail.Keyring()).encrypt("old")
    backend = MemoryKeyring()
    other = Vault.open(data_dir / "elsewhere", keyring_backend=backend)  # puts a key in the keyring
    vault = Vault.open(data_dir, keyring_backend=backend)
    assert vault.key_location == "keyring"
    assert vault.decrypt(old_token).reveal() == "old"
    assert other.decrypt(vault.encrypt("new")).reveal() == "new"


@pytest.mark.parametrize("backend_type", [RefusingKeyring, LockedKeyring, ForgetfulKeyring])
def test_a_keyring_that_fails_or_drops_writes_falls_back_to_the_key_file_with_one_warning(
    data_dir: Path, caplog: pytest.LogCaptureFixture, backend_type: type[MemoryKeyring]
) -> None:
    vault = Vault.open(data_dir, keyring_backend=backend_type())
    assert vault.key_location == f"file:{data_dir / 'data.key'}"
    [warning] = _warnings(caplog)
    key = (data_dir / "data.key").read_text().strip()
    assert key not in warning.getMessage()  # RefusingKeyring quotes the key in its error
    assert vault.decrypt(vault.encrypt("x")).reveal() == "x"


def test_default_backend_is_the_keyring_librarys_current_one(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = MemoryKeyring()
    monkeypatch.setattr(keyring, "get_keyring", lambda: backend)
    assert Vault.open(data_dir).key_location == "keyring"
    assert ("mcp-setup", KEYRING_USERNAME) in backend.passwords


def test_warning_goes_to_the_given_logger(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.vault.custom")
    Vault.open(data_dir, keyring_backend=fail.Keyring(), logger=logger)
    assert [r.name for r in _warnings(caplog)] == ["test.vault.custom"]


def test_a_vault_with_another_key_cannot_decrypt_and_says_so_without_the_plaintext(tmp_path: Path) -> None:
    plaintext = "canary-" + uuid.uuid4().hex
    token = Vault.open(tmp_path / "a", keyring_backend=MemoryKeyring()).encrypt(plaintext)
    other = Vault.open(tmp_path / "b", keyring_backend=MemoryKeyring())
    with pytest.raises(StoreError) as info:
        other.decrypt(token)
    assert "could not be decrypted" in info.value.message
    assert plaintext not in repr(info.value) and plaintext not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_corrupted_token_raises_store_error(data_dir: Path) -> None:
    vault = Vault.open(data_dir, keyring_backend=MemoryKeyring())
    token = bytearray(vault.encrypt("value"))
    token[-5] ^= 0x01
    with pytest.raises(StoreError):
        vault.decrypt(bytes(token))
    with pytest.raises(StoreError):
        vault.decrypt("not bytes")  # type: ignore[arg-type]


def test_text_that_cannot_be_encoded_raises_store_error_without_the_value(data_dir: Path) -> None:
    vault = Vault.open(data_dir, keyring_backend=MemoryKeyring())
    with pytest.raises(StoreError) as info:
        vault.encrypt("bad-\ud800-value")
    assert "bad-" not in str(info.value)
    with pytest.raises(StoreError):
        vault.encrypt(42)  # type: ignore[arg-type]


def test_repr_shows_where_the_key_lives_but_not_the_key(data_dir: Path) -> None:
    backend = MemoryKeyring()
    vault = Vault.open(data_dir, keyring_backend=backend)
    [key] = backend.passwords.values()
    assert repr(vault) == "Vault(key_location='keyring')"
    assert key not in repr(vault)
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(vault)


def test_an_empty_key_file_is_reported_not_replaced(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "data.key").write_bytes(b"")
    with pytest.raises(StoreError, match="empty"):
        Vault.open(data_dir, keyring_backend=fail.Keyring())
    assert (data_dir / "data.key").read_bytes() == b""


def test_in_memory_vault_round_trips_without_touching_disk() -> None:
    vault = Vault.in_memory()
    assert vault.key_location == "memory"
    assert vault.decrypt(vault.encrypt("v")).reveal() == "v"


# --- a team's key: named explicitly, shared by machines, rotated, exported -------------


def test_a_named_key_file_gives_every_process_the_same_key(tmp_path: Path) -> None:
    shared = tmp_path / "team.key"
    Vault.in_memory().export_key(shared)
    token = Vault.open(tmp_path / "machine-a", keyring_backend=MemoryKeyring(), key_file=shared).encrypt("v")
    other = Vault.open(tmp_path / "machine-b", keyring_backend=MemoryKeyring(), key_file=shared)
    assert other.decrypt(token).reveal() == "v"
    assert other.key_location == f"file:{shared}"
    assert not (tmp_path / "machine-b").exists()  # no key of its own was made


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_named_key_file_readable_by_others_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "team.key"
    Vault.in_memory().export_key(shared)
    shared.chmod(mode)
    with pytest.raises(StoreError) as info:
        Vault.open(tmp_path, keyring_backend=MemoryKeyring(), key_file=shared)
    assert f"chmod 600 {shared}" in info.value.message
    assert stat.S_IMODE(shared.stat().st_mode) == mode  # not silently changed


def test_a_named_key_file_that_does_not_exist_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.key"
    with pytest.raises(StoreError) as info:
        Vault.open(tmp_path, keyring_backend=MemoryKeyring(), key_file=missing)
    assert "key export --to" in info.value.message
    assert not missing.exists()


def test_a_named_keyring_entry_is_used_and_never_created(tmp_path: Path) -> None:
    backend = MemoryKeyring()
    with pytest.raises(StoreError, match="no data key"):
        Vault.open(tmp_path, keyring_backend=backend, keyring_username="team-key")
    assert backend.passwords == {}
    backend.set_password("mcp-setup", "team-key", Fernet.generate_key().decode())
    vault = Vault.open(tmp_path, keyring_backend=backend, keyring_username="team-key")
    assert vault.key_location == "keyring:mcp-setup/team-key"
    assert vault.decrypt(vault.encrypt("x")).reveal() == "x"


def test_export_writes_the_current_key_to_a_new_0600_file_and_never_overwrites(tmp_path: Path) -> None:
    vault = Vault.open(tmp_path / "data", keyring_backend=MemoryKeyring())
    target = tmp_path / "out.key"
    vault.export_key(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    token = vault.encrypt("shared")
    assert Vault.from_key_file(target).decrypt(token).reveal() == "shared"
    before = target.read_bytes()
    with pytest.raises(StoreError, match="already exists"):
        Vault.in_memory().export_key(target)
    assert target.read_bytes() == before


def test_a_rotated_vault_encrypts_with_the_new_key_and_still_decrypts_the_old_until_saved_alone(
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "team.key"
    Vault.in_memory().export_key(key_file)
    vault = Vault.from_key_file(key_file)
    old_token = vault.encrypt("old")
    rotated = vault.with_new_key()
    rotated.save()
    assert Vault.from_key_file(key_file).decrypt(old_token).reveal() == "old"  # both keys on file
    new_token = rotated.encrypt("new")
    with pytest.raises(StoreError):
        vault.decrypt(new_token)
    rotated.only_current_key().save()
    reopened = Vault.from_key_file(key_file)
    assert reopened.decrypt(new_token).reveal() == "new"
    with pytest.raises(StoreError):
        reopened.decrypt(old_token)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
