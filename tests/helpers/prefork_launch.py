"""What a test runs as ``mcp-setup`` when the fork server is up (tests/helpers/prefork.py): it
hands its argument list, environment, working directory and standard streams to the fork server,
which forks an ``mcp-setup`` that has already imported its modules, and then stands for that
process: signals it gets are passed on, and it exits as that process exited (code or signal).

Started as ``python -I -S prefork_launch.py SOCKET REAL_SCRIPT ARG...`` (stdlib only, no site:
a few milliseconds). With no fork server listening at SOCKET it becomes the real program
(``exec`` of REAL_SCRIPT), so a test never depends on the fork server being there.
"""

import array
import json
import os
import signal
import socket
import sys

#: The signals passed on to the forked process (a test's terminate, interrupt, hang-up …).
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def who() -> list:
    """What a process started here would run as and see: its user and groups, and its namespaces
    (a test may start it in a mount namespace of its own, or as another user)."""
    spaces = []
    for name in ("mnt", "net", "user", "pid", "uts", "ipc", "cgroup"):
        try:
            spaces.append(os.stat("/proc/self/ns/" + name).st_ino)
        except OSError:
            spaces.append(None)
    return [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups()), spaces]


def main() -> None:
    path, real, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:  # no fork server (yet, or any more): the real program, started the usual way
        conn.close()
        os.execv(real, [real, *args])
    child = [0]
    pending = []

    def pass_on(signum, frame):
        if child[0]:
            os.kill(child[0], signum)
        else:
            pending.append(signum)

    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    request = {
        "argv": [real, *args],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": os.umask(0o022),
        "who": who(),
    }
    os.umask(request["umask"])
    body = json.dumps(request).encode()
    fds = array.array("i", [0, 1, 2])
    conn.sendmsg([len(body).to_bytes(4, "big"), body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    reader = conn.makefile("rb")
    started = reader.readline()
    if not started:
        sys.exit("mcp-setup (test fork server): the fork server closed before it started the program")
    answer = json.loads(started)
    if answer.get("exec"):  # not a program the fork server can stand for (its interpreter differs)
        conn.close()
        os.execv(real, [real, *args])
    child[0] = answer["pid"]
    # The streams are the forked program's now: this process's copies would keep a pipe open
    # after the program ended (a reader would wait for an end that comes only when this exits).
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for signum in pending:
        os.kill(child[0], signum)
    ended = reader.readline()
    if not ended:
        os._exit(1)
    status = json.loads(ended)
    if "signal" in status:  # end as it ended: the same signal, with its default action
        if status["signal"] != signal.SIGKILL:  # (whose action cannot be set, and is to end)
            signal.signal(status["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), status["signal"])
        os._exit(128 + status["signal"])  # a signal whose default is to go on
    os._exit(status.get("code", 1))


if __name__ == "__main__":
    main()
