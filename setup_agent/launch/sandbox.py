"""The sandbox every local server starts in: what it sees, and how that is enforced.

An installed server is untrusted code running as the user. Started through :meth:`Sandbox.wrap`,
it sees:

- **read-only**: the system (``/usr``, ``/bin``, ``/lib*``, ``/etc`` less its secrets), its runtime
  (the prefix of the resolved command, e.g. a pyenv or a venv, never a prefix that holds the data
  dir or is the user's home) and what the download phase put in the runners' caches for it: its
  own package's npx entry, uv's unpacked wheels and tool environments, linked into private caches
  in its ``HOME`` (:meth:`Sandbox._cache_views`), so no server changes what another runs (a
  server started without its runner, ``direct.py``, gets its runner's views and runs from them);
- **read-write**: its working dir (the install dir, or the probe's scratch dir), a private
  ``HOME`` inside it (``<workdir>/home``: kept with an install), a private ``/tmp`` and the paths
  the user granted in the consent (:class:`Profile`);
- nothing else: not the data dir (database, key file, logs, other servers, scratch, caches of
  bundles), not the user's home, not other processes.

Mechanisms, chosen once (``MCP_SETUP_SANDBOX=auto|bwrap|landlock|off``, read in app/settings.py):

- **bwrap** (bubblewrap, where user namespaces work): a new mount namespace holding only the
  paths above, its own PID, IPC, UTS and cgroup namespaces (so mcp-setup's ``/proc/<pid>`` does not
  exist for it and cannot be signalled or traced), no capabilities, ``--die-with-parent``; its own
  network namespace, reaching out only through mcp-setup's proxy (``server_net.py``; a local
  package that serves HTTP shares the host's, as mcp-setup reaches it there).
- **landlock** (Linux ≥ 5.13): the same filesystem rules applied by the kernel to the server
  and its children (:mod:`setup_agent.launch.landlock`, a small ctypes layer of ours); ptrace of
  processes outside the domain is refused by Landlock itself, signals and abstract sockets are
  scoped where the kernel has ABI 6, TCP is refused for a profile with no network (ABI 4). The
  process tree is shared, and ``/tmp`` is the workdir's ``tmp``.
- **none**: macOS, Windows, an old or locked-down kernel, or ``off``: the server runs as before,
  and every face says "not isolated on this system".

OCI packages (``docker run``) are isolated by their container and are not wrapped.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from setup_agent.errors import InvalidInput, SandboxUnavailable

from .fetch_plans import npx_entry_name
from .registries import runner_registries
from .runners import runner_name

if TYPE_CHECKING:
    from .net_isolation import NetIsolation
    from .net_proxy import NetProxy
    from .spec import ResolvedLaunch

__all__ = ["Mechanism", "Profile", "Sandbox", "SandboxMode", "real_folder", "sandboxed"]

logger = logging.getLogger(__name__)

SandboxMode = Literal["auto", "bwrap", "landlock", "off"]
Mechanism = Literal["bwrap", "landlock", "none"]

#: Read-only system paths (those that exist; a symlink such as Debian's /bin is kept a symlink).
#: The system's program folders, at the end of every sandboxed server's PATH.
_SYSTEM_BIN = ("/usr/local/bin", "/usr/bin", "/bin")
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt/homebrew")
#: Inside /etc: what no server needs (hidden under an empty file or dir).
ETC_SECRETS = (
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/mcp-setup",
)
#: In the user's home: the usual credential files and folders. Never shown to a server, not even
#: when a server's settings name one as the folder it should use.
USER_SECRETS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".config",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".terraform.d",
    ".oci",
    ".local/share/keyrings",
    ".password-store",
    ".mozilla",
    ".pki",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".history",
    ".sh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".local/share/fish/fish_history",
)
#: uv's cache buckets a uvx server reads from the shared cache (read-only, linked into its own):
#: the unpacked wheels and the tool environments the download phase made of them.
_UV_SHARED = ("archive-v", "environments-v")
#: Runners whose process is a container engine: the container is the sandbox.
CONTAINER_RUNNERS = ("docker", "podman")

_BIN_DIRS = ("bin", "sbin", "shims", "Scripts")


@dataclass(frozen=True)
class Profile:
    """What one server may see besides the system, its runtime and the caches."""

    workdir: Path
    #: Paths the user granted in the consent (read-write), stored with the install.
    grants: tuple[Path, ...] = ()
    network: bool = True
    #: Its own besides the workdir: an MCPB bundle unpacked elsewhere (a test's workspace).
    own: tuple[Path, ...] = ()
    #: Read-only: files its entry names literally (a local script), see :attr:`ResolvedLaunch.literal_paths`.
    reads: tuple[Path, ...] = ()
    #: Read-only too: those of ``reads`` in the user's home that the user ticked in the consent.
    chosen: tuple[Path, ...] = ()
    #: Landlock with a network: the only TCP ports it may connect to (mcp-setup's proxy on the
    #: host's loopback, granted loopback ports); None: not restricted (``server_net.py``).
    connect_ports: tuple[int, ...] | None = None

    @property
    def home(self) -> Path:
        """The server's private HOME: kept with the install (``~/.something`` state survives)."""
        return self.workdir / "home"

    @property
    def tmp(self) -> Path:
        return self.workdir / "tmp"


@dataclass
class Sandbox:
    """Wraps a server's command line; one per process, built from the setting.

    ``hide`` are the paths no server may see even when a runtime prefix would hold them (the
    data dir); ``user_home`` is never bound as a runtime prefix. ``host_env`` tells where the
    runners' caches are."""

    mode: SandboxMode = "auto"
    hide: tuple[Path, ...] = ()
    user_home: Path | None = None
    host_env: Mapping[str, str] = field(default_factory=dict)
    which: Callable[[str], str | None] = shutil.which
    platform: str = sys.platform
    #: The proxy every sandboxed server of this process reaches the network through (made on
    #: first use; a test gives one whose resolver and connector stay on this machine).
    proxy: NetProxy | None = field(default=None, repr=False)
    _mechanism: Mechanism | None = field(default=None, repr=False)
    _why: str = field(default="", repr=False)
    _net: NetIsolation | None = field(default=None, repr=False)

    # --- which mechanism -----------------------------------------------------------------

    @property
    def mechanism(self) -> Mechanism:
        """The mechanism that runs here (found once; a trial start of bwrap, a Landlock version)."""
        if self._mechanism is None:
            self._mechanism, self._why = self._detect()
            logger.info("sandbox: %s (%s)", self._mechanism, self._why)
        return self._mechanism

    @property
    def why(self) -> str:
        """Why this mechanism (for ``doctor``)."""
        _ = self.mechanism
        return self._why

    def _detect(self) -> tuple[Mechanism, str]:
        if self.mode == "off":
            return "none", "MCP_SETUP_SANDBOX=off (unsafe: servers run as you, unisolated)"
        if not self.platform.startswith("linux"):
            return "none", f"no sandbox on {self.platform}"
        reasons = []
        if self.mode in ("auto", "bwrap"):
            ok, why = self._bwrap_works()
            if ok:
                return "bwrap", why
            reasons.append(why)
        if self.mode in ("auto", "landlock"):
            from .landlock import abi_version

            abi = abi_version()
            if abi >= 1:
                return "landlock", f"Landlock ABI {abi}" + (f" ({reasons[0]})" if reasons else "")
            reasons.append("Landlock is not available in this kernel")
        return "none", "; ".join(reasons)

    def _bwrap_works(self) -> tuple[bool, str]:
        path = self.which("bwrap")
        if path is None:
            return False, "bubblewrap (bwrap) is not installed"
        try:
            trial = subprocess.run(
                [path, "--ro-bind", "/", "/", "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "true"],
                capture_output=True,
                timeout=10,
                env={"PATH": "/usr/bin:/bin"},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bwrap could not start ({type(exc).__name__})"
        if trial.returncode != 0:
            err = trial.stderr.decode("utf-8", "replace").strip().splitlines()
            return False, "bwrap cannot make namespaces here" + (f": {err[-1][:200]}" if err else "")
        return True, f"bubblewrap at {path}"

    def network_isolation(self) -> NetIsolation:
        """What holds a sandboxed server's network to the proxy here (``net_isolation.py``), found once."""
        if self._net is None:
            from .net_isolation import network_isolation

            self._net = network_isolation(self.mechanism)
            logger.info("sandbox network: %s (%s)", self._net.mechanism, self._net.why)
        return self._net

    def net_proxy(self) -> NetProxy:
        """The proxy of this process's sandboxed servers (one for all: one resolver, one bound)."""
        if self.proxy is None:
            from .net_proxy import NetProxy

            self.proxy = NetProxy()
        return self.proxy

    def required_but_missing(self) -> str | None:
        """A forced mechanism (``bwrap``, ``landlock``) that does not work: servers do not start."""
        if self.mode in ("bwrap", "landlock") and self.mechanism != self.mode:
            return f"MCP_SETUP_SANDBOX={self.mode}, but it does not work here: {self.why}"
        return None

    # --- what a server sees --------------------------------------------------------------

    def caches(self) -> dict[str, Path]:
        """The runners' caches, by the variable that names them to the runner."""
        env = self.host_env
        home = Path(env.get("HOME") or (str(self.user_home) if self.user_home else "~")).expanduser()
        xdg_cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
        xdg_data = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local" / "share"
        npm = env.get("npm_config_cache") or env.get("NPM_CONFIG_CACHE") or str(home / ".npm")
        return {
            "npm_config_cache": Path(npm),
            "UV_CACHE_DIR": Path(env.get("UV_CACHE_DIR") or xdg_cache / "uv"),
            "UV_PYTHON_INSTALL_DIR": Path(env.get("UV_PYTHON_INSTALL_DIR") or xdg_data / "uv" / "python"),
        }

    def _cache_views(self, name: str, args: Sequence[str], profile: Profile) -> _Views:
        """How the server's runner sees the caches the download phase filled: read-only, through
        links in a private cache of its own, so that no server can change what another runs.

        npm writes wherever it reads (its index on a lookup, a ``concurrency.lock`` in the npx
        entry it runs), so an npx server gets a private npm cache in its HOME holding its own
        package's npx entry, whose files (``node_modules``, ``package.json``, the lock file) are
        links to the shared entry, shown read-only; no other entry is shown. The package is not
        downloaded again, only its registry metadata on a first start. uv locks and revalidates
        in its cache, so a uvx server gets a private uv cache whose unpacked wheels
        (``archive-v*``) and tool environments (``environments-v*``) are links to the shared
        ones, shown read-only; its index answers and interpreter notes are its own.

        Everything is made anew in the server's own folder before each start, never through
        what is there: a link or file the server planted is removed, not followed
        (:func:`_own_dir`, :func:`_fresh_link`)."""
        caches = self.caches()
        views = _Views()
        views.env.update(runner_registries(name, args, self.host_env)[1])  # its config files are hidden
        if name in ("npx", "npm"):
            private = profile.home / ".npm"
            _own_dir(private)
            views.env.update(
                {
                    "npm_config_cache": str(private),
                    "npm_config_update_notifier": "false",
                    "npm_config_prefer_offline": "true",
                    # the shell npx runs the package's bin with, by its path (as the download
                    # phase does): the package's own .bin, first on npx's PATH, may name one "sh"
                    "npm_config_script_shell": "/bin/sh",
                }
            )
            npx = private / "_npx"
            if npx.is_symlink() and Path(os.readlink(npx)) == caches["npm_config_cache"] / "_npx":
                npx.unlink()  # the link to the whole shared _npx that earlier versions made
            _own_dir(npx)
            target = next((a for a in args if not a.startswith("-")), None)
            if target is not None:
                shared = caches["npm_config_cache"] / "_npx" / npx_entry_name(target)
                mine = npx / npx_entry_name(target)
                _remove(mine)
                mine.mkdir(mode=0o700)
                if shared.is_dir() and not shared.is_symlink():
                    for child in sorted(shared.iterdir()):
                        _fresh_link(mine / child.name, child)
                    views.read.append(shared)
        if name in ("uvx", "uv"):
            shared = caches["UV_CACHE_DIR"]
            private = profile.home / ".cache" / "uv"
            _own_dir(private.parent)
            _own_dir(private)
            views.env["UV_CACHE_DIR"] = str(private)
            for bucket in sorted(private.iterdir()):
                if bucket.name.startswith(_UV_SHARED):
                    _remove(bucket)  # a bucket of another uv version, or one the server replaced
            if shared.is_dir():
                for bucket in sorted(shared.iterdir()):
                    if bucket.name.startswith(_UV_SHARED) and bucket.is_dir() and not bucket.is_symlink():
                        _fresh_link(private / bucket.name, bucket)
                        views.read.append(bucket)
            python = caches["UV_PYTHON_INSTALL_DIR"]
            if python.is_dir():
                views.env["UV_PYTHON_INSTALL_DIR"] = str(python)
                views.read.append(python)
        return views

    def shows_cached(self, name: str, args: Sequence[str], path: Path) -> bool:
        """Does a start of runner ``name`` with ``args`` see ``path`` in its cache views
        (:meth:`_cache_views`: its own npx entry; uv's unpacked wheels and environments)? What a
        server started without its runner may run (``direct.py``); everything, with no mechanism."""
        if self.mechanism == "none":
            return True
        caches = self.caches()
        if name in ("npx", "npm"):
            target = next((a for a in args if not a.startswith("-")), None)
            if target is None:
                return False
            shown = [caches["npm_config_cache"] / "_npx" / npx_entry_name(target)]
        elif name in ("uvx", "uv"):
            root = caches["UV_CACHE_DIR"]
            shown = [b for b in root.glob("*") if b.name.startswith(_UV_SHARED) and not b.is_symlink()]
        else:
            return False
        return any(p.is_dir() and not p.is_symlink() and _within(path, p) for p in shown)

    def download_views(self, name: str) -> _Views:
        """The caches a download phase of runner ``name`` fills (npm's cache; uv's and its
        Pythons'), named to it and writable: nothing else it may write but its own folder."""
        caches = self.caches()
        views = _Views()
        names = {"npm": ("npm_config_cache",), "uv": ("UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR")}
        for var in names.get({"npx": "npm", "uvx": "uv"}.get(name, name), ()):
            caches[var].mkdir(parents=True, exist_ok=True, mode=0o700)
            views.env[var] = str(caches[var])
            views.write.append(caches[var])
        return views

    def runtime_paths(self, command: str) -> list[Path]:
        """Read-only: the prefix of the command as found and of its real file (a venv and the
        python it points to, a pyenv shim and pyenv), narrowed to the bin dir or the file when
        a prefix would hold a hidden path or the user's home."""
        out: list[Path] = []
        for path in {*_link_chain(Path(command)), Path(os.path.realpath(command))}:
            out.append(self._narrow(path))
        venv_cfg = Path(command).parent.parent / "pyvenv.cfg"
        if venv_cfg.is_file():  # a venv's python points at its base interpreter's prefix
            out.append(venv_cfg)
            for line in venv_cfg.read_text(errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    out.append(self._narrow(Path(value.strip()) / "python"))
        return sorted(set(out))

    def _narrow(self, file: Path) -> Path:
        candidates = [file.parent.parent, file.parent] if file.parent.name in _BIN_DIRS else [file.parent]
        for candidate in candidates:
            if self._safe_to_show(candidate):
                return candidate
        return file

    def _readable_literal(self, path: Path, chosen: Sequence[Path] = ()) -> bool:
        """A file the entry names may be shown, but never one of mcp-setup's, nor one in the user's
        home unless the user ticked it in the consent (what a registry entry names there is not the
        person's choice), and never one of the usual credential files, ticked or not."""
        if any(_within(path, h) for h in self.hide):
            return False
        home = self.user_home
        if home is None or not _within(path, home):
            return True
        return path in chosen and not any(_within(path, s) for s in self._user_secrets())

    def _user_secrets(self) -> list[Path]:
        """The credential files and folders of :data:`USER_SECRETS` that exist in the user's home."""
        home = self.user_home
        return [] if home is None else [home / d for d in USER_SECRETS if os.path.lexists(home / d)]

    def _safe_to_show(self, path: Path) -> bool:
        if path == Path(path.anchor):
            return False
        for hidden in (*self.hide, *([self.user_home] if self.user_home else [])):
            if _within(hidden, path):  # the candidate holds (or is) a hidden path
                return False
        return True

    # --- wrapping ------------------------------------------------------------------------

    def wrap(
        self,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        profile: Profile,
        runner: tuple[str, Sequence[str]] | None = None,
    ) -> tuple[str, list[str], dict[str, str]]:
        """``(command, args, env)`` that start ``command`` (already resolved on PATH) inside the
        sandbox; unchanged with no mechanism. Creates the private HOME and tmp dirs. ``runner``:
        the runner and arguments whose cache views it gets (a server started without its runner,
        ``direct.py``: the same views); by default ``command``'s own."""
        if self.mechanism == "none":
            return command, list(args), dict(env)
        _own_dir(profile.home)
        name, runner_args = (runner_name(runner[0]), runner[1]) if runner is not None else (runner_name(command), args)
        return self._wrap(command, args, env, profile, self._cache_views(name, runner_args, profile))

    def wrap_download(
        self, command: str, args: Sequence[str], env: Mapping[str, str], profile: Profile
    ) -> tuple[str, list[str], dict[str, str]]:
        """:meth:`wrap` for a download phase (``setup_agent/launch/fetch.py``): the same system
        and runtime read-only, ``profile.workdir`` (a private scratch dir, its HOME inside) and
        the caches the runner fills (:meth:`download_views`) writable, nothing else."""
        if self.mechanism == "none":
            return command, list(args), dict(env)
        _own_dir(profile.home)
        return self._wrap(command, args, env, profile, self.download_views(runner_name(command)))

    def _wrap(
        self, command: str, args: Sequence[str], env: Mapping[str, str], profile: Profile, views: _Views
    ) -> tuple[str, list[str], dict[str, str]]:
        mechanism = self.mechanism
        _own_dir(profile.tmp)
        inner = dict(env)
        inner["HOME"] = str(profile.home)
        inner.update(
            {
                "XDG_CACHE_HOME": str(profile.home / ".cache"),
                "XDG_CONFIG_HOME": str(profile.home / ".config"),
                "XDG_DATA_HOME": str(profile.home / ".local" / "share"),
            }
        )
        inner.pop("XDG_RUNTIME_DIR", None)
        # The system's program folders (shown in every sandbox) end its PATH, whatever PATH the
        # person's own folders made: what a runner starts by name (sh, dirname, python3) is there.
        on_path = inner.get("PATH", "").split(os.pathsep)
        inner["PATH"] = os.pathsep.join([*filter(None, on_path), *(d for d in _SYSTEM_BIN if d not in on_path)])
        inner.update(views.env)
        reads = [p for p in profile.reads if self._readable_literal(p, profile.chosen)]
        runtime = self.runtime_paths(command)
        interpreter = _script_interpreter(command, inner.get("PATH", ""))
        if interpreter is not None:  # a bundled npx's "#!/usr/bin/env node": that node is shown too
            runtime += self.runtime_paths(interpreter)
        read_only = sorted({*runtime, *views.read, *reads})
        # The user's credential files are never shown: a grant inside one is dropped, and a grant
        # that holds one (or the data dir: the user's whole home) shows all of it but those.
        secrets = self._user_secrets()
        profile = replace(profile, grants=tuple(g for g in profile.grants if not any(_within(g, s) for s in secrets)))
        masks = [str(h) for h in (*self.hide, *secrets) if any(_within(h, g) for g in (*profile.grants, *read_only))]
        writable = [*profile.grants, profile.workdir, *profile.own, *views.write]
        if mechanism == "bwrap":
            inner["TMPDIR"] = "/tmp"
            argv = self._bwrap_argv(command, args, read_only, writable, profile, masks)
            return argv[0], argv[1:], inner
        inner["TMPDIR"] = str(profile.tmp)
        # No /proc: Landlock's ptrace rule does not cover every /proc/<pid> file on every kernel.
        rules = {
            "read": [p for p in (*SYSTEM_PATHS, "/dev") if os.path.exists(p)] + [str(p) for p in read_only],
            "write": [str(p) for p in writable] + ["/dev/null", "/dev/tty"],
            "deny": [p for p in ETC_SECRETS if os.path.exists(p)] + masks,
            "network": profile.network,
        }
        if profile.network and profile.connect_ports is not None:
            from .landlock import network_rules

            rules.update(network_rules(list(profile.connect_ports)))
        from . import landlock

        launcher = [sys.executable, "-I", "-S", landlock.__file__, json.dumps(rules), command, *args]
        return launcher[0], launcher[1:], inner

    def _bwrap_argv(
        self,
        command: str,
        args: Sequence[str],
        read_only: Sequence[Path],
        writable: Sequence[Path],
        profile: Profile,
        masks: Sequence[str] = (),
    ) -> list[str]:
        bwrap = self.which("bwrap") or "bwrap"
        argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
        if profile.network:
            argv.append("--share-net")
        for path in SYSTEM_PATHS:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        for path in ETC_SECRETS:
            if os.path.isdir(path) and not os.path.islink(path):
                argv += ["--tmpfs", path]
            elif os.path.lexists(path):
                argv += ["--ro-bind", "/dev/null", path]
        resolv = os.path.realpath("/etc/resolv.conf")  # often a link into /run (systemd-resolved)
        if not resolv.startswith("/etc/") and os.path.exists(resolv):
            argv += ["--ro-bind", resolv, resolv]
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for ro in read_only:
            argv += ["--ro-bind-try", str(ro), str(ro)]
        grants = len(profile.grants)
        for rw in writable[:grants]:  # a granted folder removed since: the server starts without it
            argv += ["--bind-try", str(rw), str(rw)]
        for path in masks:  # over a grant that holds it; its own dirs are bound again below
            argv += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
        for rw in writable[grants:]:
            argv += ["--bind", str(rw), str(rw)]
        # The dirs bwrap made to hold the binds (the data dir's, the user's home's path) stay empty.
        argv += ["--remount-ro", "/", "--chdir", str(profile.workdir), "--", command, *args]
        return argv


@dataclass
class _Views:
    env: dict[str, str] = field(default_factory=dict)
    read: list[Path] = field(default_factory=list)
    write: list[Path] = field(default_factory=list)


def sandboxed(
    sandbox: Sandbox | None,
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    resolved: ResolvedLaunch,
    *,
    connect_ports: Sequence[int] | None = None,
    runner: tuple[str, Sequence[str]] | None = None,
) -> tuple[str, list[str], dict[str, str]]:
    """``(command, args, env)`` of a local launch (``resolved``, filled as ``command`` and ``args``):
    through ``sandbox`` when there is one (its working dir is the folder it may write), as it is
    for a container runner or no sandbox. ``runner``: see :meth:`Sandbox.wrap`.

    Raises :class:`SandboxUnavailable` when the setting forces a mechanism that does not work."""
    if sandbox is None or Path(command).name in CONTAINER_RUNNERS:
        return command, list(args), dict(env)
    missing = sandbox.required_but_missing()
    if missing:
        raise SandboxUnavailable(missing, details={"sandbox": sandbox.mode})
    if resolved.cwd is None:
        raise InvalidInput("A sandboxed server needs its working dir, and none was given.")
    # A local package serving HTTP is reached on loopback: it keeps the network.
    network = resolved.policy.mode != "none" or resolved.transport != "stdio"
    own = (Path(resolved.bundle_dir),) if resolved.bundle_dir and not _within(resolved.bundle_dir, resolved.cwd) else ()
    reads = tuple(Path(p) for p in resolved.literal_paths if os.path.isfile(p))
    chosen = tuple(Path(p) for p in resolved.chosen_reads)
    ports = tuple(connect_ports) if connect_ports is not None else None
    profile = Profile(Path(resolved.cwd), tuple(Path(g) for g in resolved.grants), network, own, reads, chosen, ports)
    return sandbox.wrap(command, args, env, profile, runner)


def real_folder(path: Path) -> bool:
    """Is ``path`` (in a server's folder) a real folder of its own? A link or file a server
    planted there is removed, never followed, and the answer is False: the caller makes it anew."""
    if path.is_dir() and not path.is_symlink():
        return True
    if os.path.lexists(path):
        logger.warning("sandbox: %s was replaced by the server (a link or a file); removed", path)
        _remove(path)
    return False


def _remove(path: Path) -> None:
    """Remove what is at ``path`` (in a server's folder), never following a link: a link or file
    is unlinked, a folder removed with what it holds (``rmtree`` does not follow links in it)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _fresh_link(link: Path, target: Path) -> None:
    """``link`` (in a server's folder) made anew as a link to ``target``, whatever was there."""
    _remove(link)
    link.symlink_to(target, target_is_directory=target.is_dir())


def _own_dir(path: Path) -> None:
    """Make ``path`` (in a server's folder) a real directory: a link or file the server planted
    there is removed, never followed, so preparing its next start writes nothing elsewhere."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        logger.warning("sandbox: %s was replaced by the server (a link or a file); made a folder again", path)
        path.unlink()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def _script_interpreter(command: str, path: str) -> str | None:
    """The program a script's ``#!`` line runs (``#!/usr/bin/env node``: the ``node`` on ``path``);
    None for a binary, or an interpreter under the system's folders (always shown)."""
    try:
        with open(command, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(words[0], path=path) if words else None
    else:
        found = words[0] if words else None
    if found is None or any(_within(found, p) for p in SYSTEM_PATHS if os.path.exists(p)):
        return None
    return found


def _link_chain(path: Path, hops: int = 16) -> list[Path]:
    """``path`` and each symlink hop to its file (a venv's python → the base interpreter's)."""
    chain = [path]
    while hops > 0 and chain[-1].is_symlink():
        target = Path(os.readlink(chain[-1]))
        chain.append(target if target.is_absolute() else Path(os.path.normpath(chain[-1].parent / target)))
        hops -= 1
    return chain


def _within(inner: str | Path, outer: str | Path) -> bool:
    """``inner`` is ``outer`` or below it."""
    try:
        Path(inner).resolve().relative_to(Path(outer).resolve())
    except ValueError:
        return False
    return True
