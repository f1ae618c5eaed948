"""The judge for real registry entries: what a server.json says, restated independently of
``registry_clients/serverjson.py`` and ``setup_agent/launch/packages.py``, and the listed exceptions.

Used by tests/setup_agent/setup/test_registry_judge.py (every entry of the three real fixture files, through the
local catalog and the fake official registry) and tests/registry_clients/test_registry_serverjson.py.

* :func:`expected_options` — per option id, the keys the entry declares, with kind, required,
  secret, secret_guessed, in_argv, default (the rule, written again from its text).
* :func:`judge_spec` — a built launch spec checked against the package it came from.
* :data:`REFUSED` — every (server, option id) the builder refuses, with the code and why.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

__all__ = ["REFUSED", "expected_options", "judge_spec", "literal", "secretish"]

#: (server name, option id) → (error code, why the entry cannot run as written).
REFUSED: dict[tuple[str, str], tuple[str, str]] = {
    ("io.github.ONLYOFFICE/docspace", "npm:2"): (
        "invalid_entry",
        "a local npm package that 'serves' SSE on https://example.com: a placeholder host",
    ),
    ("io.github.ONLYOFFICE/docspace", "npm:3"): (
        "invalid_entry",
        "a local npm package that 'serves' HTTP on https://example.com: a placeholder host",
    ),
    ("io.github.ONLYOFFICE/docspace", "oci:2"): (
        "invalid_entry",
        "a local image that 'serves' SSE on https://example.com: a placeholder host",
    ),
    ("io.github.ONLYOFFICE/docspace", "oci:3"): (
        "invalid_entry",
        "a local image that 'serves' HTTP on https://example.com: a placeholder host",
    ),
    ("io.github.SamYuan1990/i18n-agent-action", "oci"): (
        "invalid_entry",
        "a local image whose SSE URL is https://example.com:8080: not this machine",
    ),
    ("io.github.mia-platform/console-mcp-server", "npm"): (
        "invalid_entry",
        "its npm runtimeArguments are a `docker run` command line (run -i --rm -e … image)",
    ),
}

_SECRET_WORDS = {"key", "token", "secret", "password", "passwd", "credential", "credentials", "authorization"}
_PUBLIC_WORDS = {
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
    r"(?i)(<[^<>]{2,}>|‹[^‹›]+›|\byour([_\-]|[A-Z]{2,}|\b)|(^|[/\\:])path[/\\]to[/\\]"
    r"|/absolute/path|/full/path|\b(replace|change)[_\-]?me\b|x{4,})"
)


def _f(d: Any, camel: str) -> Any:
    if not isinstance(d, dict):
        return None
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return d.get(camel, d.get(snake))


def _s(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _ph(text: Any) -> list[str]:
    if not isinstance(text, str):
        return []
    text = re.sub(r"\$\{input:([A-Za-z_][A-Za-z0-9_.\-]*)\}", r"{\1}", text)  # VS Code's inputs
    text = re.sub(r"(?<!\$)\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}", r"{\1}", text)
    names: list[str] = []
    for m in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_.\-]*)\}", text):
        if m.start() > 0 and text[m.start() - 1] == "$":
            continue
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def literal(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not _ph(value) and bool(_LITERAL.search(value))


def secretish(name: Any, decl: Any = None) -> bool:
    """The name rule: a secret word among the name's words, no public word, not typed, no choices."""
    if not isinstance(name, str):
        return False
    decl = decl if isinstance(decl, dict) else {}
    fmt = _f(decl, "format")
    if (fmt and fmt != "string") or _f(decl, "choices"):
        return False
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).lower()) if w]
    if any(w in _PUBLIC_WORDS for w in words):
        return False
    endings = ("apikey", "token", "secret", "password", "secretkey", "privatekey")
    return any(w in _SECRET_WORDS or w.endswith(endings) for w in words)


class _Expect:
    def __init__(self) -> None:
        self.keys: dict[str, dict[str, Any]] = {}

    def put(self, name: str, kind: str, required: bool, secret: tuple[bool, bool], default: Any) -> None:
        argv = kind == "argument" and secret[0]
        if name in self.keys:
            k = self.keys[name]
            k["required"] |= required
            if secret[0] and not k["secret"]:
                k["secret"], k["secret_guessed"] = secret
            k["in_argv"] |= argv
        else:
            self.keys[name] = {
                "kind": kind,
                "required": required,
                "secret": secret[0],
                "secret_guessed": secret[1],
                "in_argv": argv,
                "default": default,
            }

    @staticmethod
    def _secret(decl: dict, holder: dict | None, names: list[Any]) -> tuple[bool, bool]:
        for src in (decl, holder or {}):
            if _f(src, "isSecret") is not None:
                return bool(_f(src, "isSecret")), False
        guessed = any(secretish(n, decl or holder) for n in names)
        return guessed, guessed

    def open(
        self,
        name: str,
        inp: dict,
        kind: str,
        required: bool | None = None,
        flag: bool = False,
        placeholder_value: bool = False,
    ) -> None:
        secret = (False, False) if flag else self._secret(inp, None, [name])
        default = None if placeholder_value else _s(_f(inp, "default"))
        req = bool(_f(inp, "isRequired")) if required is None else required
        self.put(name, kind, req, secret, default)

    def placeholder(self, name: str, decl: Any, holder: dict, kind: str) -> None:
        decl = decl if isinstance(decl, dict) else {}
        default = _s(_f(decl, "default"))
        secret = self._secret(decl, holder, [name, _f(holder, "name")])
        self.put(name, kind, bool(_f(decl, "isRequired")) or default is None, secret, default)

    def valued(self, inp: dict, kind: str) -> None:
        variables = _f(inp, "variables") or {}
        for name in _ph(_f(inp, "value")):
            self.placeholder(name, variables.get(name), inp, kind)

    def headers(self, headers: Any) -> None:
        for h in headers or []:
            if not _f(h, "name"):
                continue
            if _f(h, "value") is None or literal(re.sub(r"(?i)^(bearer|basic|token)\s+", "", str(_f(h, "value")))):
                self.open(
                    h["name"],
                    h,
                    "header",
                    required=None if _f(h, "value") is None else True,
                    placeholder_value=_f(h, "value") is not None,
                )
            else:
                self.valued(h, "header")


def _is_flag(arg: dict, kind: str) -> bool:
    if kind != "named":
        return False
    if _f(arg, "format") == "boolean":
        return True
    if _f(arg, "isRequired") or _f(arg, "isSecret"):
        return False
    return not (_f(arg, "format") or _f(arg, "valueHint") or _f(arg, "default") is not None or _f(arg, "choices"))


def _kind(arg: dict) -> str:
    kind = _f(arg, "type") or ""
    if kind not in ("positional", "named"):
        kind = "named" if str(_f(arg, "name") or "").startswith("-") else "positional"
    return kind


#: The runners' own flags (npx -y, docker run -i --rm, dnx --yes): a runtime argument repeating one says nothing.
_OWN_FLAGS = {"npm": ("-y", "--yes"), "oci": ("-i", "--interactive", "--rm"), "nuget": ("--yes",)}


def runtime_arguments(pkg: dict) -> list[dict]:
    kind = str(_f(pkg, "registryType") or _f(pkg, "registryName") or "").lower()
    return [
        a
        for a in _f(pkg, "runtimeArguments") or []
        if not (isinstance(a, dict) and _f(a, "name") in _OWN_FLAGS.get(kind, ()) and _f(a, "value") in (None, ""))
    ]


def expected_package_keys(pkg: dict) -> dict[str, dict[str, Any]]:
    e = _Expect()
    fixed: dict[str, str] = {}
    named: dict[str, dict] = {}
    for ev in _f(pkg, "environmentVariables") or []:
        if not _f(ev, "name"):
            continue
        named.setdefault(ev["name"], ev)
        value = _s(_f(ev, "value"))
        if value is None:
            e.open(ev["name"], ev, "env")
        elif literal(value):
            e.open(ev["name"], ev, "env", required=True, placeholder_value=True)
        else:
            e.valued(ev, "env")
            if not _ph(value):
                fixed.setdefault(ev["name"], value)
    args = runtime_arguments(pkg) + list(_f(pkg, "packageArguments") or [])
    for i, arg in enumerate(args):
        hint = _f(arg, "valueHint")
        hint = hint if isinstance(hint, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_.\-]*$", hint) else None
        refs = [r for r in (str(_f(arg, "name") or "").lstrip("-"), hint) if r]
        value = _s(_f(arg, "value"))
        kind = _kind(arg)
        if value is not None and literal(value):
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", value, re.S)
            if _f(arg, "name") in ("-e", "--env") and m and literal(m.group(2)):
                e.open(m.group(1), arg, "argument", required=True, placeholder_value=True)
            else:
                e.open(refs[0] if refs else f"argument_{i}", arg, "argument", required=True, placeholder_value=True)
        elif value is not None:
            e.valued(arg, "argument")
            if not _ph(value):
                for r in refs:
                    fixed.setdefault(r, value)
        elif _is_flag(arg, kind):
            if not _f(arg, "isRequired"):
                e.open(refs[0] if refs else f"argument_{i}", arg, "argument", flag=True)
        else:
            e.open(refs[0] if refs else f"argument_{i}", arg, "argument")
    for arg in args:
        for r in (str(_f(arg, "name") or "").lstrip("-"), _f(arg, "valueHint")):
            if r:
                named.setdefault(r, arg)
    transport = _f(pkg, "transport") or {}
    e.headers(_f(transport, "headers"))
    if _f(transport, "type") in ("streamable-http", "sse", "http"):
        for name in _ph(_f(transport, "url")):
            if name not in e.keys and name not in fixed:
                e.placeholder(name, named.get(name), transport, "url_variable")
    return e.keys


def expected_remote_keys(remote: dict) -> dict[str, dict[str, Any]]:
    e = _Expect()
    for name in _ph(_f(remote, "url")):
        e.placeholder(name, (_f(remote, "variables") or {}).get(name), remote, "url_variable")
    e.headers(_f(remote, "headers"))
    return e.keys


def raw_options(doc: dict) -> list[tuple[str, dict]]:
    """``(option id, raw package or remote)`` in the order the entry lists them."""
    server = doc["server"] if isinstance(doc.get("server"), dict) else doc
    raw: list[tuple[str, dict]] = []
    for pkg in _f(server, "packages") or []:
        t = str(_f(pkg, "registryType") or _f(pkg, "registryName") or "").lower()
        if t in ("npm", "pypi", "oci", "nuget", "mcpb"):
            raw.append((t, pkg))
    for remote in server.get("remotes") or []:
        if remote.get("type") in ("streamable-http", "sse", "http"):
            raw.append(("remote", remote))
    seen: dict[str, int] = {}
    out = []
    for t, item in raw:
        seen[t] = seen.get(t, 0) + 1
        out.append((t if seen[t] == 1 else f"{t}:{seen[t]}", item))
    return out


def expected_options(doc: dict) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    return [
        (oid, expected_remote_keys(item) if oid.startswith("remote") else expected_package_keys(item))
        for oid, item in raw_options(doc)
    ]


_RUNNERS = {"npm": "npx", "pypi": "uvx", "oci": "docker", "nuget": "dnx"}


def judge_spec(oid: str, raw: dict, spec: Any, keys: list[Any]) -> list[str]:
    """What is wrong with ``spec`` (built with every optional key unset) for the raw package."""
    problems: list[str] = []
    kind = oid.split(":")[0]
    text = " ".join([*spec.args, *spec.env.values(), *spec.headers.values(), spec.url or ""])
    if "{$" in text or "{{" in text or "input:" in text:
        problems.append(f"a placeholder is mangled or passed verbatim: {text!r}")
    if any(literal(a) for a in spec.args) or any(literal(v) for v in spec.env.values()):
        problems.append("a literal placeholder reaches the launch spec as a real value")
    if kind == "remote":
        if not spec.url or spec.transport == "stdio":
            problems.append("a remote without an HTTP transport and URL")
        return problems
    if kind == "mcpb":
        if not spec.needs_install_dir:
            problems.append("an mcpb spec that does not ask for its install dir")
        return problems
    if spec.command != _RUNNERS[kind]:
        problems.append(f"runner {spec.command!r}, expected {_RUNNERS[kind]!r}")
    version = _s(_f(raw, "version"))
    ident = _s(_f(raw, "identifier")) or ""
    if version and version != "latest" and kind in ("npm", "pypi", "nuget"):
        if not any(ident in a and version in a for a in spec.args):
            problems.append(f"version {version} is not pinned")
    if kind == "pypi" and spec.args[:1] == ["-m"]:
        problems.append("uvx has no -m")
    # every optional argument without a fixed value is off unless set
    for arg in list(_f(raw, "runtimeArguments") or []) + list(_f(raw, "packageArguments") or []):
        name = _f(arg, "name")
        if _f(arg, "value") is None and not _f(arg, "isRequired") and name and name not in ("--rm", "-y", "-i"):
            if name in spec.args:
                problems.append(f"optional argument {name} is passed though unset")
    if kind == "npm":
        pkg_at = next(i for i, a in enumerate(spec.args) if a.startswith(ident))
        if any(not a.startswith("-") and not a.startswith("$") for a in spec.args[1:pkg_at]):
            problems.append("a non-option argument before the npm package")
    # every environment variable is passed (keys unset are omitted, fixed ones kept)
    unset = {k.name for k in keys}
    for ev in _f(raw, "environmentVariables") or []:
        n = _f(ev, "name")
        value = _s(_f(ev, "value"))
        if n and value is not None and not _ph(value) and not literal(value) and n not in spec.env:
            problems.append(f"fixed env var {n} is missing")
        if n and value is None and "${" in spec.env.get(n, "") and n in unset:
            problems.append(f"unset env var {n} is passed")
    transport = _f(raw, "transport") or {}
    if _f(transport, "type") in ("streamable-http", "sse", "http"):
        host = urlsplit(spec.url or "").hostname or ""
        if host not in ("localhost", "127.0.0.1", "::1") or not spec.command:
            problems.append(f"an HTTP package must start a process and connect locally (url {spec.url!r})")
    return problems
