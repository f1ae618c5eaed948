"""Which package of a server to run here: the runner each type needs, this machine's platform,
availability (with a hint to install what is missing) and the choice in preference order.

:func:`choose_package` picks among a server's packages: by id or type when asked, otherwise
the first *available* one (its runner is on ``PATH``) in a preference order.
"""

from __future__ import annotations

import platform as _platform
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from registry_clients.models import PackageOption
from setup_agent.errors import NoRunnablePackage, PackageNotFound

from .runners import runner_which

__all__ = [
    "DEFAULT_PREFERENCE",
    "INSTALL_HINTS",
    "RUNNERS",
    "Which",
    "choose_package",
    "describe_packages",
    "host_platform",
    "package_availability",
    "package_platform",
    "runner_availability",
    "unverified_download",
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
    # Node and uv come with mcp-setup (setup_agent/launch/runners.py): missing only from a broken install.
    "npx": "Node.js with npx comes with mcp-setup, but is missing from this install: reinstall mcp-setup",
    "uvx": "uv with uvx comes with mcp-setup, but is missing from this install: reinstall mcp-setup",
    "docker": "install Docker (Docker Desktop or Docker Engine from docs.docker.com) and start its daemon",
    "dnx": "install the .NET 10 SDK (which brings dnx) from dot.net",
    "node": "Node.js comes with mcp-setup, but is missing from this install: reinstall mcp-setup",
    "python3": "install Python 3 from your package manager or python.org",
    "python": "install Python 3 from your package manager or python.org",
    "uv": "uv comes with mcp-setup, but is missing from this install: reinstall mcp-setup",
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


def unverified_download(package: PackageOption) -> bool:
    """A bundle fetched from another host with no sha256 to check it (Smithery lists its bundles
    so): chosen only when nothing else can run, after the remote."""
    if package.type != "mcpb" or package.file_sha256:
        return False
    url = package.identifier.lower()
    return not url.startswith(("file://", "http://127.0.0.1", "http://localhost", "http://[::1]"))


# --- platforms ------------------------------------------------------------------------

_OS_WORDS = {
    "darwin": "darwin",
    "macos": "darwin",
    "osx": "darwin",
    "mac": "darwin",
    "apple": "darwin",
    "linux": "linux",
    "windows": "windows",
    "win": "windows",
    "win32": "windows",
    "win64": "windows",
}
_ARCH_WORDS = {
    "arm64": "arm64",
    "aarch64": "arm64",
    "amd64": "amd64",
    "x86_64": "amd64",
    "x64": "amd64",
    "x86-64": "amd64",
    "386": "386",
    "i386": "386",
    "i686": "386",
    "x86": "386",
}


def host_platform() -> tuple[str, str]:
    """``(os, arch)`` of this machine in the words :func:`package_platform` uses."""
    os_name = "darwin" if sys.platform == "darwin" else "windows" if sys.platform.startswith("win") else sys.platform
    if os_name.startswith("linux"):
        os_name = "linux"
    machine = _platform.machine().lower()
    return os_name, _ARCH_WORDS.get(machine, machine)


def package_platform(package: PackageOption) -> tuple[str | None, str | None]:
    """The ``(os, arch)`` a package is built for, or ``(None, None)`` when it does not say.

    The rule: split the ``runtimeHint`` and the file name of the identifier into words
    (on ``-``, ``_``, ``.``, ``/``); the first OS word (darwin/macos/osx/mac, linux,
    windows/win/win32/win64) and the first architecture word (arm64/aarch64, amd64/x86_64/
    x64, 386/i386/i686/x86) found decide. Only mcpb bundles are read this way.
    """
    if package.type != "mcpb":
        return None, None
    name = package.identifier.rsplit("/", 1)[-1].lower()
    text = f"{package.runtime_hint or ''} {name}".lower().replace("x86_64", "x86-64")
    words = [w for w in re.split(r"[\s_./-]+", text) if w]
    joined = [*words, *("-".join(p) for p in zip(words, words[1:]))]
    os_name = next((_OS_WORDS[w] for w in words if w in _OS_WORDS), None)
    arch = next((_ARCH_WORDS[w] for w in joined if w in _ARCH_WORDS), None)
    return os_name, arch


def _platform_fits(package: PackageOption, here: tuple[str, str]) -> bool:
    os_name, arch = package_platform(package)
    return (os_name is None or os_name == here[0]) and (arch is None or arch == here[1])


# --- availability and choice ----------------------------------------------------------


def runner_availability(runner: str | None, *, which: Which = runner_which) -> tuple[bool, str | None]:
    """``(True, None)`` when ``runner`` is None or on PATH, else ``(False, reason)``."""
    if runner is None or which(runner):
        return True, None
    hint = INSTALL_HINTS.get(runner, f"install {runner}")
    return False, f"needs {runner}, which is not on this machine: {hint}"


def package_availability(
    package: PackageOption, *, which: Which = runner_which, platform: tuple[str, str] | None = None
) -> tuple[bool, str | None]:
    """Whether this machine can run ``package`` now, and why not.

    remote is always available. mcpb counts as available when it is built for this
    platform (:func:`package_platform`; a bundle that names none fits all): its runtime
    (node, python, a binary…) is named by the bundle's manifest, so it is checked after
    download and unpacking (use :func:`runner_availability` on the spec's ``runner``).
    """
    here = platform or host_platform()
    if not _platform_fits(package, here):
        built = "-".join(x for x in package_platform(package) if x)
        return False, f"is built for {built}, and there is no build for this platform ({here[0]}-{here[1]})"
    return runner_availability(RUNNERS.get(package.type), which=which)


def describe_packages(
    packages: Sequence[PackageOption], *, which: Which = runner_which, platform: tuple[str, str] | None = None
) -> list[dict[str, Any]]:
    """``[{id, type, available, reason?}]`` for ``mcp_setup_get``."""
    out: list[dict[str, Any]] = []
    for pkg in packages:
        ok, reason = package_availability(pkg, which=which, platform=platform)
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
    which: Which = runner_which,
    platform: tuple[str, str] | None = None,
) -> PackageOption:
    """The package to run.

    ``package`` is an option id (``npm``, ``npm:2``, ``remote``) or a type; an id wins over
    a type. Without it, the first available package in ``preference`` order is taken
    (see :data:`DEFAULT_PREFERENCE` for why npm/pypi come first and remote last; a bundle
    without a sha256 from another host, :func:`unverified_download`, after all of them); types
    missing from ``preference`` rank after the listed ones, in the server's order.
    Bundles built for another OS or architecture are never chosen (:func:`package_platform`).
    """
    here = platform or host_platform()
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
            ok, reason = package_availability(pkg, which=which, platform=here)
            if ok:
                return pkg
            first_reason = first_reason or reason
        raise _unavailable(candidates[0], first_reason)

    rank = {t: i for i, t in enumerate(preference)}
    ordered = sorted(packages, key=lambda p: (unverified_download(p), rank.get(p.type, len(rank))))
    missing: dict[str, str] = {}
    wrong_platform = False
    for pkg in ordered:
        ok, _ = package_availability(pkg, which=which, platform=here)
        if ok:
            return pkg
        if not _platform_fits(pkg, here):
            wrong_platform = True
            continue
        runner = RUNNERS.get(pkg.type) or pkg.type
        missing.setdefault(runner, INSTALL_HINTS.get(runner, f"install {runner}"))
    if not missing and wrong_platform:
        raise NoRunnablePackage(
            f"This server has no build for this platform ({here[0]}-{here[1]}); "
            "its bundles are built for other systems.",
            details={"platform": f"{here[0]}-{here[1]}"},
        )
    needs = "; ".join(f"{runner} ({hint})" for runner, hint in missing.items())
    raise NoRunnablePackage(
        f"No package of this server can run on this machine. It needs one of: {needs}.",
        details={"missing_runners": list(missing)},
    )
