"""Upstream adapters: the official MCP registry, Smithery and a local catalog, behind one hub.

Everything maps to the normalized model in :mod:`registry_clients.models`; the core sees
only that. This package never imports ``setup_agent`` or ``app``.
"""

from .base import RegistrySource
from .errors import RegistryAuthFailed, RegistryError, RegistryNotFound
from .hub import KNOWN_REGISTRIES, RegistryHub, build_sources
from .inputs import looks_secret, placeholders
from .local import LocalCatalog
from .models import (
    Argument,
    Detail,
    PackageOption,
    PackageType,
    RequiredKey,
    SearchPage,
    SourceError,
    Summary,
    TransportType,
)
from .official import DEFAULT_OFFICIAL_URL, OfficialRegistry
from .serverjson import parse_server_json
from .smithery import DEFAULT_SMITHERY_URL, SmitheryRegistry

__all__ = [
    "DEFAULT_OFFICIAL_URL",
    "DEFAULT_SMITHERY_URL",
    "KNOWN_REGISTRIES",
    "Argument",
    "Detail",
    "LocalCatalog",
    "OfficialRegistry",
    "PackageOption",
    "PackageType",
    "RegistryAuthFailed",
    "RegistryError",
    "RegistryHub",
    "RegistryNotFound",
    "RegistrySource",
    "RequiredKey",
    "SearchPage",
    "SmitheryRegistry",
    "SourceError",
    "Summary",
    "TransportType",
    "build_sources",
    "looks_secret",
    "parse_server_json",
    "placeholders",
]
