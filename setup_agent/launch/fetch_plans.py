"""What to run to fill a runner's cache: the download phase's command (:func:`fetch_plan`) and
the prefetch's (:func:`prefetch_plan`), which runs before the user consented and so may download
but never run the package's code. :class:`setup_agent.launch.fetch.Fetcher` runs them.

- npm: ``npm exec --yes --prefer-offline --package=<spec> --call :`` (what ``npx -y <spec>``
  would install, into the same ``_npx`` cache entry; ``--registry`` kept); prefetched with
  ``--ignore-scripts`` added;
- PyPI: ``uvx --from <spec> python -c <print sys.prefix>`` (uv's cache; index and ``--python``
  options kept; the environment's prefix is where a start finds the tool's own program,
  ``direct.py``); prefetched as wheels only into a throw-away ``--target``;
- OCI: ``docker pull <image>``, the same either way.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .spec import LaunchSpec

__all__ = ["PREFIX", "PREFIX_MARK", "SAYS_PREFIX", "FetchPlan", "fetch_plan", "npx_entry_name", "prefetch_plan"]

#: Before the ``sys.prefix`` the PyPI download prints: the environment uv made (``direct.py``).
PREFIX_MARK = "mcp-setup-prefix="
SAYS_PREFIX = f"import sys; print({PREFIX_MARK!r} + sys.prefix, flush=True)"


@dataclass(frozen=True)
class FetchPlan:
    runner: str
    argv: tuple[str, ...]
    #: The package it fetches (runner, registry options, spec): a fetch waits for a prefetch of it.
    package: tuple[str, ...] = ()
    #: npm's prefetch (``--ignore-scripts``): after it, npx's new entry is kept only when no package
    #: in it has an install script (npx would reuse the entry without running them), and then
    #: ``warms`` (the key of the fetch npx would do) counts as done.
    settles_npx_entry: bool = False
    warms: tuple[str, ...] | None = None

    @property
    def key(self) -> tuple[str, ...]:
        return self.argv


def fetch_plan(spec: LaunchSpec) -> FetchPlan | None:
    """What to run to warm the cache for ``spec``; None when it has nothing to download."""
    runner, args = spec.runner, list(spec.args)
    if spec.package_type == "npm" and runner == "npx":
        options = [a for a in args if a.startswith("--registry=")]
        target = next((a for a in args if not a.startswith("-")), None)
        if target is None:
            return None
        return FetchPlan(
            # npx puts the tree's .bin first on PATH, so what it runs names nothing found there: the
            # shell by its absolute path (npm would look "sh" up on PATH) and ':' (its builtin); a
            # package with a bin named "node" or "sh" would run otherwise. --workspaces=false: npm
            # stops looking for a project (and its .npmrc) above the private dir it runs in.
            "npx",
            (
                "npm",
                "exec",
                "--yes",
                "--prefer-offline",
                "--update-notifier=false",
                "--loglevel=http",
                "--workspaces=false",
                "--script-shell=/bin/sh",
                *options,
                f"--package={target}",
                "--call",
                ":",
            ),
            package=("npm", *options, target),
        )
    if spec.package_type == "pypi" and runner == "uvx":
        index, target = _uvx_options(args)
        if target is None or target.startswith("-") or "${" in target or any("${" in a for a in index):
            return None  # (a "target" that is an option would be read by uv as one)
        # The packages it runs with (``--with``, a repair's ``mcp<2``): the same environment, which a
        # sandboxed server reads from uv's cache and cannot make itself.
        withs = _uvx_options(args, _UVX_WITH, flags=())[0]
        if any("${" in a for a in withs):
            return None
        return FetchPlan(
            "uvx",
            ("uvx", *index, *withs, "--from", target, "python", "-c", SAYS_PREFIX),
            package=("pypi", *index, target),
        )
    if spec.package_type == "oci" and runner == "docker" and spec.identifier:
        image = next((a for a in args if spec.identifier in a and not a.startswith("-")), None)
        if image is None or "${" in image:
            return None
        return FetchPlan("docker", ("docker", "pull", image), package=("oci", image))
    return None


#: uvx options that take a value as the next argument (``--opt=value`` needs no care).
_UVX_VALUED = frozenset(
    {
        "--from",
        "--with",
        "-w",
        "--with-editable",
        "--with-requirements",
        "--python",
        "-p",
        "--index",
        "--default-index",
        "--index-url",
        "-i",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--constraints",
        "-c",
        "--overrides",
        "--build-constraints",
        "-b",
        "--index-strategy",
        "--keyring-provider",
        "--resolution",
        "--prerelease",
        "--exclude-newer",
        "--exclude-newer-package",
        "--config-setting",
        "-C",
        "--cache-dir",
        "--directory",
        "--project",
        "--config-file",
        "--color",
        "--python-preference",
        "--link-mode",
        "--refresh-package",
        "--reinstall-package",
        "--upgrade-package",
        "-P",
        "--no-binary-package",
        "--no-build-package",
        "--env-file",
        "--allow-insecure-host",
        "--torch-backend",
    }
)
#: Of those, the ones a fetch keeps: where the package comes from, and for which Python.
#: Flags of uvx the download needs as much as the start (the computer's certificates: a repair).
_UVX_FLAGS_KEPT = ("--native-tls", "--system-certs")
_UVX_KEPT = ("--default-index", "--index", "--index-url", "-i", "--extra-index-url", "--python", "-p")


#: The options that add packages to the environment uvx runs the tool in.
_UVX_WITH = ("--with", "-w")


def _uvx_options(
    args: list[str], keep: tuple[str, ...] = _UVX_KEPT, flags: tuple[str, ...] = _UVX_FLAGS_KEPT
) -> tuple[list[str], str | None]:
    """``(kept options, package spec)`` of a uvx command line: the options named in ``keep`` with
    their values and the ``flags`` it has, and the spec, ``--from``'s value or the first positional argument (the values of
    uvx's own options skipped); None when absent."""
    kept: list[str] = []
    target: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if not arg.startswith("-"):
            return kept, target or arg  # the tool (or, after --from, the command): options end here
        if arg == "--":
            break
        if "=" in arg or arg not in _UVX_VALUED:
            if (name in keep and "=" in arg) or arg in flags:
                kept.append(arg)
            elif name == "--from" and "=" in arg:
                target = arg.split("=", 1)[1]
            i += 1
            continue
        value = args[i + 1] if i + 1 < len(args) else None
        if value is None:
            break
        if arg == "--from":
            target = value
        elif arg in keep:
            kept += [arg, value]
        i += 2
    return kept, target


def prefetch_plan(spec: LaunchSpec) -> FetchPlan | None:
    """What to run *before the user consented*: it may download, never run the package's code.

    npm: the fetch ``npx`` would do (:func:`fetch_plan`) with ``--ignore-scripts``, one pass that
    resolves, downloads and unpacks the tree into npx's own cache entry without running any of
    it; afterwards the entry is kept only when no package in it has an install script (npx would
    reuse it and never run them): otherwise it is removed, and the test, after consent, installs
    it again from the warm cache, scripts included. OCI: ``docker pull`` runs
    nothing. PyPI: ``uv pip install --system --no-build --target <throw-away dir>`` (index options
    kept) downloads the wheels of the tree into uv's cache — the cache the later ``uvx`` reads —
    without building an sdist (that would run its build backend: such a package is not prefetched,
    the ``uv`` run fails and changes nothing) and without starting a Python that sees the installed
    files (``uvx ... true`` would: uv queries the new environment's interpreter, which runs a
    wheel's ``.pth`` file). ``--system`` makes uv pick the interpreter ``uvx`` picks (a system
    one, never a virtualenv), so the wheels fetched are the ones its tags select.
    """
    plan = fetch_plan(spec)
    if plan is None:
        return None
    if plan.runner == "npx":
        argv = (*plan.argv[:3], "--ignore-scripts", *plan.argv[3:])  # npm exec --yes --ignore-scripts …
        return FetchPlan("npx", argv, package=plan.package, settles_npx_entry=True, warms=plan.key)
    if plan.runner == "docker":
        return plan
    if plan.runner == "uvx":
        options, target = plan.package[1:-1], plan.package[-1]
        if not _python_requests_only(options):
            return None  # uv would run the interpreter a registry named, to ask it its version
        argv = ("uv", "pip", "install", "--system", "--no-build", "--target", PREFIX, *options, target)
        return FetchPlan("uvx", argv, package=plan.package)
    return None


_PYTHON_VERSION = re.compile(r"(?:python|cpython)?\s*[<>=!~^]*\s*3(?:\.\d+){0,2}", re.IGNORECASE)


def _python_requests_only(options: tuple[str, ...]) -> bool:
    """Do the kept uv options name a Python only by version (``--python 3.12``), never by path?"""
    items = list(options)
    for i, opt in enumerate(items):
        name, eq, value = opt.partition("=")
        if name not in ("--python", "-p"):
            continue
        if not eq:
            value = items[i + 1] if i + 1 < len(items) else ""
        if not _PYTHON_VERSION.fullmatch(value.strip()):
            return False
    return True


#: In a plan's argv: a dir inside the run's private work dir (uv's ``--target``).
PREFIX = "<throw-away dir>"


def npx_entry_name(spec: str) -> str:
    """The dir npx (npm's libnpmexec) installs one registry ``spec`` into, under ``<cache>/_npx``:
    the first 16 hex digits of the sha512 of the spec as given."""
    return hashlib.sha512(spec.encode()).hexdigest()[:16]
