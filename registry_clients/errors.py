"""Errors raised by the registry adapters.

The core translates them at its boundary (``setup_agent.errors.translate``); this layer
does not import the core.

::

    RegistryError               a registry failed or answered something unusable
    ├── RegistryAuthFailed      missing or rejected credentials (HTTP 401/403)
    └── RegistryNotFound        no such server in that registry (HTTP 404)
"""

from __future__ import annotations

__all__ = ["RegistryAuthFailed", "RegistryError", "RegistryNotFound"]


class RegistryError(Exception):
    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class RegistryAuthFailed(RegistryError):
    pass


class RegistryNotFound(RegistryError):
    pass
