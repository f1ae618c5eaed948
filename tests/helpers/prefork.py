"""A fork server for the tests' ``mcp-setup`` processes: the program's modules imported once per
test worker, and each ``mcp-setup`` a test starts forked from that, instead of a new interpreter
importing them again.

Why: the suite starts ``mcp-setup serve`` and ``mcp-setup mcp`` hundreds of times, and most of
each start's CPU is importing (the MCP SDK's protocol models for two eras, SQLAlchemy, the core):
about two seconds of CPU per start, nearly half of the whole suite's CPU on a two-core machine.

What a test gets is still the program, in a process of its own, with the argument list,
environment, working directory, umask and standard streams (the very pipes) it gave, and the
exit code or signal the program ended with: :func:`mcp_setup_argv` names a small launcher
(tests/helpers/prefork_launch.py) that hands those to this server, passes signals on, and exits
as the forked program did; killed (SIGKILL), the server kills the program too. Where a fork
could differ from a real start, the launcher starts the real program itself: other interpreter
settings, another user or other namespaces (a wrapper such as ``setpriv`` or bubblewrap), or a
terminal (a forked program would not have it as its controlling terminal). What still differs,
and why tests about it use :func:`real_mcp_setup_argv` instead: the program's pid is not the
launcher's (a test that reads the pid, signals a process group, or looks at a server's parent),
and it has the fork server's modules imported (a test of what the program imports).

The server is started by the first :func:`mcp_setup_argv` of a worker and ends with the worker
(its standard input is the worker's pipe). Until it listens, and wherever it is not running,
the launcher starts the real program itself. ``MCP_SETUP_TEST_PREFORK=0`` turns it off.
"""

from __future__ import annotations

import array
import atexit
import gc
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.helpers.paths import REPO

__all__ = ["mcp_setup_argv", "real_mcp_setup_argv"]

#: Read when the tests load, before the isolation fixture clears every ``MCP_SETUP_*`` variable.
ENABLED = os.environ.get("MCP_SETUP_TEST_PREFORK", "1") != "0"
LAUNCH = Path(__file__).with_name("prefork_launch.py")
#: What a ``serve``, ``mcp`` or CLI command imports before it does anything: imported once here.
PRELOAD = (
    "app.cli.main",
    "app.cli.servers",
    "app.cli.clients",
    "app.cli.data_dir",
    "app.runtime",
    "app.settings",
    "app.web",
    "app.web.serve",
    "app.web.app",
    "app.mcp.face",
    "app.mcp.stdio",
    "uvicorn",
    "mcp.client.stdio",
    "mcp.server.stdio",
    "alembic.command",
    "alembic.config",
    "alembic.runtime.migration",
    "sqlalchemy.dialects.sqlite",
)


class ForkServer:
    """A fork server of this worker's (started at the first :meth:`argv`, stopped at exit)."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.socket_path = ""

    def argv(self, real: list[str]) -> list[str]:
        """``real`` (an ``mcp-setup`` argument list) through this fork server's launcher."""
        self.start()
        return [sys.executable, "-I", "-S", str(LAUNCH), self.socket_path, *real]

    def start(self) -> None:
        """The fork server, once (it listens once its imports are done)."""
        if self.process is not None:
            return
        self.socket_path = os.path.join(tempfile.mkdtemp(prefix="mcp-setup-prefork-"), "fork.sock")
        # Without PYTHONPATH the program imports the installed package: this checkout's, or another's.
        bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        found = subprocess.run(  # from "/": as the script, whose own folder comes first, not the tests'
            [sys.executable, "-c", "import app; print(app.__file__)"], env=bare, cwd="/", capture_output=True, text=True
        ).stdout.strip()
        bare_path_ok = Path(found).resolve().is_relative_to(REPO.resolve()) if found else False
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.prefork", self.socket_path, "1" if bare_path_ok else "0"],
            stdin=subprocess.PIPE,  # its end is the worker's end
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            start_new_session=True,
        )
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # as when the worker ends
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_WORKER = ForkServer()


def real_mcp_setup_argv(*args: str) -> list[str]:
    """``mcp-setup ARGS`` started as a person's shell starts it (its own interpreter)."""
    script = Path(sys.executable).parent / "mcp-setup"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "app.cli", *args]


def mcp_setup_argv(*args: str) -> list[str]:
    """``mcp-setup ARGS``, forked from this worker's fork server (the module doc), or started as
    :func:`real_mcp_setup_argv` where it is off."""
    real = real_mcp_setup_argv(*args)
    if not ENABLED or real[0] == sys.executable:
        return real
    return _WORKER.argv(real)


# The fork server itself (``python -m tests.helpers.prefork SOCKET``).


class _Running:
    """A forked program: its pid, the pidfd that says when it ended, the launcher's connection."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid = pid
        self.conn: socket.socket | None = conn
        self.pidfd = os.pidfd_open(pid)

    def hang_up(self, selector: selectors.BaseSelector) -> None:
        """The launcher's connection, closed (told, or gone)."""
        assert self.conn is not None
        selector.unregister(self.conn)
        self.conn.close()
        self.conn = None


#: Variables that set up the interpreter itself (warnings, dev mode, hash seed, ...): a request
#: whose differ from the server's is started the usual way. Handled in the child: these.
_OWN = ("PYTHONIOENCODING", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHON_KEYRING_BACKEND")


def _interpreter(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k not in _OWN}


def _same_interpreter(env: dict[str, str], bare_path_ok: bool) -> bool:
    """Whether a program started with ``env`` would import what this server imported, alike."""
    path = env.get("PYTHONPATH")
    same_path = path == str(REPO) or (path is None and bare_path_ok)
    return same_path and _interpreter(env) == _interpreter(dict(os.environ))


def serve(path: str, bare_path_ok: bool) -> None:
    for name in PRELOAD:
        __import__(name)
    if threading.active_count() != 1:  # a fork must not copy a thread's half-done work
        sys.exit(f"prefork: an import started a thread ({threading.enumerate()}); not serving")
    gc.freeze()  # the imported objects are never collected: their pages stay shared after each fork
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, ("parent", None))
    running: list[_Running] = []
    own = json.loads(json.dumps(_who()))  # as the launcher's comes: lists, not tuples
    while True:
        for key, _ in selector.select():
            what, one = key.data
            if what == "parent":  # the worker ended (its end of our stdin closed)
                os.unlink(path)
                os.rmdir(os.path.dirname(path))
                return
            if what == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                # With other interpreter settings, as another user, in other namespaces (a read-only
                # mount), or on a terminal (a forked one would not have it as its controlling
                # terminal: no hidden prompt, no Ctrl-C from it), the program is the real one.
                if (
                    not _same_interpreter(request["env"], bare_path_ok)
                    or request.get("who") != own
                    or any(os.isatty(fd) for fd in fds)
                ):
                    for fd in fds:
                        os.close(fd)
                    _send(conn, {"exec": True})  # the launcher starts the real program
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    closing = [listener, conn, *(r.conn for r in running if r.conn is not None)]
                    _child(request, fds, closing, [r.pidfd for r in running], selector)
                for fd in fds:
                    os.close(fd)
                one = _Running(pid, conn)
                running.append(one)
                selector.register(one.pidfd, selectors.EVENT_READ, ("ended", one))
                selector.register(conn, selectors.EVENT_READ, ("launcher", one))
                _send(conn, {"pid": pid})
            elif what == "ended":
                running.remove(one)
                selector.unregister(one.pidfd)
                _, status = os.waitpid(one.pid, 0)
                os.close(one.pidfd)
                if one.conn is not None:
                    ended = (
                        {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"code": os.WEXITSTATUS(status)}
                    )
                    _send(one.conn, ended)
                    one.hang_up(selector)
            elif what == "launcher" and one.conn is not None:  # the launcher is gone (killed): so is its program
                one.hang_up(selector)
                if one in running:
                    os.kill(one.pid, signal.SIGKILL)


def _who() -> list[Any]:
    """This process's user, groups and namespaces, as the launcher's ``who()`` gives its own."""
    from tests.helpers import prefork_launch

    return prefork_launch.who()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    conn.settimeout(10)
    data, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected the three standard streams")
    size = int.from_bytes(data[:4], "big")
    body = data[4:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise ValueError("the launcher closed mid-request")
        body += more
    conn.settimeout(None)
    return json.loads(body), list(fds)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the launcher is gone; its own EOF says so


def _child(
    request: dict[str, Any],
    fds: list[int],
    closing: list[socket.socket],
    pidfds: list[int],
    selector: selectors.BaseSelector,
) -> None:
    """In the forked process: become the program the launcher asked for, run it, exit as it did."""
    try:
        selector.close()
        for sock in closing:
            sock.close()
        for fd in pidfds:
            os.close(fd)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(sys.argv[0])
        sys.dont_write_bytecode = bool(request["env"].get("PYTHONDONTWRITEBYTECODE"))
        _std_streams(request["env"])
    except BaseException:  # noqa: BLE001 - nothing of the server's may run on in the child
        os._exit(70)
    os._exit(_run())


def _std_streams(env: dict[str, str]) -> None:
    """``sys.stdin``/``stdout``/``stderr`` as an interpreter started with these streams and this
    environment makes them (buffering by terminal or not, ``PYTHONUNBUFFERED``, ``PYTHONIOENCODING``)."""
    import io

    encoding, _, errors = (env.get("PYTHONIOENCODING") or "").partition(":")
    encoding = encoding or "utf-8"
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))

    def stream(fd: int, write: bool, errors_default: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "wb" if write else "rb", closefd=False)
        buffered: Any = raw if write and unbuffered else (io.BufferedWriter(raw) if write else io.BufferedReader(raw))
        return io.TextIOWrapper(
            buffered,
            encoding=encoding,
            errors=errors or errors_default,
            line_buffering=write and (fd == 2 or os.isatty(fd)),
            write_through=write and unbuffered,
        )

    sys.stdin = sys.__stdin__ = stream(0, False, "strict")
    sys.stdout = sys.__stdout__ = stream(1, True, "strict")
    sys.stderr = sys.__stderr__ = stream(2, True, "backslashreplace")


def _run() -> int:
    """``mcp-setup``'s entry point, then what the interpreter does on its way out."""
    import atexit as at_exit
    import traceback

    signal.signal(signal.SIGINT, signal.default_int_handler)
    code: Any = 0
    try:
        from app.cli.main import main

        code = main()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - as the interpreter: the traceback, exit 1
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter waits for its non-daemon threads
    at_exit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    _flush()
    return code & 0xFF


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2] == "1")
