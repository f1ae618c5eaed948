"""The vault: encrypts stored values at rest with one data key (Fernet: AES-128-CBC + HMAC).

The data key lives in the OS keyring (service ``mcp-setup``, user ``data-key``). Where no
keyring backend works (headless Linux, CI) it lives in ``<data_dir>/data.key`` (mode 0600)
and one warning says so. An existing key is reused, keyring first, then file, so values
written earlier still decrypt. The key never appears in a ``repr``, a message or a log line.

A team names its key explicitly, so every machine on one database decrypts the same values:
``key_file=`` (a 0600 file, refused when others can read it, never created here: ``mcp-setup
key export --to FILE`` writes one) or ``keyring_username=`` (an existing keyring entry). A key
location may hold several keys separated by whitespace: the first encrypts, all decrypt
(:meth:`Vault.with_new_key` and :meth:`Vault.save` are how ``mcp-setup key rotate`` uses that).
"""

from __future__ import annotations

import logging
import os
import secrets as _random
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from setup_agent.errors import StoreError

from .refs import SecretValue

if TYPE_CHECKING:  # keyring is imported lazily: it costs start-up time for every face
    from keyring.backend import KeyringBackend

__all__ = ["KEY_FILE_NAME", "KEYRING_USERNAME", "Vault", "write_private_file"]

KEY_FILE_NAME = "data.key"
KEYRING_USERNAME = "data-key"

_log = logging.getLogger(__name__)


class Vault:
    """Encrypts ``str`` values to opaque tokens and back to :class:`SecretValue`.

    Build one with :meth:`open` (persistent key) or :meth:`in_memory` (tests).
    ``key_location`` is ``"keyring"``, ``"file:<path>"`` or ``"memory"``.
    """

    __slots__ = ("_fernet", "_keys", "_save", "key_location")

    def __init__(self, keys: list[bytes], key_location: str, *, save: Callable[[bytes], None] | None = None) -> None:
        if not keys:
            raise ValueError("a Vault needs at least one key")
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])  # encrypts with keys[0]
        except (ValueError, TypeError):
            raise StoreError(
                f"The data key at {key_location} is not a valid key (corrupted?). Without it, stored values "
                "cannot be decrypted; restore it, or move the data dir aside to start afresh."
            ) from None
        self._keys = list(keys)
        self._save = save
        self.key_location = key_location

    # -- opening ----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        keyring_backend: KeyringBackend | None = None,
        service_name: str = "mcp-setup",
        logger: logging.Logger | None = None,
        key_file: Path | None = None,
        keyring_username: str | None = None,
    ) -> Vault:
        """Load the data key (keyring, then ``<data_dir>/data.key``) or create one; or exactly the
        key named by ``key_file`` or ``keyring_username`` (a team's shared key)."""
        log = logger or _log
        if key_file is not None:
            return cls.from_key_file(key_file)
        data_dir = Path(data_dir)
        backend = keyring_backend if keyring_backend is not None else _default_backend()
        if keyring_username is not None:
            return cls._from_named_entry(backend, service_name, keyring_username)
        key_file = data_dir / KEY_FILE_NAME
        from keyring.backends import fail

        problem: str | None = "no keyring backend is available" if isinstance(backend, fail.Keyring) else None
        stored: str | None = None
        if problem is None:
            try:
                stored = backend.get_password(service_name, KEYRING_USERNAME)
            except Exception as exc:  # any backend failure means: use the file
                problem = _describe(exc, "reading")
        if stored:  # keyring first; an older key file (another key) still decrypts
            keys = _split(stored.encode())
            try:
                older = _read_key_file(key_file)
            except StoreError:  # not needed: the keyring has the key
                older = None
            keys += [k for k in _split(older or b"") if k not in keys and _is_key(k)]
            return cls(keys, "keyring", save=_keyring_saver(backend, service_name, KEYRING_USERNAME))
        file_key = _read_key_file(key_file)
        if file_key is not None:
            why = problem or "the OS keyring holds no data key and an existing key file was found"
            _warn(log, key_file, why)
            return cls(_split(file_key), f"file:{key_file}", save=_file_saver(key_file))

        new_key = Fernet.generate_key()
        if problem is None:
            try:
                backend.set_password(service_name, KEYRING_USERNAME, new_key.decode())
                # Read back: some backends drop writes silently; a racing process may have won.
                again = backend.get_password(service_name, KEYRING_USERNAME)
                if again:
                    return cls(
                        _split(again.encode()), "keyring", save=_keyring_saver(backend, service_name, KEYRING_USERNAME)
                    )
                problem = "the OS keyring did not keep the key it was given"
            except Exception as exc:
                problem = _scrub(_describe(exc, "writing"), new_key.decode())
        key = _create_key_file(key_file, new_key)
        _warn(log, key_file, problem or "the OS keyring is not usable")
        return cls(_split(key), f"file:{key_file}", save=_file_saver(key_file))

    @classmethod
    def from_key_file(cls, key_file: Path) -> Vault:
        """Exactly the key in ``key_file``: it must exist and be readable by its owner only."""
        key_file = Path(key_file).expanduser()
        try:
            mode = key_file.stat().st_mode
        except FileNotFoundError:
            raise StoreError(
                f"The data key file {key_file} does not exist. Write it with `mcp-setup key export --to {key_file}` "
                "on the machine that holds the key (or on a new setup), then start again."
            ) from None
        except OSError as exc:
            raise StoreError(f"The data key file {key_file} cannot be read ({type(exc).__name__}).") from None
        if os.name == "posix" and mode & 0o077:
            raise StoreError(
                f"The data key file {key_file} can be read by other users (mode {stat.S_IMODE(mode):o}); "
                f"refusing to use it. Run `chmod 600 {key_file}` and start again."
            )
        data = _read_key_file(key_file)
        assert data is not None
        return cls(_split(data), f"file:{key_file}", save=_file_saver(key_file))

    @classmethod
    def _from_named_entry(cls, backend: KeyringBackend, service_name: str, username: str) -> Vault:
        where = f"keyring:{service_name}/{username}"
        try:
            stored = backend.get_password(service_name, username)
        except Exception as exc:  # noqa: BLE001 - a named key that cannot be read is an error
            raise StoreError(f"The data key {where} cannot be read: {_describe(exc, 'reading')}.") from None
        if not stored:
            raise StoreError(
                f"The OS keyring has no data key {where}. Store the team's key there (as exported by "
                "`mcp-setup key export`), or name a key file with MCP_SETUP_DATA_KEY_FILE."
            )
        return cls(_split(stored.encode()), where, save=_keyring_saver(backend, service_name, username))

    @classmethod
    def in_memory(cls, key: bytes | None = None) -> Vault:
        """A vault whose key lives only in this process (tests, throw-away stores)."""
        return cls([key or Fernet.generate_key()], "memory")

    # -- rotation and export -----------------------------------------------------------
    def with_new_key(self) -> Vault:
        """This vault with a fresh key first (it encrypts) and the current keys still decrypting."""
        return Vault([Fernet.generate_key(), *self._keys], self.key_location, save=self._save)

    def only_current_key(self) -> Vault:
        """This vault without its older keys: what is left once every value was re-encrypted."""
        return Vault(self._keys[:1], self.key_location, save=self._save)

    def save(self) -> None:
        """Write this vault's keys to where it was loaded from (file: atomic replace, 0600)."""
        if self._save is not None:
            self._save(b" ".join(self._keys))

    def export_key(self, path: Path) -> None:
        """Write the current key to a new file ``path`` (0600) for another machine."""
        path = Path(path).expanduser()
        try:
            _write_new(path, self._keys[0])
        except FileExistsError:
            raise StoreError(f"{path} already exists; choose a new file name (it is never overwritten).") from None
        except OSError as exc:
            raise StoreError(f"Could not write {path} ({type(exc).__name__}: {exc.strerror or exc}).") from None

    # -- use --------------------------------------------------------------------------
    def encrypt(self, plaintext: str | SecretValue) -> bytes:
        """Encrypt ``plaintext`` (a ``str`` or :class:`SecretValue`) to an opaque token."""
        if isinstance(plaintext, SecretValue):
            plaintext = plaintext.reveal()
        if not isinstance(plaintext, str):
            raise StoreError(f"Only text can be stored encrypted, not {type(plaintext).__name__}.")
        try:
            raw = plaintext.encode("utf-8")
        except UnicodeEncodeError:
            raise StoreError("A value could not be encrypted: it is not valid text (not encodable as UTF-8).") from None
        return self._fernet.encrypt(raw)

    def decrypt(self, token: bytes) -> SecretValue:
        """Decrypt a token made by :meth:`encrypt`; raises :class:`StoreError` if it cannot."""
        if not isinstance(token, (bytes, bytearray, memoryview)):
            raise StoreError(f"A stored value could not be decrypted: expected bytes, got {type(token).__name__}.")
        try:
            return SecretValue(self._fernet.decrypt(bytes(token)).decode("utf-8"))
        except (InvalidToken, UnicodeDecodeError):
            raise StoreError(
                "A stored value could not be decrypted: the data key "
                f"({self.key_location}) is not the one it was encrypted with, or the stored value is corrupted."
            ) from None

    def __repr__(self) -> str:
        return f"Vault(key_location={self.key_location!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("Vault cannot be pickled")


# --- helpers -------------------------------------------------------------------------


def _default_backend() -> KeyringBackend:
    import keyring

    try:
        return keyring.get_keyring()
    except Exception:  # a broken PYTHON_KEYRING_BACKEND or config: behave as "no keyring"
        from keyring.backends import fail

        return fail.Keyring()


def _describe(exc: BaseException, action: str) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{action} the OS keyring failed ({type(exc).__name__}{': ' + text if text else ''})"


def _scrub(text: str, key: str) -> str:
    return text.replace(key, "[data key]")


def _warn(log: logging.Logger, key_file: Path, why: str) -> None:
    """Warn once per key file: ``<key file>.warned`` remembers it was said;
    later starts log the same sentence at DEBUG (``--verbose`` shows it)."""
    marker = key_file.with_name(key_file.name + ".warned")
    level = logging.DEBUG if marker.exists() else logging.WARNING
    log.log(
        level,
        "mcp-setup's data key is kept in the file %s (mode 0600), not in the OS keyring, because %s. "
        "Anyone who can read that file can decrypt the stored server settings.",
        key_file,
        why,
    )
    if level == logging.WARNING:
        try:
            marker.write_text("the key-file warning was shown\n")
        except OSError:
            pass  # a read-only data dir: warn again next time


def _read_key_file(path: Path) -> bytes | None:
    try:
        data = path.read_bytes().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"The data key file {path} cannot be read ({type(exc).__name__}).") from None
    if not data:
        raise StoreError(f"The data key file {path} is empty; restore it, or move the data dir aside.")
    try:
        if os.name == "posix" and path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)  # someone loosened it: tighten again
    except OSError:
        pass
    return data


def _create_key_file(path: Path, key: bytes) -> bytes:
    """Publish ``key`` at ``path`` (0600) atomically; if another process won, use its key."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{_random.token_hex(8)}.tmp")
    _write_new(tmp, key)
    try:
        os.link(tmp, path)  # atomic and never overwrites: readers see no half-written file
    except FileExistsError:
        pass
    except OSError:  # no hard links here (some filesystems): create in place
        try:
            _write_new(path, key)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    existing = _read_key_file(path)
    if existing is None:  # removed under our feet
        raise StoreError(f"The data key file {path} vanished while it was being created.")
    return existing


def _split(data: bytes) -> list[bytes]:
    """The keys of a key location: whitespace-separated, the first one encrypts."""
    return data.split() or [data]


def _file_saver(path: Path) -> Callable[[bytes], None]:
    def save(data: bytes) -> None:
        write_private_file(path, data)

    return save


def _keyring_saver(backend: KeyringBackend, service: str, username: str) -> Callable[[bytes], None]:
    def save(data: bytes) -> None:
        try:
            backend.set_password(service, username, data.decode())
        except Exception as exc:  # noqa: BLE001
            raise StoreError(
                f"The new data key could not be stored in the OS keyring ({type(exc).__name__})."
            ) from None

    return save


def write_private_file(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically with ``data`` (mode 0600): readers see the old or the new file."""
    tmp = path.with_name(f".{path.name}.{_random.token_hex(8)}.tmp")
    try:
        _write_new(tmp, data)
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"Could not write the data key file {path} ({type(exc).__name__}).") from None
    finally:
        tmp.unlink(missing_ok=True)


def _is_key(key: bytes) -> bool:
    try:
        Fernet(key)
    except (ValueError, TypeError):
        return False
    return True


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
