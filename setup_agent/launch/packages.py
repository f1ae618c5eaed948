"""From a registry :class:`PackageOption` to a :class:`LaunchSpec`, and which package to run.

Registry values use ``{var}`` placeholders; launch specs use ``${var}`` (with ``$$`` for a
literal ``$``). :func:`build_spec` converts one into the other and never builds a shell
string: every argument is its own argv item, and secrets for ``docker`` travel in the
environment (``-e KEY``), never on the command line.

The choice of a package (runners, platforms, availability) is in ``package_choice.py``; its
names are importable from here as before.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from registry_clients.models import Argument, PackageOption, RequiredKey
from setup_agent.errors import InvalidEntry, NoRunnablePackage

from .package_choice import (
    DEFAULT_PREFERENCE,
    INSTALL_HINTS,
    RUNNERS,
    Which,
    choose_package,
    describe_packages,
    host_platform,
    package_availability,
    package_platform,
    runner_availability,
)
from .spec import LaunchSpec, template_keys

__all__ = [
    "DEFAULT_PREFERENCE",
    "INSTALL_HINTS",
    "RUNNERS",
    "Which",
    "build_spec",
    "choose_package",
    "describe_packages",
    "host_platform",
    "package_availability",
    "package_platform",
    "registry_template",
    "runner_availability",
    "unset_keys",
]

_REGISTRY_VAR = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")  # same rule as serverjson
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEFAULT_REGISTRIES = {
    "registry.npmjs.org",
    "pypi.org",
    "api.nuget.org",
    "docker.io",
    "index.docker.io",
    "registry-1.docker.io",
    "registry.hub.docker.com",
}


# --- templates ------------------------------------------------------------------------


def registry_template(text: str) -> str:
    """Registry ``{var}`` placeholders → LaunchSpec ``${var}``; a literal ``$`` becomes ``$$``.

    Braces that do not hold a plain name (``{optional token}``) and ``${…}`` (shell/IDE
    syntax, not a registry placeholder) stay literal.
    """
    out: list[str] = []
    pos = 0
    for m in _REGISTRY_VAR.finditer(text):
        out.append(text[pos : m.start()].replace("$", "$$"))
        out.append("${" + m.group(1) + "}")
        pos = m.end()
    out.append(text[pos:].replace("$", "$$"))
    return "".join(out)


def _literal(text: str) -> str:
    return text.replace("$", "$$")


def _omitted(text: str, omit: Collection[str]) -> bool:
    return bool(omit) and not template_keys(text).isdisjoint(omit)


# --- arguments ------------------------------------------------------------------------


def _arg_value(arg: Argument) -> str | None:
    if arg.value is not None and arg.value != "":
        return registry_template(arg.value)
    if arg.key:
        return "${" + arg.key + "}"
    if arg.required and arg.default:
        return _literal(arg.default)
    return None


def _argv(args: Sequence[Argument], omit: Collection[str]) -> list[str]:
    """Runtime or package arguments as argv items (official server.json semantics).

    positional → its value; named → ``name value`` as two items (one item ``name+value``
    when the name already holds ``=``). A value comes from ``value`` (``{var}`` templated),
    else the feeding key ``${key}``. A *flag* (named, no value) is the bare name, passed only
    when its key is set true (a required flag always). An argument naming an omitted key is
    left out whole: optional arguments are off unless set. ``value: ""`` is a fixed empty
    value: a named one is a bare flag, a positional one is left out.
    """
    out: list[str] = []
    for arg in args:
        if arg.flag and arg.name:
            if arg.key is None or arg.key not in omit:
                out.append(_literal(arg.name))
            continue
        value = _arg_value(arg)
        if value is None:
            if arg.type == "named" and arg.name and arg.value == "":
                out.append(_literal(arg.name))
            elif arg.required and arg.value is None:
                label = arg.value_hint or arg.name or "an argument"
                raise InvalidEntry(
                    f"The registry entry is incomplete: the required argument {label!r} has no value "
                    "and no key to supply one."
                )
            continue
        if _omitted(value, omit):
            continue
        if arg.type == "named" and arg.name:
            name = _literal(arg.name)
            if "=" in arg.name:
                out.append(name + value)
            else:
                out.extend([name, value])
        else:
            out.append(value)
    return out


def unset_keys(keys: Sequence[RequiredKey], values: Mapping[str, object]) -> set[str]:
    """Keys whose inputs :func:`build_spec` must leave out: no value, or a flag set false. A flag
    is plain text the agent gave; a secret value (masked) counts as set, its text unread."""
    out = set()
    for key in keys:
        value = values.get(key.name)
        if value is None:
            out.add(key.name)
        elif key.kind == "argument" and key.off_unless_set and key.format == "boolean" and isinstance(value, str):
            if value.strip().lower() not in ("true", "1", "yes", "on"):
                out.add(key.name)
    return out


def _docker_env_args(args: Sequence[Argument], env: dict[str, str], omit: Collection[str]) -> list[Argument]:
    """Move ``-e NAME=value`` runtime arguments into ``env`` so values stay out of argv."""
    kept: list[Argument] = []
    for arg in args:
        if arg.type == "named" and arg.name in ("-e", "--env") and arg.value and "=" in arg.value:
            name, _, value = arg.value.partition("=")
            if _ENV_NAME.match(name):
                templ = registry_template(value)
                if not _omitted(templ, omit):
                    env[name] = templ
                continue
        kept.append(arg)
    return kept


# --- specs ----------------------------------------------------------------------------


def _without_omitted_query(url: str, omit: Collection[str]) -> str:
    """``url`` without the query parameters that name an omitted key (an optional Smithery
    setting left unset is not sent as ``name=``)."""
    parts = urlsplit(url)
    if not parts.query or not omit:
        return url
    kept = [p for p in parts.query.split("&") if not _omitted(p, omit)]
    return urlunsplit(parts._replace(query="&".join(kept)))


def _pinned(version: str | None) -> str | None:
    return version if version and version.strip().lower() != "latest" else None


def _custom_registry(url: str | None) -> str | None:
    """The registry base URL when it is not the ecosystem's default one."""
    if not url:
        return None
    host = (urlsplit(url).hostname or "").lower()
    return None if host in _DEFAULT_REGISTRIES else url


def _oci_image(package: PackageOption) -> str:
    image = package.identifier
    last = image.rsplit("/", 1)[-1]
    version = _pinned(package.version)
    if version and ":" not in last and "@" not in image:
        image = f"{image}:{version}"
    base = _custom_registry(package.registry_base_url)
    first = image.split("/", 1)[0]
    has_host = "/" in image and ("." in first or ":" in first or first == "localhost")
    if base and not has_host:
        host = urlsplit(base).netloc
        if host:
            image = f"{host}/{image}"
    return image


def build_spec(package: PackageOption, *, omit: Collection[str] = ()) -> LaunchSpec:
    """The launch spec for one package; it holds templates, never values.

    ``omit`` names optional keys the user left unset (:func:`unset_keys`): every env var,
    header and argument that names one of them is left out, so the server sees it unset
    instead of empty; a flag whose key is omitted is not passed. Keys with a default should be passed to ``materialize`` with
    that default instead. mcpb specs have no command yet: see :mod:`setup_agent.launch.bundle`.
    """
    ptype = package.type
    env = {k: registry_template(v) for k, v in package.env.items()}
    env = {k: v for k, v in env.items() if not _omitted(v, omit)}
    headers = {k: registry_template(v) for k, v in package.headers.items()}
    headers = {k: v for k, v in headers.items() if not _omitted(v, omit)}
    url = _without_omitted_query(registry_template(package.url), omit) if package.url else None
    common: dict[str, Any] = {
        "transport": package.transport,
        "package_type": ptype,
        "identifier": package.identifier,
        "version": package.version,
        "file_sha256": package.file_sha256,
        "url": url,
        "headers": headers,
        "env": env,
    }
    if ptype == "remote":
        if package.transport == "stdio":
            common["transport"] = "streamable-http"
        if not url:
            raise NoRunnablePackage("The registry lists a remote for this server without a URL.")
        return LaunchSpec(**common)
    if ptype == "mcpb":
        return LaunchSpec(**common, needs_install_dir=True)

    if package.transport != "stdio":
        if not url:
            raise InvalidEntry("The registry entry serves HTTP from a local package but gives no URL.")
        common["url"] = url = _local_url(url)
    runner = RUNNERS[ptype]
    version = _pinned(package.version)
    runtime = package.runtime_arguments
    hint = (package.runtime_hint or "").strip().lower()
    args: list[str]
    if ptype == "npm":
        spec = f"{package.identifier}@{version}" if version else package.identifier
        args = ["-y"]
        if registry := _custom_registry(package.registry_base_url):
            args.append(f"--registry={_literal(registry)}")
        before, after = _npx_runtime(runtime)
        args += [*_argv(before, omit), _literal(spec), *_argv(after, omit), *_argv(package.package_arguments, omit)]
    elif ptype == "pypi":
        spec = f"{package.identifier}=={version}" if version else package.identifier
        args = []
        if registry := _custom_registry(package.registry_base_url):
            args += ["--default-index", _literal(registry)]
        if runtime and (hint in ("python", "python3") or _python_module_form(runtime)):
            # The publisher wrote a `python -m module` command: uvx runs it inside the package's
            # environment as `uvx --from SPEC python -m module …` (uvx itself has no -m).
            args += ["--from", _literal(spec), "python", *_argv(runtime, omit)]
        else:
            args += [*_argv(runtime, omit), _literal(spec)]
        args += _argv(package.package_arguments, omit)
    elif ptype == "oci":
        runtime = _docker_env_args(runtime, env, omit)
        extra = _argv(runtime, omit)
        args = ["run", "-i", "--rm"]
        for name in env:
            args += ["-e", name]
        if url and not any(
            a in ("-p", "--publish", "--network", "--net") or a.startswith(("-p", "--publish=")) for a in extra
        ):
            port = _url_port(url)
            if port:
                args += ["-p", f"127.0.0.1:{port}:{port}"]
        args += [*extra, _literal(_oci_image(package)), *_argv(package.package_arguments, omit)]
    elif ptype == "nuget":
        spec = f"{package.identifier}@{version}" if version else package.identifier
        args = [*_argv(runtime, omit), _literal(spec), "--yes"]
        if registry := _custom_registry(package.registry_base_url):
            args += ["--source", _literal(registry)]
        pkg_args = _argv(package.package_arguments, omit)
        if pkg_args:  # dnx (dotnet tool exec) stops reading its own options at `--`
            args += ["--", *pkg_args]
    else:  # pragma: no cover - PackageType is a closed Literal
        raise NoRunnablePackage(f"Packages of type {ptype!r} are not supported.")
    return LaunchSpec(**common, command=runner, args=args, runner=runner)


# --- runtimes -------------------------------------------------------------------------

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}


def _local_url(url: str) -> str:
    """The URL a local package serves on; its host must be this machine (``0.0.0.0`` → 127.0.0.1)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not (host in _LOCAL_HOSTS or host.startswith("127.")):
        raise InvalidEntry(
            "The registry entry runs a local package but connects to a URL on another host; "
            "only localhost URLs can reach a package started here."
        )
    if host == "0.0.0.0":
        netloc = parts.netloc.replace("0.0.0.0", "127.0.0.1", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _url_port(url: str) -> str | None:
    m = re.match(r"^[a-z]+://[^/:]+:([^/]+)", url)
    return m.group(1) if m else None


def _npx_runtime(runtime: Sequence[Argument]) -> tuple[list[Argument], list[Argument]]:
    """Runtime arguments npx takes before the package (its options), and the rest.

    ``-y``/``--yes`` is always passed already. A named argument without a leading dash
    (``cwd``) is meant for the program, so it goes after the package. A positional runtime
    argument is something npx cannot take (a `docker run` command line written as npm
    runtime arguments, for example): the entry is refused.
    """
    before: list[Argument] = []
    after: list[Argument] = []
    for arg in runtime:
        if arg.type == "named" and arg.name in ("-y", "--yes"):
            continue
        if arg.type == "named" and arg.name and arg.name.startswith("-"):
            before.append(arg)
        elif arg.type == "named":
            after.append(arg)
        else:
            raise InvalidEntry(
                "The registry entry gives npm runtime arguments that npx cannot take "
                "(positional arguments before the package)."
            )
    return before, after


def _python_module_form(runtime: Sequence[Argument]) -> bool:
    return any(a.value == "-m" for a in runtime)
