"""The host's half of a sandboxed server's own network namespace: the hand-off of its sockets.

bubblewrap starts the server in a new network namespace (``--unshare-net``; bwrap brings ``lo``
up there) with :mod:`~setup_agent.launch.netns_bootstrap` in front of its command. The bootstrap
binds the proxy's port on the namespace's loopback (and each granted loopback service's port),
hands the listening sockets to mcp-setup over an inherited socketpair (``SCM_RIGHTS``), sets the
proxy variables and ``exec``s the server. mcp-setup's :class:`~setup_agent.launch.net_proxy.NetProxy`
then ``accept()``s on those sockets: no bridge process stays running, no socket file exists
anywhere, and nothing else can connect to the channel.

One :class:`NetnsBridge` per server start. The launch function (the integration):

.. code-block:: python

    grants = {e.port: e for e in policy.loopback_grants()}    # found at its own loopback too
    bridge = NetnsBridge(forwards=list(grants))               # before building the argv
    argv = bridge.into_bwrap(sandbox_argv)                    # or, in _bwrap_argv: no --share-net,
    # ro-bind each of bridge.read_only(), and "--", *bridge.command(command, args) at the end
    process = await anyio.open_process(argv, ..., pass_fds=bridge.pass_fds)
    bridge.spawned()                                          # our copy of its end closed
    sockets = await bridge.sockets(timeout)                   # or the process's stderr says why
    bridge.close()
    listeners = [await proxy.serve(sockets.proxy, policy_of_server, record)]
    listeners += [await proxy.forward(s, grants[port], policy_of_server, record)
                  for port, socks in sockets.forwards.items() for s in socks]
    ...                                                       # on stop: aclose() each listener

The bootstrap refuses (exit 126, its reason on stderr) to start a server that would share the
host's network namespace, or where it cannot tell (no ``/proc`` in the sandbox).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from setup_agent.errors import SandboxUnavailable

from . import netns_bootstrap

__all__ = ["NetnsBridge", "NetnsSockets", "bootstrap_python", "host_netns"]


def host_netns() -> int:
    """The inode of this process's network namespace (the bootstrap refuses to run in it)."""
    return os.stat("/proc/self/ns/net").st_ino


#: Interpreters preferred for the bootstrap: in ``/usr``, which every sandbox shows read-only, and
#: usually built without a shared libpython, so they start faster than a pyenv or uv build.
SYSTEM_PYTHONS = ("/usr/bin/python3",)


def bootstrap_python() -> Path:
    """The interpreter that runs the bootstrap (standard library only, Python ≥ 3.8): the system's
    ``python3`` where there is one, else this process's base interpreter, real path (a venv's
    ``python`` is a link into it; with ``-I -S`` it needs only its standard library)."""
    for candidate in SYSTEM_PYTHONS:
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.access(real, os.X_OK):
            return Path(real)
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(os.path.realpath(base))


def _interpreter_files(python: Path) -> list[Path]:
    """What ``python -I -S`` needs to see inside the sandbox: nothing more for one in ``/usr``;
    else (this process's base interpreter) itself, its standard library (with ``lib-dynload``)
    and its shared libpython when it has one, nothing else of its prefix (no site-packages are
    read; the user's home stays hidden around them)."""
    if str(python).startswith("/usr/"):
        return []
    base = {"installed_base": sys.base_prefix, "platbase": sys.base_exec_prefix, "base": sys.base_prefix}
    paths = {python, *(Path(sysconfig.get_path(name, vars=base)) for name in ("stdlib", "platstdlib"))}
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir, library = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
        if libdir and library and (Path(libdir) / library).exists():
            paths.add(Path(libdir) / library)
    return sorted(p for p in paths if p.exists())


@dataclass
class NetnsSockets:
    """What the bootstrap handed out: the proxy's listening socket, and each granted loopback
    port's (``127.0.0.1`` and, with IPv6, ``::1``)."""

    proxy: socket.socket
    forwards: dict[int, list[socket.socket]] = field(default_factory=dict)

    @property
    def proxy_port(self) -> int:
        return int(self.proxy.getsockname()[1])

    def close(self) -> None:
        for sock in [self.proxy, *(s for group in self.forwards.values() for s in group)]:
            sock.close()


class NetnsBridge:
    """One server start's hand-off channel (module docstring).

    ``forwards``: granted loopback ports the server should find on its own loopback (the person
    allowed ``127.0.0.1:5432``: the server's Postgres client connects there as on the host).
    ``python``: what runs the bootstrap (:func:`bootstrap_python`; another one must be this
    process's base interpreter or live in ``/usr``); ``netns``: the host's network namespace
    (:func:`host_netns`), both seams for tests."""

    def __init__(self, *, forwards: Sequence[int] = (), python: Path | None = None, netns: int | None = None) -> None:
        if any(not 1 <= p <= 65535 for p in forwards):
            raise ValueError(f"forwarded ports must be 1..65535, not {list(forwards)}")
        self._forwards = tuple(dict.fromkeys(forwards))
        self._python = python if python is not None else bootstrap_python()
        self._netns = netns if netns is not None else host_netns()
        # Python's sockets are close-on-exec: only the end given in pass_fds reaches the server.
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The fd the spawn must pass on (``pass_fds=``); bwrap keeps it open for the bootstrap."""
        return (self._theirs.fileno(),) if self._theirs.fileno() >= 0 else ()

    def command(self, command: str, args: Sequence[str]) -> list[str]:
        """The command line after bwrap's ``--``: the bootstrap, then ``command`` (an absolute path)."""
        ports = ",".join(["0", *map(str, self._forwards)])
        bootstrap = str(Path(netns_bootstrap.__file__).resolve())
        fd = str(self._theirs.fileno())
        return [str(self._python), "-I", "-S", bootstrap, fd, str(self._netns), ports, command, *args]

    def read_only(self) -> list[Path]:
        """Paths the sandbox must bind read-only for the bootstrap to run: its interpreter (which
        may live in the user's home, hidden otherwise), the standard library, the script."""
        return [*_interpreter_files(self._python), Path(netns_bootstrap.__file__).resolve()]

    def into_bwrap(self, argv: Sequence[str]) -> list[str]:
        """A bwrap command line (``[bwrap, options..., "--", command, args...]``, as
        ``Sandbox._bwrap_argv`` builds it) made to run in a network namespace of its own: no
        ``--share-net``, :meth:`read_only` bound before ``--remount-ro`` (or before ``--``), and
        the bootstrap in front of the command."""
        argv = [a for a in argv if a != "--share-net"]
        cut = argv.index("--")
        options, command = argv[:cut], argv[cut + 1 :]
        binds = [x for path in self.read_only() for x in ("--ro-bind", str(path), str(path))]
        at = options.index("--remount-ro") if "--remount-ro" in options else len(options)
        return [*options[:at], *binds, *options[at:], "--", *self.command(command[0], command[1:])]

    def spawned(self) -> None:
        """Call right after the spawn: our copy of the server's end is closed, so the channel
        ends (and :meth:`sockets` fails at once) if the bootstrap dies before handing out."""
        self._theirs.close()

    async def sockets(self, timeout: float) -> NetnsSockets:
        """The listening sockets the bootstrap handed out (the process's stderr says why when
        it could not; raises :class:`SandboxUnavailable` then, or on ``timeout``)."""
        loop = asyncio.get_running_loop()
        self._ours.setblocking(False)
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self._ours.fileno(), readable)
        try:
            async with asyncio.timeout(timeout):
                await ready
        except TimeoutError:
            raise SandboxUnavailable(
                f"The server's network namespace did not hand out its proxy socket within {timeout:g} s."
            ) from None
        finally:
            loop.remove_reader(self._ours.fileno())
        try:
            text, fds, _flags, _ = socket.recv_fds(
                self._ours, 4096, 1 + 2 * len(self._forwards), socket.MSG_CMSG_CLOEXEC
            )
        except OSError as exc:
            raise SandboxUnavailable(f"The server's network namespace could not hand out its sockets: {exc}.") from None
        finally:
            self._ours.close()
        received = [socket.socket(fileno=fd) for fd in fds]
        words = text.decode("ascii", "replace").split()
        if not received or len(words) != len(received):
            for sock in received:
                sock.close()
            raise SandboxUnavailable("The server's sandbox stopped before it handed out its network sockets.")
        out = NetnsSockets(received[0])
        for sock in received[1:]:
            out.forwards.setdefault(int(sock.getsockname()[1]), []).append(sock)
        return out

    def close(self) -> None:
        """Close the channel (both ends); safe to call more than once."""
        self._ours.close()
        self._theirs.close()

    def __enter__(self) -> NetnsBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
