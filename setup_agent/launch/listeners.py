"""Who listens on a TCP port: a local package that serves HTTP is reached only on its own socket.

A package such as ``npx some-server`` with the URL ``http://localhost:3000/mcp`` is started
and then connected to on its port. Whatever else already listens there (another program on
:3000) would answer first and get the entry's headers and values, and its tools would be
recorded as the package's. So:

- **before the spawn**, :func:`port_taken` says whether something already answers on (or
  listens at) the URL's port: the launch is refused, nothing is started;
- **after the spawn**, :func:`classify` reads the listening sockets of the port from
  ``/proc/net/tcp{,6}`` (those that serve the URL's host: its own address, or a wildcard)
  and the socket fds of the child's process tree (its descendants, and everything in the
  session it leads): the listener is accepted only when every such socket is held by the
  tree. A socket held by any other process is *foreign*: the child is stopped, nothing is
  sent.

Linux only: without ``/proc`` :func:`classify` answers None and the caller falls back to
"the port accepts" (the check before the spawn still applies).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import anyio

from setup_agent.errors import PortInUse

__all__ = [
    "ENGINE_RUNNERS",
    "Listeners",
    "classify",
    "foreign_holders",
    "host_addresses",
    "own_listener_up",
    "port_taken",
    "refuse_taken_port",
    "refusal",
    "tree_pids",
]

_LISTEN = "0A"
_PROC = Path("/proc")


def host_addresses(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a client connecting to ``host`` may reach (``localhost`` → 127.0.0.1 and ::1)."""
    out: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    try:
        out.add(ipaddress.ip_address(host.strip("[]")))
        return out
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return out
    for info in infos:
        try:
            out.add(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
        except ValueError:
            continue
    return out


def _parse_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A ``/proc/net/tcp`` address: 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.IPv4Address(words) if len(words) == 4 else ipaddress.IPv6Address(words)


def _serves(local: ipaddress.IPv4Address | ipaddress.IPv6Address, wanted: set) -> bool:
    if local.is_unspecified or local in wanted:
        return True
    mapped = getattr(local, "ipv4_mapped", None)
    return mapped is not None and (mapped in wanted or mapped.is_unspecified)


def listening_inodes(port: int, host: str, *, proc: Path = _PROC) -> set[int] | None:
    """Inodes of the sockets listening on ``port`` that a client of ``host`` may reach; None without /proc."""
    wanted = host_addresses(host)
    found: set[int] = set()
    readable = False
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, hex_port = fields[1].partition(":")
            try:
                if int(hex_port, 16) != port:
                    continue
                local = _parse_address(address)
            except ValueError:
                continue
            if not wanted or _serves(local, wanted):
                found.add(int(fields[9]))
    return found if readable else None


def _stat(pid: int, proc: Path) -> tuple[int, int] | None:
    """(parent pid, session) of a live ``pid``."""
    try:
        text = (proc / str(pid) / "stat").read_text()
        fields = text.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[3])


def _pids(proc: Path) -> list[int]:
    try:
        return [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []


def tree_pids(root: int, *, proc: Path = _PROC) -> set[int]:
    """``root``, its descendants, and every process of the session ``root`` leads."""
    parents: dict[int, int] = {}
    tree = {root}
    for pid in _pids(proc):
        info = _stat(pid, proc)
        if info is None:
            continue
        parents[pid] = info[0]
        if info[1] == root:
            tree.add(pid)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def socket_inodes(pid: int, *, proc: Path = _PROC) -> set[int]:
    """Inodes of the sockets ``pid`` holds (empty when its fds cannot be read)."""
    out: set[int] = set()
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            out.add(int(target[8:-1]))
    return out


@dataclass(frozen=True)
class Listeners:
    """The listening sockets of a port, split by who holds them."""

    ours: frozenset[int]
    foreign: frozenset[int]


def classify(root: int, host: str, port: int, *, proc: Path = _PROC) -> Listeners | None:
    """Listeners of ``host:port`` held by ``root``'s process tree, and the others; None without /proc."""
    inodes = listening_inodes(port, host, proc=proc)
    if inodes is None:
        return None
    if not inodes:
        return Listeners(frozenset(), frozenset())
    held: set[int] = set()
    for pid in tree_pids(root, proc=proc):
        held |= socket_inodes(pid, proc=proc)
    return Listeners(frozenset(inodes & held), frozenset(inodes - held))


def foreign_holders(inodes: frozenset[int] | set[int], *, proc: Path = _PROC) -> list[str]:
    """``"<name> (pid N)"`` for each readable process holding one of ``inodes``: for the message."""
    out: list[str] = []
    for pid in _pids(proc):
        if socket_inodes(pid, proc=proc) & set(inodes):
            try:
                name = (proc / str(pid) / "comm").read_text().strip()
            except OSError:
                name = "a program"
            out.append(f"{name} (pid {pid})")
    return out[:3]


async def port_taken(host: str, port: int, *, timeout: float = 2.0) -> bool:
    """True when something already listens at ``host:port`` (asked before we start anything)."""
    inodes = listening_inodes(port, host)
    if inodes:
        return True
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_tcp(host, port)
    except (OSError, TimeoutError):
        return False
    await stream.aclose()
    return True


#: Runners whose listener is held by the container engine's port proxy, outside the child's
#: tree: for them only the check before the spawn applies.
ENGINE_RUNNERS = frozenset({"docker", "podman"})


def refusal(host: str, port: int, holders: list[str] | None = None, *, started: bool) -> PortInUse:
    who = f" ({', '.join(holders)})" if holders else ""
    if started:
        msg = (
            f"Port {port} on {host} answered, but not from the package's own processes: another program"
            f"{who} listens there. The package was stopped and nothing was sent to that program; free the "
            "port or give the package another one."
        )
    else:
        msg = (
            f"Port {port} on {host} is in use by another program{who}, so the package was not started (its "
            "connection would reach that program instead). Free the port or give the package another one."
        )
    return PortInUse(msg, details={"port": port, "host": host})


async def refuse_taken_port(host: str, port: int) -> None:
    """Raise :class:`PortInUse` when ``host:port`` already answers, before anything is started."""
    if await port_taken(host, port):
        raise refusal(host, port, foreign_holders(listening_inodes(port, host) or set()), started=False)


async def own_listener_up(root: int, host: str, port: int, command: str) -> bool:
    """True once the child tree of ``root`` listens on ``host:port`` (and nobody else does).

    Raises :class:`PortInUse` when a listener of the port is held by another process: the
    caller stops the child. Without ``/proc`` (or for a container engine) any listener that
    accepts counts.
    """
    found = None if Path(command).name in ENGINE_RUNNERS else classify(root, host, port)
    if found is not None:
        if found.foreign:
            raise refusal(host, port, foreign_holders(found.foreign), started=True)
        if not found.ours:
            return False
    try:
        stream = await anyio.connect_tcp(host, port)
    except OSError:
        return False
    await stream.aclose()
    return True
