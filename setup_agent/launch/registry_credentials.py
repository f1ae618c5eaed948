"""The credentials a sandboxed download needs for the registries it is configured for, and only those.

The download phase runs with a private ``HOME`` (``fetch_sandbox.py``): the user's config files
are hidden, so a private registry that wants a token would refuse it. :func:`registry_credentials`
reads, on the host and at that moment, what the runner itself would have read for the registry
it uses, and nothing about any other host:

- npm: the ``//host/…:_authToken``, ``:_auth``, ``:username`` and ``:_password`` lines of the
  user's npmrc (``npm_config_userconfig``, else ``~/.npmrc``) and of npm's global one
  (``npmrc.py``) whose host is the registry's the package comes from (``registries.py``: its
  scope's own, ``@scope:registry=``, else npm's ``registry``), ``${VAR}`` references resolved from
  the host's environment; a line naming a variable that is not set is left out, as is every other
  line of the files. For a scoped package from its scope's registry, the lines of the default
  registry's host are given too when the person configured that registry (a company's mirror
  serves the package's unscoped dependencies, and wants its login), never npm's own: the public
  registry serves public packages to anyone, and a token for it is a publish token most often,
  which a download from another registry (whose install scripts run) has no use for;
- uv (and the PIP_* index variables the download is given): a user name and password written in
  the index URLs (``--index-url``/``--default-index``/``--index`` on the command line stay as
  they are; ``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``, ``UV_INDEX``, ``UV_EXTRA_INDEX_URL`` and the
  PIP ones are given with them, while a server's start gets them without, see ``registries.py``),
  ``UV_INDEX_<NAME>_USERNAME``/``_PASSWORD`` of the named indexes in use, and the ``machine``
  entries of the user's netrc (``NETRC``, else ``~/.netrc``) for the index hosts (never its
  ``default``).

:meth:`RegistryCredentials.write` puts the files in the download's private ``HOME`` (mode 0600;
the scratch dir holding it is removed when the download ends) and names them to the runner. The
values never reach a server's start, a log line or an error: :attr:`RegistryCredentials.secrets`
is what the download's output is scrubbed of.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import netrc
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .npmrc import npm_config
from .registries import UV_DEFAULT_ENV, UV_EXTRA_ENV, npm_registries, uv_indexes, without_userinfo
from .runners import runner_name

__all__ = ["RegistryCredentials", "registry_credentials"]

#: The fields of an npmrc line that authenticate to a registry (``//host/path/:<field>=…``).
_NPM_FIELDS = ("_authToken", "_auth", "username", "_password")
_NPM_KEY = re.compile(r"^//(?P<host>[^/]+)(?P<path>/[^:]*)?:(?P<field>[A-Za-z_]+)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: The shortest value scrubbed from the runner's output.
_SCRUBBED_FROM = 4


@dataclass(frozen=True)
class RegistryCredentials:
    """What a download is given to log in to its registry: ``files`` for its private ``HOME`` (by
    name), ``env`` for its runner, ``secrets`` (the values, to scrub from its output) and, in a
    person's words, ``where`` such credentials are set for this runner."""

    where: str
    files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        """Were any credentials found for the registry (its 401 then means they were refused)?"""
        return bool(self.secrets)

    def write(self, home: Path) -> dict[str, str]:
        """Write :attr:`files` into ``home`` (the download's private HOME, owner-only) and return
        the variables for the runner: :attr:`env` and those naming the files."""
        out = dict(self.env)
        for name, text in self.files.items():
            path = home / name
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # made anew, never written through what is there
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            out[_NAMED_BY[name]] = str(path)
        return out

    def scrub(self, text: bytes) -> bytes:
        """``text`` (a line of the runner's output) with every credential value replaced (but one
        of a few characters, which would garble the line; the output is never shown anyway)."""
        for value in self.secrets:
            if len(value) >= _SCRUBBED_FROM:
                text = text.replace(value.encode(), b"[registry credential]")
        return text


#: The variable that names each file to its runner (the HOME it sits in would do; this is explicit).
_NAMED_BY = {".npmrc": "npm_config_userconfig", ".netrc": "NETRC"}

_NPM_WHERE = "your .npmrc"
_UV_WHERE = "the index URL, UV_INDEX_<NAME>_USERNAME/PASSWORD or your .netrc"


def registry_credentials(runner: str, args: Sequence[str], host_env: Mapping[str, str]) -> RegistryCredentials:
    """The credentials runner ``runner`` would use with ``args`` for its registries (module
    docstring), read from the host's files and ``host_env`` now; none for other runners."""
    name = runner_name(runner)
    if name in ("npm", "npx"):
        return _npm(runner, args, host_env)
    if name in ("uv", "uvx"):
        return _uv(args, host_env)
    return RegistryCredentials("")


# --- npm ------------------------------------------------------------------------------------


def _npm(runner: str, args: Sequence[str], host_env: Mapping[str, str]) -> RegistryCredentials:
    npm = npm_registries(runner, args, host_env)
    registries = [npm.package]
    if npm.scoped is not None and npm.configured:  # its unscoped dependencies: the person's own mirror
        registries.append(npm.default)
    targets = {(r, t) for r in registries if (t := _host_port(r)) is not None}
    kept: list[str] = []
    secrets: list[str] = []
    for key, value in npm_config(runner, args, host_env).file_settings().items():
        m = _NPM_KEY.match(key)
        if m is None or m.group("field") not in _NPM_FIELDS:
            continue
        if not any(_host_port("http://" + m.group("host"), scheme_of=r) == t for r, t in targets):
            continue  # another host's: never given
        kept.append(f"{key}={json.dumps(value)}")
        if m.group("field") == "_authToken" and value:
            secrets.append(value)
        elif m.group("field") in ("_auth", "_password") and value:
            secrets += _with_decoded(value)
    if not kept:
        return RegistryCredentials(_NPM_WHERE)
    return RegistryCredentials(_NPM_WHERE, {".npmrc": "\n".join(kept) + "\n"}, {}, _unique(secrets))


def _with_decoded(value: str) -> list[str]:
    """A secret value and what it decodes to when it is base64 (``_auth``, ``_password``)."""
    out = [value]
    with contextlib.suppress(binascii.Error, ValueError):
        decoded = base64.b64decode(value, validate=True).decode()
        if decoded:
            out.append(decoded)
            user, colon, password = decoded.partition(":")
            if colon and password:
                out.append(password)
    return out


# --- uv ---------------------------------------------------------------------------------------


def _uv(args: Sequence[str], host_env: Mapping[str, str]) -> RegistryCredentials:
    indexes = uv_indexes(args, host_env)  # (name or None, URL) of each index in use
    env: dict[str, str] = {}
    secrets: list[str] = []
    for name, url in indexes:
        secrets += _url_secrets(url)
        if name:
            key = re.sub(r"[^A-Za-z0-9]", "_", name).upper()
            for part in ("USERNAME", "PASSWORD"):
                var = f"UV_INDEX_{key}_{part}"
                if host_env.get(var):
                    env[var] = host_env[var]
                    if part == "PASSWORD":
                        secrets.append(host_env[var])
    for var in (*UV_DEFAULT_ENV, *UV_EXTRA_ENV):  # given as set, user names and passwords included
        value = host_env.get(var)
        if value and without_userinfo(value) != value:
            env[var] = value
    files: dict[str, str] = {}
    hosts = {h for _n, url in indexes if (h := _hostname(url))}
    entries = _netrc_entries(host_env, hosts)
    if entries:
        files[".netrc"] = "".join(
            f"machine {host} login {login} password {password}\n" for host, login, password in entries
        )
        secrets += [password for _h, _l, password in entries if password]
    return RegistryCredentials(_UV_WHERE, files, env, _unique(secrets))


def _url_secrets(url: str) -> list[str]:
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return []
    userinfo = netloc.rpartition("@")[0]
    if not userinfo:
        return []
    user, _, password = userinfo.partition(":")
    return [v for v in (userinfo, password or user, unquote(password or user)) if v]


def _netrc_entries(host_env: Mapping[str, str], hosts: set[str]) -> list[tuple[str, str, str]]:
    """The user's netrc entries for ``hosts`` (``machine`` ones only, never ``default``)."""
    if not hosts:
        return []
    path = host_env.get("NETRC") or (str(Path(host_env["HOME"]) / ".netrc") if host_env.get("HOME") else None)
    if not path or not os.path.isfile(path):
        return []
    try:
        parsed = netrc.netrc(path)  # a file named explicitly: no permission check to trip on
    except (OSError, netrc.NetrcParseError):
        return []
    out = []
    for host in sorted(hosts):
        entry = parsed.hosts.get(host)
        if entry is not None and all(" " not in part for part in (entry[0], entry[2])):
            out.append((host, entry[0], entry[2]))
    return out


# --- shared -----------------------------------------------------------------------------------


def _hostname(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _host_port(url: str, scheme_of: str | None = None) -> tuple[str, int] | None:
    """``(host, port)`` of a URL, its scheme's default port filled in (``scheme_of``'s scheme
    for an npmrc key, which names none)."""
    try:
        parts = urlsplit(url)
        scheme = urlsplit(scheme_of).scheme if scheme_of else parts.scheme
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return host, port or _DEFAULT_PORTS.get(scheme, 443)


def _unique(values: Sequence[str]) -> tuple[str, ...]:
    # longest first: a value that holds another is scrubbed whole
    return tuple(sorted({v for v in values if v}, key=len, reverse=True))
