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
``{{name}}``, or VS Code's ``${input:name}``) with ``name`` matching ``[A-Za-z_][A-Za-z0-9_.-]*``
and not preceded by ``$`` (any other ``${…}`` is shell/IDE syntax, left alone).

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
secret, password, secretkey, privatekey), and no token says url/uri/host/endpoint/algorithm/public/path/file/dir/
name/type/ttl, and the value is not typed (``format`` other than ``string``) nor has
``choices``.

Templates: ``PackageOption.env`` maps each env var to ``"{NAME}"`` (open) or its fixed
value; ``headers`` likewise (``"{Header-Name}"`` for an open header); ``url`` keeps its
placeholders. Filling them is the launcher's job.

Runner flags: a runtime argument that repeats a flag the runner is always given (npm ``-y``,
an image's ``-i``/``--rm``, nuget ``--yes``; :data:`RUNNER_FLAGS`) is dropped before the rules.

Status: ``_meta["io.modelcontextprotocol.registry/official"]`` gives ``status`` (kept on the
Detail when it is not ``active``), ``isLatest`` and ``publishedAt``.

Where: one input's readers and the name rule are in ``inputs.py``; the key collection and the
templates in ``required_keys.py``; this module builds the packages, remotes and the Detail.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from . import inputs as _inputs
from .inputs import (
    _HTTP_TRANSPORTS,
    OFFICIAL_META,
    PACKAGE_TYPES,
    _dicts,
    _get,
    _str,
    literal_placeholder,
    normalize_placeholders,
    placeholders,
    unwrap,
)
from .models import Detail, PackageOption
from .required_keys import KeySet, input_template, mark_smithery_key, template_arguments, template_headers

__all__ = [*_inputs.__all__, "parse_server_json"]  # the input rules are importable from here as before

log = logging.getLogger(__name__)

#: Flags the runner is always given (``setup_agent/launch/packages.py``): a runtime argument
#: that repeats one is dropped, so it neither becomes a setting that does nothing (npm's
#: ``-y`` as a key ``y``) nor is passed twice (a ``--rm`` flag key of an image).
RUNNER_FLAGS = {
    "npm": frozenset({"-y", "--yes"}),
    "oci": frozenset({"-i", "--interactive", "--rm"}),
    "nuget": frozenset({"--yes"}),
}


def _without_runner_flags(raw: Any, pkg_type: str) -> list[Mapping[str, Any]]:
    own = RUNNER_FLAGS.get(pkg_type, frozenset())
    return [a for a in _dicts(raw) if not (_str(_get(a, "name")) in own and _str(_get(a, "value")) in (None, ""))]


def _package(pkg: Mapping[str, Any], pkg_type: str, pkg_id: str) -> PackageOption:
    keys, env = KeySet(), {}
    fixed: dict[str, str] = {}
    inputs: dict[str, Mapping[str, Any]] = {}
    for ev in _dicts(_get(pkg, "environmentVariables")):
        name = _str(_get(ev, "name"))
        if not name:
            continue
        inputs.setdefault(name, ev)
        env[name] = input_template(name, ev, "env", keys)
        value = _str(_get(ev, "value"))
        if value is not None and not placeholders(value) and not literal_placeholder(value):
            fixed.setdefault(name, value)
    runtime_raw = _without_runner_flags(_get(pkg, "runtimeArguments"), pkg_type)
    package_raw = _get(pkg, "packageArguments")
    runtime_args = template_arguments(runtime_raw, keys, fixed, 0)
    package_args = template_arguments(package_raw, keys, fixed, len(runtime_args))
    for arg in _dicts(runtime_raw) + _dicts(package_raw):
        for ref in ((_str(_get(arg, "name")) or "").lstrip("-"), _str(_get(arg, "valueHint"))):
            if ref:
                inputs.setdefault(ref, arg)
    transport = _get(pkg, "transport")
    transport = transport if isinstance(transport, Mapping) else {}
    ttype = _HTTP_TRANSPORTS.get(_str(_get(transport, "type")) or "", "stdio")
    headers = template_headers(_get(transport, "headers"), keys)
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
    keys = KeySet()
    url = normalize_placeholders(_str(_get(remote, "url")) or "")
    variables = _get(remote, "variables")
    variables = variables if isinstance(variables, Mapping) else {}
    for name in placeholders(url):
        keys.placeholder(name, variables.get(name), remote, "url_variable")
    headers = template_headers(_get(remote, "headers"), keys)
    mark_smithery_key(url, keys.keys.values())
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
