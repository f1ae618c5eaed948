"""Parse one official ``server.json`` document into the normalized :class:`Detail`.

Accepts every released ``$schema`` (2025-07-09 snake_case … 2025-12-11 camelCase), the
schema-less 2025-09-29 seed entries, and either a plain ServerDetail or the API's
``{"server": …, "_meta": …}`` wrapper. Nothing is strictly validated: missing versions,
``"repository": {}``, argument ``type: ""`` and the like are tolerated; packages of an
unknown registry type and remotes of an unknown transport are skipped.

Required keys: one rule for every input
----------------------------------------
An *input* is an environment variable, a header (package transport or remote), a runtime
or package argument, or a transport URL. A *placeholder* is ``{name}`` (or Mustache-style
``{{name}}``) with ``name`` matching ``[A-Za-z_][A-Za-z0-9_.-]*`` and not preceded by ``$``
(``${…}`` is shell/IDE syntax, left alone).

1. An input **with a** ``value`` is fixed. Each distinct placeholder in the value becomes
   one key named after the placeholder, *declared* by the input's ``variables[name]``
   when present. A value without placeholders yields no key, unless it is a *literal
   placeholder* (:func:`literal_placeholder`: ``YOUR_API_KEY``, ``<token>``, ``‹path›``,
   ``path/to/…``): then the input is treated as open (rule 2), required, with a ``note``.
2. An input **without a** ``value`` yields one key, declared by the input itself:
   env var → its name; header → its name; argument → named after ``name`` without
   leading dashes, else ``valueHint`` (when it is a plain name), else ``argument_<i>``. Every declared input has a key,
   required or not. An *optional* argument key is ``off_unless_set``: its default is shown
   but never applied, so the argument is left out unless the user sets it. A named argument
   that takes no value (``format: boolean``, or optional and not secret with no
   valueHint/default/choices/format) is a *flag*: its key has choices ``true``/``false`` and the bare flag is passed only when true;
   a *required* flag is simply always passed and has no key.
3. URL placeholders: on a remote they are declared by the remote's ``variables``. On a
   package transport a name that already is a key of the package is reused; a name of a
   fixed, placeholder-free env var or argument (``name`` or ``valueHint``) is substituted
   into the URL; anything else becomes a key, declared by the same-named input if any.

Fields of a key: ``kind`` is where it occurs (``env``, ``header``, ``argument``,
``url_variable``). ``required``: an open input's ``isRequired``; a placeholder's declared
``isRequired``, or True when it has no ``default`` (the fixed value cannot be rendered
without it). ``default``/``choices``/``format``/``placeholder``/``description`` come from the
declaration (a placeholder falls back to the holding input's description). ``in_argv`` =
argument key that is secret. A name met twice in one package keeps its first description;
``required``, ``secret`` and ``in_argv`` are OR-ed.

Secret: ``isSecret`` is authoritative wherever the publisher wrote it (on the declaration,
else on the input holding the placeholder). Only when neither says anything does the name
rule :func:`guess_secret` apply (then ``secret_guessed`` is set): a name token is key,
token, secret, password, passwd, credential(s) or authorization (or ends in apikey, token,
secret, password), and no token says url/uri/host/endpoint/algorithm/public/path/file/dir/
name/type/ttl, and the value is not typed (``format`` other than ``string``) nor has
``choices``.

Templates: ``PackageOption.env`` maps each env var to ``"{NAME}"`` (open) or its fixed
value; ``headers`` likewise (``"{Header-Name}"`` for an open header); ``url`` keeps its
placeholders. Filling them is the launcher's job.

Status: ``_meta["io.modelcontextprotocol.registry/official"]`` gives ``status`` (kept on the
Detail when it is not ``active``), ``isLatest`` and ``publishedAt``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .models import Argument, Detail, KeyKind, PackageOption, RequiredKey

__all__ = [
    "OFFICIAL_META",
    "PACKAGE_TYPES",
    "PLACEHOLDER",
    "guess_secret",
    "literal_placeholder",
    "looks_secret",
    "normalize_placeholders",
    "parse_server_json",
    "placeholders",
    "unwrap",
]

log = logging.getLogger(__name__)

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
PACKAGE_TYPES = ("npm", "pypi", "oci", "nuget", "mcpb")
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")
_MUSTACHE = re.compile(r"(?<!\$)\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}")
_SECRET_TOKENS = {"key", "token", "secret", "password", "passwd", "credential", "credentials", "authorization"}
_SECRET_ENDINGS = ("apikey", "token", "secret", "password")
_PUBLIC_TOKENS = {"url", "uri", "host", "hostname", "endpoint", "algorithm", "alg", "public", "path",
                  "file", "dir", "directory", "name", "type", "ttl", "header", "id"}
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
    (or ends in apikey/token/secret/password) and no token names something public (url, host,
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
    """Distinct ``{name}`` (and ``{{name}}``) placeholders of ``text``, in order of appearance."""
    text = _MUSTACHE.sub(lambda m: "{" + m.group(1) + "}", text or "")
    return list(dict.fromkeys(PLACEHOLDER.findall(text)))


def normalize_placeholders(text: str) -> str:
    """``{{name}}`` (Mustache style, as some publishers write) → ``{name}``."""
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


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _secret(decl: Mapping[str, Any], holder: Mapping[str, Any] | None, names: Iterable[str | None]) -> tuple[bool, bool]:
    """``(secret, guessed)``: ``isSecret`` where written (declaration first, then the holder),
    else the name rule on ``names``."""
    for src in (decl, holder or {}):
        said = _get(src, "isSecret")
        if said is not None:
            return bool(said), False
    guessed = any(guess_secret(n, decl or holder) for n in names if n)
    return guessed, guessed


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
        if key.secret and not old.secret:
            old.secret, old.secret_guessed = True, key.secret_guessed
        old.in_argv = old.in_argv or key.in_argv
        old.off_unless_set = old.off_unless_set and key.off_unless_set
        old.note = old.note or key.note

    def open(
        self, name: str, decl: Mapping[str, Any], kind: KeyKind, *, required: bool | None = None,
        note: str | None = None, flag: bool = False,
    ) -> None:
        """Rule 2: an input without a value is itself the key."""
        secret, guessed = (False, False) if flag else _secret(decl, None, [name])
        req = bool(_get(decl, "isRequired")) if required is None else required
        optional_arg = kind == "argument" and not req
        self.add(
            RequiredKey(
                name=name,
                description=_str(_get(decl, "description")) or "",
                secret=secret,
                secret_guessed=guessed,
                required=req,
                default=None if note else _str(_get(decl, "default")),
                choices=["true", "false"] if flag else _choices(_get(decl, "choices")),
                format="boolean" if flag else _str(_get(decl, "format")),
                placeholder=_str(_get(decl, "placeholder")) or (None if flag else _str(_get(decl, "valueHint"))),
                kind=kind,
                in_argv=kind == "argument" and secret,
                note=note,
                off_unless_set=optional_arg,
            )
        )

    def placeholder(
        self, name: str, decl: Mapping[str, Any] | None, holder: Mapping[str, Any], kind: KeyKind
    ) -> None:
        """Rule 1/3: one key per placeholder, declared by ``decl`` (None when undeclared)."""
        decl = decl if isinstance(decl, Mapping) else {}
        default = _str(_get(decl, "default"))
        secret, guessed = _secret(decl, holder, [name, _str(_get(holder, "name"))])
        self.add(
            RequiredKey(
                name=name,
                description=_str(_get(decl, "description")) or _str(_get(holder, "description")) or "",
                secret=secret,
                secret_guessed=guessed,
                required=bool(_get(decl, "isRequired")) or default is None,
                default=default,
                choices=_choices(_get(decl, "choices")),
                format=_str(_get(decl, "format")),
                placeholder=_str(_get(decl, "placeholder")),
                kind=kind,
                in_argv=kind == "argument" and secret,
            )
        )

    def templated(self, value: str, holder: Mapping[str, Any], kind: KeyKind) -> None:
        variables = _get(holder, "variables")
        variables = variables if isinstance(variables, Mapping) else {}
        for name in placeholders(value):
            self.placeholder(name, variables.get(name), holder, kind)


def _literal_note(value: str) -> str:
    shown = value if len(value) <= 60 else value[:57] + "..."
    return f"the registry entry gives {shown!r} here, a placeholder to replace: supply the real value"


_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def _arg_key_name(arg: Mapping[str, Any], index: int) -> str:
    """``name`` without dashes, else ``valueHint`` when it is a plain name, else ``argument_<i>``."""
    name = (_str(_get(arg, "name")) or "").lstrip("-")
    hint = _str(_get(arg, "valueHint")) or ""
    return name or (hint if _KEY_NAME.match(hint) else "") or f"argument_{index}"


def _is_flag(arg: Mapping[str, Any], kind: str) -> bool:
    """A named argument that takes no value (see rule 2)."""
    if kind != "named":
        return False
    fmt = _str(_get(arg, "format"))
    if fmt == "boolean":
        return True
    if _get(arg, "isRequired") or _get(arg, "isSecret"):
        return False
    return not (fmt or _get(arg, "valueHint") or _get(arg, "default") is not None or _get(arg, "choices"))


_ENV_ARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


def _arguments(raw: Any, keys: _Keys, fixed: dict[str, str], offset: int) -> list[Argument]:
    out: list[Argument] = []
    for i, arg in enumerate(_dicts(raw), start=offset):
        name, value = _str(_get(arg, "name")), _str(_get(arg, "value"))
        if value is not None:
            value = normalize_placeholders(value)
        kind = _str(_get(arg, "type")) or ""
        if kind not in ("positional", "named"):
            kind = "named" if (name or "").startswith("-") else "positional"
        key: str | None = None
        flag = False
        required = bool(_get(arg, "isRequired"))
        if value is not None and literal_placeholder(value):
            env_form = _ENV_ARG.match(value) if name in ("-e", "--env") else None
            if env_form and literal_placeholder(env_form.group(2)):
                key = env_form.group(1)
                keys.open(key, arg, "argument", required=True, note=_literal_note(env_form.group(2)))
                value = f"{key}={{{key}}}"
                key = None
            else:
                key = _arg_key_name(arg, i)
                keys.open(key, arg, "argument", required=True, note=_literal_note(value))
                value = None
            required = True
        elif value is not None:
            keys.templated(value, arg, "argument")
            if not placeholders(value):
                for ref in (name.lstrip("-") if name else None, _str(_get(arg, "valueHint"))):
                    if ref:
                        fixed.setdefault(ref, value)
        elif _is_flag(arg, kind):
            flag = True
            if not required:  # a required flag is always passed and needs no key
                key = _arg_key_name(arg, i)
                keys.open(key, arg, "argument", flag=True)
        else:
            key = _arg_key_name(arg, i)
            keys.open(key, arg, "argument")
        out.append(
            Argument(
                type=kind,  # type: ignore[arg-type]
                name=name,
                value=value,
                value_hint=_str(_get(arg, "valueHint")),
                default=_str(_get(arg, "default")),
                required=required,
                secret=bool(_get(arg, "isSecret")),
                repeated=bool(_get(arg, "isRepeated")),
                description=_str(_get(arg, "description")) or "",
                key=key,
                flag=flag,
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


_AUTH_SCHEME = re.compile(r"^(Bearer|Basic|Token)\s+(.+)$", re.I | re.S)


def _input_template(name: str, item: Mapping[str, Any], kind: KeyKind, keys: _Keys) -> str:
    """An env var's or header's template: its fixed ``value`` (placeholders become keys), or
    ``{name}`` with a key of its own when it has no value (or only a literal placeholder)."""
    value = _str(_get(item, "value"))
    if value is None:
        keys.open(name, item, kind)
        return "{" + name + "}"
    value = normalize_placeholders(value)
    if literal_placeholder(value):
        scheme = _AUTH_SCHEME.match(value) if kind == "header" else None
        literal = scheme.group(2) if scheme and literal_placeholder(scheme.group(2)) else value
        keys.open(name, item, kind, required=True, note=_literal_note(literal))
        if literal is not value:
            return f"{scheme.group(1)} {{{name}}}"  # type: ignore[union-attr]
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
        if value is not None and not placeholders(value) and not literal_placeholder(value):
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
    url = normalize_placeholders(url) if url else url
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
    url = normalize_placeholders(_str(_get(remote, "url")) or "")
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
    official = _meta.get(OFFICIAL_META)
    official = official if isinstance(official, Mapping) else {}
    status = (_str(_get(official, "status")) or "").lower() or None
    latest = _get(official, "isLatest")
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
        status=None if status in (None, "active") else status,
        is_latest=latest if isinstance(latest, bool) else None,
        published_at=_str(_get(official, "publishedAt")),
        raw=dict(doc),
    )
