"""Landlock, through a small ctypes layer of ours, and the launcher that applies it.

Why our own: the Landlock interface is three system calls and four structs; the Python bindings
on PyPI (``landlock``, ``pylandlock``) are young single-maintainer packages that lag the kernel's
ABI (no signal scoping, no TCP rules in some) and would add a dependency to the core for ~100
lines. This file imports only the standard library, so it runs as a script: the sandbox starts a
server as ``python -I -S landlock.py RULES COMMAND ARGS...`` (:meth:`Sandbox.wrap`), which applies
the ruleset to itself (inherited by every child, never lifted) and ``exec``s the command.

``RULES`` (JSON, paths only, never a value): ``read`` (read and execute below each path),
``write`` (read, write, create, remove below each path), ``deny`` (paths inside a ``read`` or
``write`` path left out: Landlock only allows, so their parent is allowed child by child), ``network``
(false: TCP bind and connect refused, ABI 4), ``connect_ports`` (TCP connect allowed to these ports
only: mcp-setup's proxy, see :func:`network_rules`) and ``bind_ports`` (TCP bind allowed to these
ports only; absent: bind is not restricted). A rule the kernel cannot enforce stops the launch.

Landlock also refuses ptrace of a process outside the domain (so ``/proc/<pid>/mem`` and
``environ`` of mcp-setup), and with ABI 6 signals to it and its abstract unix sockets.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

__all__ = ["NET_ABI", "abi_version", "apply", "main", "network_rules"]

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # the same on x86-64 and arm64
_CREATE_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
#: The first ABI with TCP rules (Linux 6.7).
NET_ABI = 4
_PR_SET_NO_NEW_PRIVS, _PR_SET_PDEATHSIG = 38, 1

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR, _MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
_MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND, _NET_CONNECT = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def network_rules(connect_ports: list[int], bind_ports: list[int] | None = None) -> dict:
    """The ``RULES`` keys that hold a server to TCP connections to ``connect_ports`` (the port of
    mcp-setup's proxy on the host's loopback) and, when given, TCP binds to ``bind_ports``. Merge
    them into the filesystem rules; needs ABI 4 (:data:`NET_ABI`).

    Landlock rules name a port, not an address: the server may also connect to that port on
    another address, and UDP (so DNS) is not covered; the sandbox's words say so."""
    rules: dict = {"connect_ports": sorted({int(p) for p in connect_ports})}
    if bind_ports is not None:
        rules["bind_ports"] = sorted({int(p) for p in bind_ports})
    return rules


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none, not Linux, or refused)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        found = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(found))


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def _expand(path: str, denied: list[str]) -> list[str]:
    """``path``, or its children (recursively) when a denied path lies inside it."""
    inside = [d for d in denied if d == path or d.startswith(path.rstrip("/") + "/")]
    if not inside:
        return [path]
    if path in inside or not os.path.isdir(path) or os.path.islink(path):
        return []
    out: list[str] = []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    for name in names:
        out += _expand(os.path.join(path, name), inside)
    return out


def apply(rules: dict) -> int:
    """Restrict this process (and what it starts) to ``rules``; returns the ABI used."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available")
    libc = _libc()
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    ports = {kind: rules.get(f"{kind}_ports") for kind in ("connect", "bind")}
    limited = {kind: list(found) for kind, found in ports.items() if found is not None}
    if limited and abi < NET_ABI:
        raise OSError(f"Landlock ABI {abi} has no TCP rules (ABI {NET_ABI}, Linux 6.7, is needed)")
    if abi >= NET_ABI and not rules.get("network", True):
        attr.handled_access_net = _NET_BIND | _NET_CONNECT
        limited = {}  # no network: no port is allowed
    elif limited:
        attr.handled_access_net = (_NET_CONNECT if "connect" in limited else 0) | (
            _NET_BIND if "bind" in limited else 0
        )
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    read = _EXECUTE | _READ_FILE | _READ_DIR
    denied = [os.path.realpath(p) for p in rules.get("deny", [])]
    try:
        for kind, rights in (("read", read), ("write", handled)):
            for top in rules.get(kind, []):
                for path in _expand(os.path.realpath(top), denied):
                    _add_rule(libc, fd, path, rights, handled)
        for kind, right in (("connect", _NET_CONNECT), ("bind", _NET_BIND)):
            for port in limited.get(kind, ()):
                _add_port_rule(libc, fd, int(port), right)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT, fd, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(fd)
    return abi


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, handled: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or not ours to see: nothing to allow
    try:
        if not os.path.isdir(path):  # a file takes only file rights
            rights &= _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
        beneath = _PathBeneath(rights & handled, target)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(target)


def _add_port_rule(libc: ctypes.CDLL, ruleset: int, port: int, right: int) -> None:
    if not 0 <= port <= 65535:
        raise OSError(f"{port} is not a TCP port")
    rule = _NetPort(right, port)
    if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for TCP port {port}")


def main(argv: list[str]) -> int:
    """``landlock.py RULES COMMAND ARGS...``: restrict, then become COMMAND."""
    if len(argv) < 2:
        sys.stderr.write("usage: landlock.py RULES COMMAND [ARGS...]\n")
        return 2
    rules = json.loads(argv[0])
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies with the mcp-setup that started it
    try:
        apply(rules)
    except OSError as exc:
        sys.stderr.write(f"mcp-setup sandbox: {exc}\n")
        return 126
    os.execve(argv[1], argv[1:], dict(os.environ))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
