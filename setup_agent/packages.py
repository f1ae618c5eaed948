"""From a registry :class:`PackageOption` to a :class:`LaunchSpec`, and which package to run.

Registry values use ``{var}`` placeholders; launch specs use ``${var}`` (with ``$$`` for a
literal ``$``). :func:`build_spec` converts one into the other and never builds a shell
string: every argument is its own argv item, and secrets for ``docker`` travel in the
environment (``-e KEY``), never on the command line.

:func:`choose_package` picks among a server's packages: by id or type when asked, otherwise
the first *available* one (its runner is on ``PATH``) in a preference order.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Collection, Sequence
from typing import Any
from urllib.parse import urlsplit

from registry_clients.models import Argument, PackageOption

from .errors import NoRunnablePackage, PackageNotFound
from .launch import LaunchSpec, template_keys

__all__ = [
    "DEFAULT_PREFERENCE",
    "INSTALL_HINTS",
    "RUNNERS",
    "Which",
    "build_spec",
    "choose_package",
    "describe_packages",
    "package_availability",
    "registry_template",
    "runner_availability",
]

Which = Callable[[str], "str | None"]

#: The program each package type needs on this machine (None: nothing to check up front).
RUNNERS: dict[str, str | None] = {
    "npm": "npx",
    "pypi": "uvx",
    "oci": "docker",
    "nuget": "dnx",
    "mcpb": None,
    "remote": None,
}

#: One sentence per runner telling a person how to get it.
INSTALL_HINTS: dict[str, str] = {
    "npx": "install Node.js (which brings npx) from your package manager or nodejs.org",
    "uvx": "install uv (`pip install uv`, or see docs.astral.sh/uv), which brings uvx",
    "docker": "install Docker (Docker Desktop or Docker Engine from docs.docker.com) and start its daemon",
    "dnx": "install the .NET 10 SDK (which brings dnx) from dot.net",
    "node": "install Node.js from your package manager or nodejs.org",
    "python3": "install Python 3 from your package manager or python.org",
    "python": "install Python 3 from your package manager or python.org",
    "uv": "install uv (`pip install uv`, or see docs.astral.sh/uv)",
}

#: Default order for picking a package when the caller names none.
#:
#: Local runners whose presence we can check exactly come first: npm and pypi (the most
#: common in the registry, version-pinned, secrets stay in the child's environment), then
#: oci (isolated, but ``which docker`` does not prove the daemon runs and pulls are slow),
#: then nuget (.NET 10 SDK is rare). mcpb and remote come last because they are "available"
#: without any check: an mcpb bundle's runtime (node, python…) is only known after download
#: and unpacking, and a remote always "works" up front yet often needs OAuth, which static
#: headers cannot do, and sends the user's secrets to a third-party host. Putting either
#: earlier would shadow every checked option after it. remote is the final fallback.
DEFAULT_PREFERENCE: tuple[str, ...] = ("npm", "pypi", "oci", "nuget", "mcpb", "remote")

_REGISTRY_VAR = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")  # same rule as serverjson
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEFAULT_REGISTRIES = {"registry.npmjs.org", "pypi.org", "api.nuget.org", "docker.io", "index.docker.io",
                       "registry-1.docker.io", "registry.hub.docker.com"}


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
    when the name already holds ``=``), or the bare flag when it has no value and does not
    ask for one. A value comes from ``value`` (``{var}`` templated), else the feeding key
    ``${key}``, else (required only) the default. An argument naming an omitted key is left
    out whole; an optional one that asks for a value (``valueHint``, secret, default) but
    has none is left out too, so the server keeps its own default. ``value: ""`` is a fixed
    empty value: a named one is a bare flag, a positional one is left out.
    """
    out: list[str] = []
    for arg in args:
        value = _arg_value(arg)
        if value is not None and _omitted(value, omit):
            continue
        wants_value = arg.value is None and bool(arg.value_hint or arg.secret or arg.default)
        if arg.type == "named" and arg.name and (value is not None or not wants_value):
            name = _literal(arg.name)
            if value is None:
                out.append(name)
            elif "=" in arg.name:
                out.append(name + value)
            else:
                out.extend([name, value])
        elif value is not None:
            out.append(value)
        elif arg.required and arg.value is None:
            label = arg.value_hint or arg.name or "an argument"
            raise NoRunnablePackage(
                f"The registry entry is incomplete: the required argument {label!r} has no value "
                "and no key to supply one."
            )
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

    ``omit`` names optional keys the user left unset (and that have no default): every env
    var, header and argument that names one of them is left out, so the server sees it
    unset instead of empty. Keys with a default should be passed to ``materialize`` with
    that default instead. mcpb specs have no command yet: see :mod:`setup_agent.bundle`.
    """
    ptype = package.type
    env = {k: registry_template(v) for k, v in package.env.items()}
    env = {k: v for k, v in env.items() if not _omitted(v, omit)}
    headers = {k: registry_template(v) for k, v in package.headers.items()}
    headers = {k: v for k, v in headers.items() if not _omitted(v, omit)}
    url = registry_template(package.url) if package.url else None
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

    runner = RUNNERS[ptype]
    version = _pinned(package.version)
    runtime = package.runtime_arguments
    args: list[str]
    if ptype == "npm":
        spec = f"{package.identifier}@{version}" if version else package.identifier
        args = ["-y"]
        if registry := _custom_registry(package.registry_base_url):
            args.append(f"--registry={_literal(registry)}")
        args += [*_argv(runtime, omit), _literal(spec), *_argv(package.package_arguments, omit)]
    elif ptype == "pypi":
        spec = f"{package.identifier}=={version}" if version else package.identifier
        args = []
        if registry := _custom_registry(package.registry_base_url):
            args += ["--default-index", _literal(registry)]
        args += [*_argv(runtime, omit), _literal(spec), *_argv(package.package_arguments, omit)]
    elif ptype == "oci":
        runtime = _docker_env_args(runtime, env, omit)
        extra = _argv(runtime, omit)
        args = ["run", "-i", "--rm"]
        for name in env:
            args += ["-e", name]
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


# --- availability and choice ----------------------------------------------------------


def runner_availability(runner: str | None, *, which: Which = shutil.which) -> tuple[bool, str | None]:
    """``(True, None)`` when ``runner`` is None or on PATH, else ``(False, reason)``."""
    if runner is None or which(runner):
        return True, None
    hint = INSTALL_HINTS.get(runner, f"install {runner}")
    return False, f"needs {runner}, which is not on this machine: {hint}"


def package_availability(package: PackageOption, *, which: Which = shutil.which) -> tuple[bool, str | None]:
    """Whether this machine can run ``package`` now, and why not.

    remote is always available. mcpb counts as available: its runtime (node, python, a
    binary…) is named by the bundle's manifest, so it is checked after download and
    unpacking (use :func:`runner_availability` on the spec's ``runner``).
    """
    return runner_availability(RUNNERS.get(package.type), which=which)


def describe_packages(packages: Sequence[PackageOption], *, which: Which = shutil.which) -> list[dict[str, Any]]:
    """``[{id, type, available, reason?}]`` for ``mcp_setup_get``."""
    out: list[dict[str, Any]] = []
    for pkg in packages:
        ok, reason = package_availability(pkg, which=which)
        item: dict[str, Any] = {"id": pkg.id, "type": pkg.type, "available": ok}
        if reason:
            item["reason"] = reason
        out.append(item)
    return out


def _unavailable(pkg: PackageOption, reason: str | None) -> NoRunnablePackage:
    runner = RUNNERS.get(pkg.type)
    return NoRunnablePackage(
        f"Package {pkg.id!r} {reason}.",
        details={"package": pkg.id, "runner": runner, "hint": INSTALL_HINTS.get(runner or "", "")},
    )


def choose_package(
    packages: Sequence[PackageOption],
    package: str | None = None,
    *,
    preference: Sequence[str] = DEFAULT_PREFERENCE,
    which: Which = shutil.which,
) -> PackageOption:
    """The package to run.

    ``package`` is an option id (``npm``, ``npm:2``, ``remote``) or a type; an id wins over
    a type. Without it, the first available package in ``preference`` order is taken
    (see :data:`DEFAULT_PREFERENCE` for why npm/pypi come first and remote last); types
    missing from ``preference`` rank after the listed ones, in the server's order.
    """
    if not packages:
        raise NoRunnablePackage("This server lists nothing runnable: no package and no remote.")
    if package is not None:
        wanted = package.strip()
        by_id = [p for p in packages if p.id == wanted] or [p for p in packages if p.id.lower() == wanted.lower()]
        candidates = by_id or [p for p in packages if p.type == wanted.lower()]
        if not candidates:
            ids = [p.id for p in packages]
            raise PackageNotFound(
                f"This server has no package {wanted!r}; its packages are: {', '.join(ids)}.",
                details={"packages": ids},
            )
        first_reason: str | None = None
        for pkg in candidates:
            ok, reason = package_availability(pkg, which=which)
            if ok:
                return pkg
            first_reason = first_reason or reason
        raise _unavailable(candidates[0], first_reason)

    rank = {t: i for i, t in enumerate(preference)}
    ordered = sorted(packages, key=lambda p: rank.get(p.type, len(rank)))
    missing: dict[str, str] = {}
    for pkg in ordered:
        ok, _ = package_availability(pkg, which=which)
        if ok:
            return pkg
        runner = RUNNERS.get(pkg.type) or pkg.type
        missing.setdefault(runner, INSTALL_HINTS.get(runner, f"install {runner}"))
    needs = "; ".join(f"{runner} ({hint})" for runner, hint in missing.items())
    raise NoRunnablePackage(
        f"No package of this server can run on this machine. It needs one of: {needs}.",
        details={"missing_runners": list(missing)},
    )
