"""Parse one official ``server.json`` document into the normalized :class:`Detail`.

Accepts every released ``$schema`` (2025-07-09 snake_case … 2025-12-11 camelCase), the
schema-less 2025-09-29 seed entries, and either a plain ServerDetail or the API's
``{"server": …, "_meta": …}`` wrapper. Nothing is strictly validated: missing versions,
``"repository": {}``, argument ``type: ""`` and the like are tolerated; packages of an
unknown registry type and remotes of an unknown transport are skipped.

Required keys: one rule for every input
----------------------------------------
An *input* is an environment variable, a header (package transport or remote), a runtime
or package argument, or a transport URL. A *placeholder* is ``{name}`` with ``name``
matching ``[A-Za-z_][A-Za-z0-9_.-]*`` and not preceded by ``$`` (``${…}`` is shell/IDE
syntax, left alone).

1. An input **with a** ``value`` is fixed. Each distinct placeholder in the value becomes
   one key named after the placeholder, *declared* by the input's ``variables[name]``
   when present. A value without placeholders yields no key.
2. An input **without a** ``value`` yields one key, declared by the input itself:
   env var → its name; header → its name; argument → only when ``isRequired``, named
   after ``name`` without leading dashes, else ``valueHint``, else ``argument_<i>``.
3. URL placeholders: on a remote they are declared by the remote's ``variables``. On a
   package transport a name that already is a key of the package is reused; a name of a
   fixed, placeholder-free env var or argument (``name`` or ``valueHint``) is substituted
   into the URL; anything else becomes a key, declared by the same-named input if any.

Fields of a key: ``kind`` is where it occurs (``env``, ``header``, ``argument``,
``url_variable``). ``required``: an open input's ``isRequired``; a placeholder's declared
``isRequired``, or True when it has no ``default`` (the fixed value cannot be rendered
without it). ``secret``: any ``isSecret`` on the declaration or on the input holding the
placeholder, or a name (the key's or the holding input's) that :func:`looks_secret`.
``default``/``choices``/``description`` come from the declaration (a placeholder falls back
to the holding input's description). ``in_argv`` = argument key that is secret. A name met
twice in one package keeps its first description; ``required``, ``secret`` and ``in_argv``
are OR-ed.

Templates: ``PackageOption.env`` maps each env var to ``"{NAME}"`` (open) or its fixed
value; ``headers`` likewise (``"{Header-Name}"`` for an open header); ``url`` keeps its
placeholders. Filling them is the launcher's job.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .models import Argument, Detail, KeyKind, PackageOption, RequiredKey

__all__ = [
    "PACKAGE_TYPES",
    "PLACEHOLDER",
    "looks_secret",
    "parse_server_json",
    "placeholders",
    "unwrap",
]

log = logging.getLogger(__name__)

PACKAGE_TYPES = ("npm", "pypi", "oci", "nuget", "mcpb")
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "credential", "authorization")
_HTTP_TRANSPORTS = {"streamable-http": "streamable-http", "http": "streamable-http", "sse": "sse"}


def looks_secret(name: str | None) -> bool:
    """True when a name contains key/token/secret/password/passwd/credential/authorization."""
    low = (name or "").lower()
    return any(word in low for word in _SECRET_WORDS)


def placeholders(text: str | None) -> list[str]:
    """Distinct ``{name}`` placeholders of ``text``, in order of appearance."""
    return list(dict.fromkeys(PLACEHOLDER.findall(text or "")))


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


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


class _Keys:
    """Collects a package's required keys under the module rule (first wins, flags OR-ed)."""

    def __init__(self) -> None:
        self.keys: dict[str, RequiredKey] = {}

    def add(self, key: RequiredKey) -> None:
        old = self.keys.get(key.name)
        if old is None:
            self.keys[key.name] = key
            return
        old.required = old.required or key.required
        old.secret = old.secret or key.secret
        old.in_argv = old.in_argv or key.in_argv

    def open(self, name: str, decl: Mapping[str, Any], kind: KeyKind) -> None:
        """Rule 2: an input without a value is itself the key."""
        secret = bool(_get(decl, "isSecret")) or looks_secret(name)
        self.add(
            RequiredKey(
                name=name,
                description=_str(_get(decl, "description")) or "",
                secret=secret,
                required=bool(_get(decl, "isRequired")),
                default=_str(_get(decl, "default")),
                choices=_choices(_get(decl, "choices")),
                kind=kind,
                in_argv=kind == "argument" and secret,
            )
        )

    def placeholder(
        self, name: str, decl: Mapping[str, Any] | None, holder: Mapping[str, Any], kind: KeyKind
    ) -> None:
        """Rule 1/3: one key per placeholder, declared by ``decl`` (None when undeclared)."""
        decl = decl if isinstance(decl, Mapping) else {}
        default = _str(_get(decl, "default"))
        secret = (
            bool(_get(decl, "isSecret"))
            or bool(_get(holder, "isSecret"))
            or looks_secret(name)
            or looks_secret(_str(_get(holder, "name")))
        )
        self.add(
            RequiredKey(
                name=name,
                description=_str(_get(decl, "description")) or _str(_get(holder, "description")) or "",
                secret=secret,
                required=bool(_get(decl, "isRequired")) or default is None,
                default=default,
                choices=_choices(_get(decl, "choices")),
                kind=kind,
                in_argv=kind == "argument" and secret,
            )
        )

    def templated(self, value: str, holder: Mapping[str, Any], kind: KeyKind) -> None:
        variables = _get(holder, "variables")
        variables = variables if isinstance(variables, Mapping) else {}
        for name in placeholders(value):
            self.placeholder(name, variables.get(name), holder, kind)


def _arg_key_name(arg: Mapping[str, Any], index: int) -> str:
    name = (_str(_get(arg, "name")) or "").lstrip("-")
    return name or _str(_get(arg, "valueHint")) or f"argument_{index}"


def _arguments(raw: Any, keys: _Keys, fixed: dict[str, str], offset: int) -> list[Argument]:
    out: list[Argument] = []
    for i, arg in enumerate(_dicts(raw), start=offset):
        name, value = _str(_get(arg, "name")), _str(_get(arg, "value"))
        kind = _str(_get(arg, "type")) or ""
        if kind not in ("positional", "named"):
            kind = "named" if (name or "").startswith("-") else "positional"
        key: str | None = None
        if value is not None:
            keys.templated(value, arg, "argument")
            if not placeholders(value):
                for ref in (name.lstrip("-") if name else None, _str(_get(arg, "valueHint"))):
                    if ref:
                        fixed.setdefault(ref, value)
        elif _get(arg, "isRequired"):
            key = _arg_key_name(arg, i)
            keys.open(key, arg, "argument")
        out.append(
            Argument(
                type=kind,  # type: ignore[arg-type]
                name=name,
                value=value,
                value_hint=_str(_get(arg, "valueHint")),
                default=_str(_get(arg, "default")),
                required=bool(_get(arg, "isRequired")),
                secret=bool(_get(arg, "isSecret")),
                repeated=bool(_get(arg, "isRepeated")),
                description=_str(_get(arg, "description")) or "",
                key=key,
            )
        )
    return out


def _headers(raw: Any, keys: _Keys) -> dict[str, str]:
    headers: dict[str, str] = {}
    for h in _dicts(raw):
        name = _str(_get(h, "name"))
        if not name:
            continue
        headers[name] = _input_template(name, h, "header", keys)
    return headers


def _input_template(name: str, item: Mapping[str, Any], kind: KeyKind, keys: _Keys) -> str:
    """An env var's or header's template: its fixed ``value`` (placeholders become keys), or
    ``{name}`` with a key of its own when it has no value."""
    value = _str(_get(item, "value"))
    if value is None:
        keys.open(name, item, kind)
        return "{" + name + "}"
    keys.templated(value, item, kind)
    return value


def _package(pkg: Mapping[str, Any], pkg_type: str, pkg_id: str) -> PackageOption:
    keys, env, fixed = _Keys(), {}, {}
    inputs: dict[str, Mapping[str, Any]] = {}
    for ev in _dicts(_get(pkg, "environmentVariables")):
        name = _str(_get(ev, "name"))
        if not name:
            continue
        inputs.setdefault(name, ev)
        env[name] = _input_template(name, ev, "env", keys)
        value = _str(_get(ev, "value"))
        if value is not None and not placeholders(value):
            fixed.setdefault(name, value)
    runtime_raw, package_raw = _get(pkg, "runtimeArguments"), _get(pkg, "packageArguments")
    runtime_args = _arguments(runtime_raw, keys, fixed, 0)
    package_args = _arguments(package_raw, keys, fixed, len(runtime_args))
    for arg in _dicts(runtime_raw) + _dicts(package_raw):
        for ref in ((_str(_get(arg, "name")) or "").lstrip("-"), _str(_get(arg, "valueHint"))):
            if ref:
                inputs.setdefault(ref, arg)
    transport = _get(pkg, "transport")
    transport = transport if isinstance(transport, Mapping) else {}
    ttype = _HTTP_TRANSPORTS.get(_str(_get(transport, "type")) or "", "stdio")
    headers = _headers(_get(transport, "headers"), keys)
    url = _str(_get(transport, "url")) if ttype != "stdio" else None
    for name in placeholders(url):
        if name in keys.keys:
            continue
        if name in fixed:
            url = url.replace("{" + name + "}", fixed[name])  # type: ignore[union-attr]
        else:
            keys.placeholder(name, inputs.get(name), transport, "url_variable")
    identifier = _str(_get(pkg, "identifier")) or _str(_get(pkg, "name")) or ""
    return PackageOption(
        id=pkg_id,
        type=pkg_type,  # type: ignore[arg-type]
        identifier=identifier,
        version=_str(_get(pkg, "version")),
        file_sha256=_str(_get(pkg, "fileSha256")),
        registry_base_url=_str(_get(pkg, "registryBaseUrl")),
        runtime_hint=_str(_get(pkg, "runtimeHint")),
        transport=ttype,  # type: ignore[arg-type]
        url=url,
        headers=headers,
        runtime_arguments=runtime_args,
        package_arguments=package_args,
        env=env,
        required_keys=list(keys.keys.values()),
    )


def _remote(remote: Mapping[str, Any], ttype: str, pkg_id: str) -> PackageOption:
    keys = _Keys()
    url = _str(_get(remote, "url")) or ""
    variables = _get(remote, "variables")
    variables = variables if isinstance(variables, Mapping) else {}
    for name in placeholders(url):
        keys.placeholder(name, variables.get(name), remote, "url_variable")
    headers = _headers(_get(remote, "headers"), keys)
    return PackageOption(
        id=pkg_id,
        type="remote",
        identifier=url,
        transport=ttype,  # type: ignore[arg-type]
        url=url,
        headers=headers,
        required_keys=list(keys.keys.values()),
    )


def _ids(types: Iterable[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for t in types:
        seen[t] = seen.get(t, 0) + 1
        out.append(t if seen[t] == 1 else f"{t}:{seen[t]}")
    return out


def parse_server_json(doc: Mapping[str, Any], *, source: str) -> Detail:
    """One server.json document (plain or wrapped) as a :class:`Detail` from ``source``.

    Raises ValueError when the document is not an object or has no ``name``.
    """
    if not isinstance(doc, Mapping):
        raise ValueError("a server.json document must be a JSON object")
    server, _meta = unwrap(doc)
    name = _str(server.get("name"))
    if not name:
        raise ValueError("a server.json document needs a non-empty 'name'")
    typed: list[tuple[str, Mapping[str, Any], str]] = []
    for pkg in _dicts(_get(server, "packages")):
        ptype = (_str(_get(pkg, "registryType")) or _str(_get(pkg, "registryName")) or "").lower()
        if ptype in PACKAGE_TYPES:
            typed.append((ptype, pkg, "stdio"))
        else:
            log.debug("%s: skipping package of unsupported type %r", name, ptype)
    for remote in _dicts(_get(server, "remotes")):
        ttype = _HTTP_TRANSPORTS.get(_str(_get(remote, "type")) or "")
        if ttype:
            typed.append(("remote", remote, ttype))
        else:
            log.debug("%s: skipping remote of unsupported transport %r", name, _get(remote, "type"))
    options = [
        _remote(raw, ttype, pid) if ptype == "remote" else _package(raw, ptype, pid)
        for (ptype, raw, ttype), pid in zip(typed, _ids(t for t, _, _ in typed))
    ]
    repo = _get(server, "repository")
    repo_url = _str(_get(repo, "url")) or None
    return Detail(
        qualified_name=name,
        display_name=_str(server.get("title")) or name,
        description=_str(server.get("description")) or "",
        version=_str(server.get("version")),
        source=source,
        package_types=list(dict.fromkeys(o.type for o in options)),
        remote=any(o.type == "remote" for o in options),
        homepage=_str(_get(server, "websiteUrl")) or repo_url,
        packages=options,
        repository_url=repo_url,
        raw=dict(doc),
    )
