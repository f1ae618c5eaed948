"""Capability providers: governance metadata from ``config.toml``, and opt-in admission.

``<data dir>/config.toml`` (or the file ``MCP_SETUP_CONFIG`` names) may hold::

    admission = "eligible-providers"   # optional; without it nothing is refused

    [[capability_providers]]
    id = "Acme Tools"                  # normalized to "acme-tools"
    display_name = "Acme Tools Inc."
    source_uri = "https://github.com/acme"
    source_digest = "sha256:…"         # recorded and shown, not checked
    trust_state = "trusted"            # trusted / untrusted / revoked / …
    enabled = true

Rules (the tests in tests/setup_agent/setup/test_providers.py hold them):

* **ids** are normalized before any check: NFKC, case-folded, every run of characters that
  are not letters or digits (``str.isalnum``) becomes one ``-``, leading and trailing ``-``
  trimmed (``Acme Tools``, ``acme_tools``, `` ACME--tools `` → ``acme-tools``; ``ＡＣＭＥ Tools``
  → ``acme-tools``; ``Tööls`` keeps its letters: ``tööls``). Two tables that normalize to the
  same id are refused, naming both lines.
* **eligible** only when ``enabled = true`` and ``trust_state = "trusted"`` (case-insensitive).
  ``enabled`` defaults to true, ``trust_state`` to ``"untrusted"``.
* **coverage** (which servers a provider stands for), by ``source_uri``:

  - a registry name: ``io.github.acme`` covers every server of that namespace
    (``io.github.acme/…``); ``io.github.acme/search`` covers that one server. Case-insensitive.
  - an ``http(s)`` URL covers servers whose repository URL is that URL or under it (path
    segments; trailing ``/`` and ``.git`` ignored). ``https://github.com/<owner>`` also covers
    the namespace ``io.github.<owner>`` (the official registry gives that namespace only to
    that GitHub owner), which is how an *installed* server is matched: the store keeps its
    qualified name, not its repository URL.

  When several providers cover a server, the first eligible one (file order) is its provider,
  else the first one.
* **admission** (``admission = "eligible-providers"``): ``mcp_setup_test_connection`` and
  ``mcp_setup_install_and_connect`` (and ``mcp_setup_authorize``, which shares their first
  step) refuse a server that no eligible provider covers, with ``not_admitted``, right after
  the registry lookup and before any download or start.

No file, or a file without these keys, is today's behaviour: no providers, nothing refused.
A malformed file is a :class:`~setup_agent.errors.ConfigInvalid` naming the file and the field.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from setup_agent.errors import ConfigInvalid, NotAdmitted

__all__ = [
    "ADMISSION_MODES",
    "CONFIG_FILE_NAME",
    "CapabilityProvider",
    "ProviderConfig",
    "load_provider_config",
    "normalize_provider_id",
    "parse_provider_config",
]

CONFIG_FILE_NAME = "config.toml"
ADMISSION_MODES = ("off", "eligible-providers")
_FIELDS = {"id", "display_name", "source_uri", "source_digest", "trust_state", "enabled"}
_TABLE_HEADER = re.compile(r"^\s*\[\[\s*capability_providers\s*\]\]")
_GITHUB_NAMESPACE = "io.github."


def normalize_provider_id(raw: str) -> str:
    """The id every check uses (module doc); ``""`` when nothing alphanumeric is left."""
    text = unicodedata.normalize("NFKC", raw).casefold()
    out: list[str] = []
    for ch in text:
        if ch.isalnum():
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-")


def _clean_url(url: str) -> str:
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path.lower()}"


@dataclass(frozen=True)
class CapabilityProvider:
    id: str  # normalized
    display_name: str
    source_uri: str
    source_digest: str | None
    trust_state: str
    enabled: bool
    line: int | None = None  # where its table starts in the file

    @property
    def eligible(self) -> bool:
        return self.enabled and self.trust_state == "trusted"

    def covers(self, qualified_name: str, repository_url: str | None = None) -> bool:
        """Does this provider stand for the server (module doc, "coverage")?"""
        name = qualified_name.strip().casefold()
        source = self.source_uri.strip()
        if source.lower().startswith(("http://", "https://")):
            base = _clean_url(source)
            if repository_url and (_clean_url(repository_url) + "/").startswith(base + "/"):
                return True
            parts = urlsplit(base)
            segments = [s for s in parts.path.split("/") if s]
            if parts.netloc in ("github.com", "www.github.com") and len(segments) == 1:
                return name.startswith(f"{_GITHUB_NAMESPACE}{segments[0]}/")
            return False
        pattern = source.casefold().rstrip("/")
        return bool(pattern) and (name == pattern or name.startswith(pattern + "/"))

    def public(self) -> dict[str, Any]:
        """What listings show (no secret can be here: the file holds governance metadata only)."""
        return {
            "id": self.id,
            "display_name": self.display_name,
            "source_uri": self.source_uri,
            "source_digest": self.source_digest,
            "trust_state": self.trust_state,
            "enabled": self.enabled,
            "eligible": self.eligible,
        }


@dataclass(frozen=True)
class ProviderConfig:
    """The providers of config.toml and the admission mode; empty means today's behaviour."""

    providers: tuple[CapabilityProvider, ...] = ()
    admission: str = "off"
    path: Path | None = None
    loaded: bool = False  # False: no file

    def provider_for(self, qualified_name: str, repository_url: str | None = None) -> CapabilityProvider | None:
        covering = [p for p in self.providers if p.covers(qualified_name, repository_url)]
        return next((p for p in covering if p.eligible), covering[0] if covering else None)

    def admit(self, qualified_name: str, repository_url: str | None = None) -> None:
        """Raise :class:`NotAdmitted` when admission is on and no eligible provider covers the server."""
        if self.admission != "eligible-providers":
            return
        provider = self.provider_for(qualified_name, repository_url)
        if provider is not None and provider.eligible:
            return
        rule = (
            'admission = "eligible-providers" in config.toml: a server is tested or installed only when an '
            "enabled, trusted [[capability_providers]] entry covers it by source_uri (its registry namespace "
            "or name, or its repository URL)"
        )
        if provider is None:
            why = "no capability provider covers it"
        else:
            state = "disabled" if not provider.enabled else f"trust_state {provider.trust_state!r}"
            why = f"its provider {provider.id!r} is not eligible ({state})"
        raise NotAdmitted(
            f"This server is not admitted: {why}. Rule: {rule}. Ask the user to add or trust a provider for it.",
            details={"rule": "eligible-providers", **({"provider": provider.id} if provider else {})},
        )

    def diagnostics(self) -> dict[str, Any]:
        return {
            "config_file": str(self.path) if self.path is not None else None,
            "config_loaded": self.loaded,
            "admission": self.admission,
            "providers": [p.public() for p in self.providers],
            "counts": {
                "total": len(self.providers),
                "eligible": sum(p.eligible for p in self.providers),
                "enabled": sum(p.enabled for p in self.providers),
            },
        }


def load_provider_config(path: Path) -> ProviderConfig:
    """Read ``path``; a missing file is an empty config (nothing hidden, nothing refused)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ProviderConfig(path=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigInvalid(f"{path}: cannot be read ({type(exc).__name__}).") from None
    return parse_provider_config(text, path)


def parse_provider_config(text: str, path: Path) -> ProviderConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigInvalid(f"{path}: not valid TOML ({exc}).") from None
    admission = data.get("admission", "off")
    if admission not in ADMISSION_MODES:
        raise ConfigInvalid(f"{path}: field 'admission' must be one of {', '.join(repr(m) for m in ADMISSION_MODES)}.")
    tables = data.get("capability_providers", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigInvalid(f"{path}: 'capability_providers' must be tables written as [[capability_providers]].")
    headers = [n for n, line in enumerate(text.splitlines(), 1) if _TABLE_HEADER.match(line)]
    lines: list[int | None] = list(headers) if len(headers) == len(tables) else [None] * len(tables)
    providers: list[CapabilityProvider] = []
    seen: dict[str, CapabilityProvider] = {}
    for n, (table, line) in enumerate(zip(tables, lines), 1):
        where = f"{path}: line {line}" if line else f"{path}: capability provider #{n}"
        provider = _provider(table, where, line)
        first = seen.get(provider.id)
        if first is not None:
            first_where = f"line {first.line}" if first.line else "an earlier entry"
            raise ConfigInvalid(
                f"{where}: capability provider id {table['id']!r} normalizes to {provider.id!r}, "
                f"the same as the one at {first_where}; give each provider its own id."
            )
        seen[provider.id] = provider
        providers.append(provider)
    return ProviderConfig(tuple(providers), admission, path, loaded=True)


def _provider(table: dict[str, Any], where: str, line: int | None) -> CapabilityProvider:
    unknown = sorted(set(table) - _FIELDS)
    if unknown:
        raise ConfigInvalid(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(_FIELDS))}).")

    def text(name: str, *, required: bool) -> str | None:
        value = table.get(name)
        if value is None:
            if required:
                raise ConfigInvalid(f"{where}: field {name!r} is required.")
            return None
        if not isinstance(value, str) or not value.strip():
            raise ConfigInvalid(f"{where}: field {name!r} must be a non-empty string.")
        return value.strip()

    raw_id = text("id", required=True)
    assert raw_id is not None
    provider_id = normalize_provider_id(raw_id)
    if not provider_id:
        raise ConfigInvalid(f"{where}: field 'id' must hold at least one letter or digit.")
    source_uri = text("source_uri", required=True)
    assert source_uri is not None
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigInvalid(f"{where}: field 'enabled' must be true or false.")
    trust = (text("trust_state", required=False) or "untrusted").casefold()
    return CapabilityProvider(
        id=provider_id,
        display_name=text("display_name", required=False) or raw_id,
        source_uri=source_uri,
        source_digest=text("source_digest", required=False),
        trust_state=trust,
        enabled=enabled,
        line=line,
    )
