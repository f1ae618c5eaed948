"""The required keys of one package or remote, collected from its inputs (rules 1-3 of
:mod:`registry_clients.serverjson`), and the env, header and argument templates that name them.

A Smithery-hosted remote (``*.smithery.ai``, from Smithery or from the official registry's
``ai.smithery/*`` entries) authenticates with the user's Smithery API key in the
``smithery_api_key`` header key: :func:`mark_smithery_key` says so in words a person can act on
(what it is, where to get one) and marks it ``provided_by="smithery"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from .inputs import _choices, _dicts, _get, _secret, _str, literal_placeholder, normalize_placeholders, placeholders
from .models import Argument, KeyKind, RequiredKey

__all__ = [
    "SMITHERY_KEY",
    "SMITHERY_KEY_DESCRIPTION",
    "KeySet",
    "input_template",
    "mark_smithery_key",
    "smithery_hosted",
    "template_arguments",
    "template_headers",
]

SMITHERY_KEY = "smithery_api_key"
SMITHERY_KEY_DESCRIPTION = (
    "Your Smithery API key (servers hosted by Smithery need it). Create one at "
    "https://smithery.ai/account/api-keys; it is the same key mcp-setup uses to search Smithery "
    "(MCP_SETUP_SMITHERY_API_KEY)."
)


class KeySet:
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
        self,
        name: str,
        decl: Mapping[str, Any],
        kind: KeyKind,
        *,
        required: bool | None = None,
        note: str | None = None,
        flag: bool = False,
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

    def placeholder(self, name: str, decl: Mapping[str, Any] | None, holder: Mapping[str, Any], kind: KeyKind) -> None:
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


def template_arguments(raw: Any, keys: KeySet, fixed: dict[str, str], offset: int) -> list[Argument]:
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


def template_headers(raw: Any, keys: KeySet) -> dict[str, str]:
    headers: dict[str, str] = {}
    for h in _dicts(raw):
        name = _str(_get(h, "name"))
        if not name:
            continue
        headers[name] = input_template(name, h, "header", keys)
    return headers


_AUTH_SCHEME = re.compile(r"^(Bearer|Basic|Token)\s+(.+)$", re.I | re.S)


def input_template(name: str, item: Mapping[str, Any], kind: KeyKind, keys: KeySet) -> str:
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


def smithery_hosted(url: str) -> bool:
    """Whether ``url`` is served by Smithery (``smithery.ai`` or a subdomain, nothing that only ends alike)."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    return host == "smithery.ai" or host.endswith(".smithery.ai")


def mark_smithery_key(url: str, keys: Iterable[RequiredKey]) -> None:
    """On a Smithery-hosted ``url``: the ``smithery_api_key`` key is the user's Smithery API key."""
    if not smithery_hosted(url):
        return
    for key in keys:
        if key.name == SMITHERY_KEY:
            key.description = SMITHERY_KEY_DESCRIPTION
            key.secret = True
            key.provided_by = "smithery"
