"""One input of a ``server.json``: placeholders, literal stand-ins, the secret-name rule, and the
field readers that accept both the camelCase and the 2025-07-09 snake_case spellings.

The rule these serve is in :mod:`registry_clients.serverjson`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "OFFICIAL_META",
    "PACKAGE_TYPES",
    "PLACEHOLDER",
    "guess_secret",
    "literal_placeholder",
    "looks_secret",
    "normalize_placeholders",
    "placeholders",
    "unwrap",
]

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
PACKAGE_TYPES = ("npm", "pypi", "oci", "nuget", "mcpb")
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")
_MUSTACHE = re.compile(r"(?<!\$)\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}")
#: VS Code's ``${input:NAME}`` (an input the editor prompts for), as some publishers copy it.
_VSCODE_INPUT = re.compile(r"\$\{input:([A-Za-z_][A-Za-z0-9_.\-]*)\}")
_SECRET_TOKENS = {"key", "token", "secret", "password", "passwd", "credential", "credentials", "authorization"}
_SECRET_ENDINGS = ("apikey", "token", "secret", "password", "secretkey", "privatekey")
_PUBLIC_TOKENS = {
    "url",
    "uri",
    "host",
    "hostname",
    "endpoint",
    "algorithm",
    "alg",
    "public",
    "path",
    "file",
    "dir",
    "directory",
    "name",
    "type",
    "ttl",
    "header",
    "id",
}
_LITERAL = re.compile(
    r"(?i)(?:<[^<>]{2,}>|‹[^‹›]+›|\byour(?:[_\-]|[A-Z]{2,}|\b)|(?:^|[/\\:])path[/\\]to[/\\]"
    r"|/absolute/path|/full/path|\b(?:replace|change)[_\-]?me\b|x{4,})"
)
_HTTP_TRANSPORTS = {"streamable-http": "streamable-http", "http": "streamable-http", "sse": "sse"}


def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [t for t in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if t]


def looks_secret(name: str | None) -> bool:
    """The name rule alone: a token is key/token/secret/password/passwd/credential/authorization
    (or ends in apikey/token/secret/password/secretkey/privatekey: ``VOLC_SECRETKEY``) and no token names something public (url, host,
    algorithm, public key, path, file, ...)."""
    tokens = _tokens(name or "")
    if any(t in _PUBLIC_TOKENS for t in tokens):
        return False
    return any(t in _SECRET_TOKENS or t.endswith(_SECRET_ENDINGS) for t in tokens)


def guess_secret(name: str | None, decl: Mapping[str, Any] | None = None) -> bool:
    """The name rule for an input whose publisher did not say ``isSecret``: :func:`looks_secret`,
    except for typed values (``format`` other than ``string``) and values with ``choices``."""
    decl = decl if isinstance(decl, Mapping) else {}
    fmt = _get(decl, "format")
    if isinstance(fmt, str) and fmt and fmt != "string":
        return False
    if _get(decl, "choices"):
        return False
    return looks_secret(name)


def literal_placeholder(value: str | None) -> bool:
    """True when a fixed value is a stand-in a person was meant to replace (``YOUR_API_KEY``,
    ``<token>``, ``‹absolute_path›``, ``path/to/index.js``, ``/ABSOLUTE/PATH/TO/...``)."""
    return bool(value) and not placeholders(value) and bool(_LITERAL.search(value or ""))


def placeholders(text: str | None) -> list[str]:
    """Distinct ``{name}`` (and ``{{name}}``, ``${input:name}``) placeholders of ``text``, in order."""
    return list(dict.fromkeys(PLACEHOLDER.findall(normalize_placeholders(text or ""))))


def normalize_placeholders(text: str) -> str:
    """``{{name}}`` (Mustache style) and ``${input:name}`` (VS Code style), as some publishers
    write them → ``{name}``."""
    text = _VSCODE_INPUT.sub(lambda m: "{" + m.group(1) + "}", text)
    return _MUSTACHE.sub(lambda m: "{" + m.group(1) + "}", text)


def unwrap(doc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(server, _meta)`` from a ServerResponse wrapper or a plain ServerDetail."""
    inner = doc.get("server")
    if isinstance(inner, Mapping):
        meta = doc.get("_meta")
        return dict(inner), dict(meta) if isinstance(meta, Mapping) else {}
    return dict(doc), {}


def _get(d: Any, key: str, default: Any = None) -> Any:
    """``d[key]`` under its camelCase name or the 2025-07-09 snake_case one."""
    if not isinstance(d, Mapping):
        return default
    if key in d:
        return d[key]
    snake = re.sub(r"([A-Z])", r"_\1", key).lower()
    return d.get(snake, default)


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _choices(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    out = [s for s in (_str(v) for v in value) if s is not None]
    return out or None


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _secret(
    decl: Mapping[str, Any], holder: Mapping[str, Any] | None, names: Iterable[str | None]
) -> tuple[bool, bool]:
    """``(secret, guessed)``: ``isSecret`` where written (declaration first, then the holder),
    else the name rule on ``names``."""
    for src in (decl, holder or {}):
        said = _get(src, "isSecret")
        if said is not None:
            return bool(said), False
    guessed = any(guess_secret(n, decl or holder) for n in names if n)
    return guessed, guessed
