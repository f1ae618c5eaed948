"""The data key, opened where the settings say: light enough for the commands that only read or
write the store (``token``, ``key``, ``audit``, ``approve``, ``export``), which then start without
the gateway, the launcher and the MCP SDK."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from setup_agent.secrets import Vault

    from .settings import Settings

__all__ = ["open_vault"]


def open_vault(settings: Settings, *, keyring_backend: Any = None) -> Vault:
    """The data key: MCP_SETUP_DATA_KEY_FILE or _KEYRING_ENTRY when named, else keyring/key file."""
    from setup_agent.secrets import Vault

    return Vault.open(
        Path(settings.home).expanduser(),
        keyring_backend=keyring_backend,
        key_file=settings.data_key_file,
        keyring_username=settings.data_key_keyring_entry,
    )
