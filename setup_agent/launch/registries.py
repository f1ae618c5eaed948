"""The package registries a runner is configured for, found as the runner would find them.

- npm: the command line's ``--registry=``, else ``npm_config_registry`` (any case), else
  ``registry=`` in the user's ``.npmrc``, else ``https://registry.npmjs.org``;
- uv: the command line's index options, else ``UV_DEFAULT_INDEX``/``UV_INDEX_URL``/``PIP_INDEX_URL``,
  with the extra indexes of ``UV_INDEX``/``UV_EXTRA_INDEX_URL``/``PIP_EXTRA_INDEX_URL``; PyPI
  (``pypi.org`` and ``files.pythonhosted.org``) unless a default index replaces it.

The download phase may reach only these (``fetch_sandbox.py``); a server's start is granted
them (``server_net.py``), and both get the variables that name a configured one, since the
sandbox hides the user's config files: without the user names and passwords written in them
(:func:`without_userinfo`), which only the download is given (``registry_credentials.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from setup_agent.errors import InvalidInput

from .net_policy import Endpoint, NetPolicy
from .runners import runner_name

__all__ = ["UV_DEFAULT_ENV", "UV_EXTRA_ENV", "npm_registry", "runner_registries", "uv_indexes", "without_userinfo"]

NPM_DEFAULT = "https://registry.npmjs.org/"
PYPI_DEFAULT = ("pypi.org:443", "files.pythonhosted.org:443")
#: uv's index options whose value replaces PyPI as the default index; then those that add one.
_UV_DEFAULT_OPTIONS = ("--default-index", "--index-url", "-i")
_UV_EXTRA_OPTIONS = ("--index", "--extra-index-url")
#: The same in uv's (and pip's) environment, passed on to the download.
UV_DEFAULT_ENV = ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL")
UV_EXTRA_ENV = ("UV_INDEX", "UV_EXTRA_INDEX_URL", "PIP_EXTRA_INDEX_URL")


def runner_registries(
    runner: str, args: Sequence[str], host_env: Mapping[str, str]
) -> tuple[NetPolicy, dict[str, str]]:
    """The registries runner ``runner`` reads from with ``args``, as a strict policy (a
    configured one granted, npm's and PyPI's own only at public addresses), and the variables
    that name the configured ones to the runner inside the sandbox, where the user's config files
    are hidden."""
    name = runner_name(runner)
    if name in ("npm", "npx"):
        url, configured = npm_registry(args, host_env)
        env = {"npm_config_registry": without_userinfo(url)} if configured else {}
        return _policy([url] if configured else [], [NPM_DEFAULT] if not configured else []), env
    if name in ("uv", "uvx"):
        defaults, extras = _uv_settings(args, host_env)
        env = {v: without_userinfo(host_env[v]) for v in (*UV_DEFAULT_ENV, *UV_EXTRA_ENV) if host_env.get(v)}
        policy = _policy([_index_url(u) for u in (*defaults, *extras)], [])
        if not defaults:  # PyPI stays the default index
            policy = NetPolicy.strict({*policy.only, *map(Endpoint.parse, PYPI_DEFAULT)}, policy.granted)
        return policy, env
    return NetPolicy.none(), {}


def uv_indexes(args: Sequence[str], host_env: Mapping[str, str]) -> list[tuple[str | None, str]]:
    """The indexes uv reads from with ``args`` as ``(name, URL)`` (name None: unnamed), the
    configured ones only (PyPI, when it stays the default, is not listed)."""
    defaults, extras = _uv_settings(args, host_env)
    out: list[tuple[str | None, str]] = []
    for value in (*defaults, *extras):
        url = _index_url(value)
        out.append((value.partition("=")[0] if url != value else None, url))
    return out


def _uv_settings(args: Sequence[str], host_env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """uv's default index settings (the command line's, else the first variable set) and extra ones."""
    defaults = _option_values(args, _UV_DEFAULT_OPTIONS) or [host_env[v] for v in UV_DEFAULT_ENV if host_env.get(v)][:1]
    extras = _option_values(args, _UV_EXTRA_OPTIONS)
    for var in UV_EXTRA_ENV:
        extras += host_env.get(var, "").split()
    return defaults, extras


def without_userinfo(value: str) -> str:
    """An index setting (a URL, ``name=URL``, or several separated by spaces) without the user
    names and passwords written in its URLs: what a server's start may see."""
    return " ".join(_strip_userinfo(part) for part in value.split(" "))


def _strip_userinfo(part: str) -> str:
    name, eq, url = part.partition("=")
    if not eq or "://" in name:
        name, eq, url = "", "", part
    try:
        parts = urlsplit(url)
    except ValueError:
        return part
    if "@" not in parts.netloc:
        return part
    return f"{name}{eq}{parts._replace(netloc=parts.netloc.rpartition('@')[2]).geturl()}"


def _policy(configured: Sequence[str], public: Sequence[str]) -> NetPolicy:
    """Strict: ``public`` registries at public addresses only; ``configured`` ones (the person's
    own settings) also where they are not public. A setting that is no http(s) URL names nothing
    (the runner says what is wrong with it)."""
    mine, theirs = _endpoints(configured), _endpoints(public)
    return NetPolicy.strict(mine | theirs, mine)


def _endpoints(urls: Sequence[str]) -> frozenset[Endpoint]:
    out: set[Endpoint] = set()
    for url in urls:
        with contextlib.suppress(InvalidInput):
            out |= NetPolicy.only_urls([url]).only
    return frozenset(out)


def npm_registry(args: Sequence[str], host_env: Mapping[str, str]) -> tuple[str, bool]:
    """npm's registry for this download, and whether it is configured (not npm's default)."""
    for arg in args:
        if arg.startswith("--registry="):
            return arg.split("=", 1)[1], True
    for key, value in host_env.items():
        if key.lower() == "npm_config_registry" and value:
            return value, True
    rc = host_env.get("npm_config_userconfig") or host_env.get("NPM_CONFIG_USERCONFIG")
    home = host_env.get("HOME")
    path = Path(rc) if rc else (Path(home) / ".npmrc" if home else None)
    if path is not None:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            key, eq, value = line.partition("=")
            if eq and key.strip() == "registry" and value.strip():
                return value.strip().strip("\"'"), True
    return NPM_DEFAULT, False


def _option_values(args: Sequence[str], names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if arg in names and i + 1 < len(args):
            out.append(args[i + 1])
        elif eq and name in names:
            out.append(value)
    return out


def _index_url(value: str) -> str:
    """An index as uv takes it: a URL, or ``name=URL`` (``--index``, ``UV_INDEX``)."""
    name, eq, rest = value.partition("=")
    return rest if eq and "://" not in name else value
