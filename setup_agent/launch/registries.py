"""The package registries a runner is configured for, found as the runner would find them.

- npm: ``registry`` as npm reads its settings (``npmrc.py``: the command line's ``--registry=``,
  ``npm_config_registry``, the user's npmrc, the global one), else ``https://registry.npmjs.org``;
  and for a scoped package (``@scope/name``) whose scope has a registry of its own
  (``@scope:registry=``), that one, from which npm fetches the package (its metadata and its
  tarball). npm still asks the default registry for every dependency without a scope (nearly
  every package has some) and sends it its audit, so both are destinations; a scoped dependency
  of another scope with a registry of its own is not provided for;
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
from dataclasses import dataclass
from urllib.parse import urlsplit

from setup_agent.errors import InvalidInput

from .net_policy import Endpoint, NetPolicy
from .npmrc import npm_config
from .runners import runner_name

__all__ = [
    "UV_DEFAULT_ENV",
    "UV_EXTRA_ENV",
    "NpmRegistries",
    "npm_registries",
    "runner_registries",
    "uv_indexes",
    "without_userinfo",
]

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
        npm = npm_registries(runner, args, host_env)
        env = {"npm_config_registry": without_userinfo(npm.default)} if npm.configured else {}
        mine = [npm.default] if npm.configured else []
        if npm.scoped is not None:  # the person's own, as a configured default is
            env[f"npm_config_{npm.scope}:registry"] = without_userinfo(npm.scoped)
            mine.append(npm.scoped)
        return _policy(mine, [] if npm.configured else [NPM_DEFAULT]), env
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


@dataclass(frozen=True)
class NpmRegistries:
    """The registries an npm download reads from: ``default`` (npm's ``registry``; ``configured``:
    set by the person, not npm's own) and, for a scoped package whose scope has its own
    (``@scope:registry``), ``scope`` (``@scope``) and ``scoped``, the package's registry."""

    default: str
    configured: bool
    scope: str | None = None
    scoped: str | None = None

    @property
    def package(self) -> str:
        """The registry the package itself (its metadata and tarball) comes from."""
        return self.scoped or self.default


def npm_registries(runner: str, args: Sequence[str], host_env: Mapping[str, str]) -> NpmRegistries:
    """npm's registries for a download of ``runner`` (npm or npx) with ``args`` (module docstring)."""
    config = npm_config(runner, args, host_env)
    default = config.get("registry")
    scope = _npm_scope(args)
    scoped = config.get(f"{scope}:registry") if scope else None
    return NpmRegistries(default or NPM_DEFAULT, bool(default), scope if scoped else None, scoped or None)


def _npm_scope(args: Sequence[str]) -> str | None:
    """The scope (``@scope``) of the package npm runs with ``args`` (``--package=``'s, else the
    first that is no option: ``npm exec``'s or ``npx``'s), None for a package without one."""
    spec = next((a.split("=", 1)[1] for a in args if a.startswith("--package=")), None)
    if spec is None:
        spec = next((a for a in args if not a.startswith("-") and a not in ("exec", "x")), None)
    if spec is None or not spec.startswith("@") or "/" not in spec:
        return None
    return spec.split("/", 1)[0].lower()


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
