"""Runs first inside a sandboxed server's own network namespace, then becomes the server.

    python -I -S netns_bootstrap.py FD HOST_NETNS PORTS COMMAND [ARGS...]

Standard library only, Python 3.8 or later (it may run on the system's ``python3``, not mcp-setup's),
so it runs as a script with no ``site`` (``-I -S``), like ``landlock.py``;
it imports only ``_socket`` and ``posix`` (already loaded), not ``socket``, ``os`` or ``__future__``,
whose imports would double its time on every server's start. It:

1. checks that it is not in the host's network namespace (``HOST_NETNS``: the inode of
   mcp-setup's ``/proc/self/ns/net``), and stops with exit code 126 if it is: a server must never
   believe it is behind the proxy while it shares the host's network;
2. binds a listening TCP socket for each of ``PORTS`` (comma-separated): the first is the proxy's,
   on ``127.0.0.1`` (``0``: a free port the kernel picks); the others are granted loopback
   services, bound at the same number on ``127.0.0.1`` and, where the namespace has IPv6, ``::1``,
   so the server reaches them as it would on the host;
3. sends the listening sockets to mcp-setup over ``FD`` (an inherited end of a socketpair) in one
   ``SCM_RIGHTS`` message, whose text says ``family:port`` for each, in order;
4. closes its copies and ``FD``, sets the proxy variables (:func:`proxy_environment`) to the
   proxy's port and ``exec``s COMMAND (an absolute path).

Nothing of it stays running: mcp-setup ``accept()``s on the sockets, so a connection the server
makes to ``127.0.0.1:<port>`` in its namespace arrives in mcp-setup's proxy on the host.
"""

import _socket
import posix
import sys

__all__ = ["NO_PROXY", "main", "proxy_environment"]

#: Never through the proxy: the server's own namespace (its own helpers, the granted forwards).
NO_PROXY = "localhost,127.0.0.1,::1"


def proxy_environment(port: int, host: str = "127.0.0.1") -> dict:
    """The variables that send a server's HTTP clients through the proxy at ``host:port``: both
    spellings of the standard ones (curl, Python's urllib/requests/httpx, pip, uv, Go, Rust, Deno,
    Bun), ``NODE_USE_ENV_PROXY`` (Node's built-in ``fetch`` and ``http`` honour them only with
    it, from Node 24 and 22.21), npm's and yarn's own."""
    url = f"http://{host}:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = NO_PROXY
    env["NODE_USE_ENV_PROXY"] = "1"
    env["npm_config_proxy"] = env["npm_config_https_proxy"] = url
    env["npm_config_noproxy"] = NO_PROXY
    env["YARN_HTTP_PROXY"] = env["YARN_HTTPS_PROXY"] = url
    return env


def _fail(message: str) -> int:
    sys.stderr.write(f"mcp-setup sandbox: {message}\n")
    return 126


def _listen(family: int, host: str, port: int) -> _socket.socket:
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def main(argv: list) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: netns_bootstrap.py FD HOST_NETNS PORTS COMMAND [ARGS...]\n")
        return 2
    fd, host_netns, ports_text, command = int(argv[0]), int(argv[1]), argv[2], argv[3:]
    try:
        own = posix.stat("/proc/self/ns/net").st_ino
    except OSError as exc:
        return _fail(f"cannot tell which network namespace this is ({exc.strerror})")
    if own == host_netns:
        return _fail("not in a network namespace of its own: refusing to start the server")
    ports = [int(p) for p in ports_text.split(",") if p]
    if not ports:
        return _fail("no proxy port")
    channel = _socket.socket(fileno=fd)
    listening: list[_socket.socket] = []
    try:
        for port in ports[1:]:  # first: the kernel's pick for the proxy cannot take their ports
            listening.append(_listen(_socket.AF_INET, "127.0.0.1", port))
            try:
                listening.append(_listen(_socket.AF_INET6, "::1", port))
            except OSError:
                pass  # no IPv6 in this namespace: 127.0.0.1 only
        listening.insert(0, _listen(_socket.AF_INET, "127.0.0.1", ports[0]))
        names = {_socket.AF_INET: "AF_INET", _socket.AF_INET6: "AF_INET6"}
        text = " ".join(f"{names[s.family]}:{s.getsockname()[1]}" for s in listening)
        fds = b"".join(s.fileno().to_bytes(4, sys.byteorder, signed=True) for s in listening)
        channel.sendmsg([text.encode()], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    except OSError as exc:
        return _fail(f"could not set up the proxy's sockets ({exc})")
    finally:
        for sock in listening:
            sock.close()
        channel.close()
    env = dict(posix.environ)  # bytes to bytes, as the kernel gave it
    proxy_port = int(text.split()[0].rpartition(":")[2])
    env.update({k.encode(): v.encode() for k, v in proxy_environment(proxy_port).items()})
    try:
        posix.execve(command[0], command, env)
    except OSError as exc:
        sys.stderr.write(f"mcp-setup sandbox: cannot start {command[0]}: {exc.strerror}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
