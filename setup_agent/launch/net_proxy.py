"""The proxy a sandboxed server reaches the network through: HTTP CONNECT and plain HTTP.

A server in its own network namespace (:mod:`setup_agent.launch.netns`) has only its own
loopback; the standard proxy variables (:func:`~setup_agent.launch.netns_bootstrap.proxy_environment`)
point its HTTP clients at ``127.0.0.1:<port>`` there, a socket that mcp-setup holds and serves
here. For each request the proxy:

1. reads the request head (bounded in size and time): ``CONNECT host:port`` (a tunnel, for
   HTTPS and anything else) or an absolute-form ``GET http://host[:port]/path`` (forwarded with
   the ``Proxy-*`` headers removed and ``Connection: close``);
2. asks the server's :class:`~setup_agent.launch.net_policy.NetPolicy`, resolving the name
   itself (DNS happens here, never inside the namespace) only when the policy needs the
   addresses;
3. records the destination and the verdict in the server's
   :class:`~setup_agent.launch.net_record.NetRecord`;
4. refuses with ``403`` and a body that names the destination and why, or connects to an
   address the policy checked (never resolving again: no DNS-rebinding window) and relays bytes
   until both sides are done or the connection has been idle too long.

A granted loopback ``host:port`` (a developer's database) is also offered as a plain TCP
forward (:meth:`NetProxy.forward`): the server connects to ``127.0.0.1:<port>`` in its namespace as
it would on the host, in any protocol, and each connection is checked against the policy again.

One :class:`NetProxy` serves every sandboxed server; each server has its own listening socket
(:class:`ProxyListener`), and the socket a connection arrived on says whose policy and record
apply. Sharing one proxy keeps one resolver, one bound on open connections across all servers
and one place to close at shutdown; a listener per server means no connection ever has to say
who it is, and stopping a server closes exactly its listener and its connections.

The resolver and the connector are seams (:class:`Resolver`, :class:`Connector`): tests map
public-looking names to loopback test servers there, so no test sends a packet off the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from setup_agent.errors import InvalidInput

from .net_policy import REASONS, Endpoint, IPAddress, NetPolicy, Verdict
from .net_record import Attempt, NetRecord

__all__ = [
    "Connector",
    "DirectConnector",
    "NetProxy",
    "ProxyLimits",
    "ProxyListener",
    "Resolver",
    "SystemResolver",
]

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024
#: Seconds an answered-and-refused connection is drained before it is closed.
_LINGER = 1.0
_HOP_BY_HOP = (b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade")


class Resolver(Protocol):
    """Names to addresses, for the proxy only (the server never resolves)."""

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]: ...


class Connector(Protocol):
    """A TCP connection to an address the policy checked."""

    async def connect(self, address: IPAddress, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]: ...


class SystemResolver:
    """The host's resolver (``getaddrinfo``: ``/etc/hosts``, then DNS), on threads of its own:
    a server asking for slow names cannot hold the event loop's default executor, which the
    rest of mcp-setup uses."""

    def __init__(self, threads: int = 8) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="net-proxy-dns")

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        infos = await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        )
        out: list[IPAddress] = []
        for family, *_, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                out.append(ipaddress.ip_address(str(sockaddr[0]).partition("%")[0]))
        return out


class DirectConnector:
    """A plain TCP connection from this host (an address literal: no lookup)."""

    async def connect(self, address: IPAddress, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(str(address), port)


@dataclass(frozen=True)
class ProxyLimits:
    """Bounds on what one server (and all of them) can make the proxy hold."""

    #: Connections open at once through one server's listener; more are answered ``503``.
    connections: int = 64
    #: Connections open at once through the whole proxy.
    total_connections: int = 512
    #: The request head (request line and headers); larger is answered ``431``.
    header_bytes: int = 16 * 1024
    #: Seconds to send the request head; slower is answered ``408``.
    header_timeout: float = 10.0
    #: Seconds to resolve a name and to connect to one of its addresses (each).
    connect_timeout: float = 10.0
    #: Names one server may have being resolved at once (the resolver's threads are shared).
    lookups: int = 2
    #: Seconds a relay may carry nothing either way before it is closed (a long poll, an SSE
    #: stream and a websocket all send something within this).
    idle_timeout: float = 600.0


class _Refusal(Exception):
    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason


_STATUS = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class _Served:
    """One listener's state: whose policy and record, and the connections it has open."""

    policy: Callable[[], NetPolicy]
    record: NetRecord
    #: This server's share of the resolver (``ProxyLimits.lookups`` at once).
    lookups: asyncio.Semaphore
    #: A fixed destination (a TCP forward) instead of HTTP proxying.
    forward_to: Endpoint | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    #: Connections admitted and not yet closed (``tasks`` also holds refusals being answered).
    open: int = 0


class ProxyListener:
    """One server's listening socket in the proxy; closing it closes its connections too."""

    def __init__(
        self, server: asyncio.Server, served: _Served, forget: Callable[[ProxyListener], None] | None = None
    ) -> None:
        self._server, self._served, self._forget = server, served, forget

    @property
    def record(self) -> NetRecord:
        return self._served.record

    @property
    def port(self) -> int:
        """The port it listens on (in the server's namespace, or on the host's loopback)."""
        sockets = self._server.sockets
        return int(sockets[0].getsockname()[1]) if sockets else 0

    @property
    def open_connections(self) -> int:
        """Connections it carries now (not counting refusals being answered)."""
        return self._served.open

    def close(self) -> None:
        """Stop accepting and end every connection it carries."""
        self._server.close()
        if self._forget is not None:
            self._forget(self)
        for task in list(self._served.tasks):
            task.cancel()

    async def wait_closed(self) -> None:
        tasks = list(self._served.tasks)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def aclose(self) -> None:
        self.close()
        await self.wait_closed()

    async def __aenter__(self) -> ProxyListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


PolicySource = NetPolicy | Callable[[], NetPolicy]


class NetProxy:
    """HTTP CONNECT and plain-HTTP proxy for sandboxed servers (module docstring)."""

    def __init__(
        self,
        resolver: Resolver | None = None,
        connector: Connector | None = None,
        limits: ProxyLimits | None = None,
    ) -> None:
        self._resolver = resolver if resolver is not None else SystemResolver()
        self._connector = connector if connector is not None else DirectConnector()
        self._limits = limits if limits is not None else ProxyLimits()
        self._listeners: set[ProxyListener] = set()
        self._open = 0

    @property
    def limits(self) -> ProxyLimits:
        return self._limits

    @property
    def listeners(self) -> int:
        """Listeners open now (one per running server, plus its forwards)."""
        return len(self._listeners)

    async def serve(self, sock: socket.socket, policy: PolicySource, record: NetRecord) -> ProxyListener:
        """Proxy the connections that arrive on ``sock`` (a listening TCP socket, e.g. the one a
        server's namespace handed out) under ``policy`` (or a callable giving the current one, so
        the person's "allow it" applies to the next connection), recorded in ``record``."""
        return await self._listen(sock, _Served(_source(policy), record, self._lookups()))

    async def forward(
        self, sock: socket.socket, destination: Endpoint, policy: PolicySource, record: NetRecord
    ) -> ProxyListener:
        """Relay each connection on ``sock`` to ``destination`` (a granted loopback service),
        checked against the policy on every connection."""
        return await self._listen(sock, _Served(_source(policy), record, self._lookups(), destination))

    async def aclose(self) -> None:
        """Close every listener and every connection."""
        listeners = list(self._listeners)
        for listener in listeners:
            listener.close()
        for listener in listeners:
            await listener.wait_closed()

    def _lookups(self) -> asyncio.Semaphore:
        return asyncio.Semaphore(self._limits.lookups)

    async def _listen(self, sock: socket.socket, served: _Served) -> ProxyListener:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(asyncio.CancelledError):  # closed by us: the task ends quietly
                await self._connection(served, reader, writer)

        server = await asyncio.start_server(handle, sock=sock, limit=self._limits.header_bytes)
        listener = ProxyListener(server, served, self._listeners.discard)
        self._listeners.add(listener)
        return listener

    # --- one connection ------------------------------------------------------------------

    async def _connection(self, served: _Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        served.tasks.add(task)
        limits = self._limits
        admitted = served.open < limits.connections and self._open < limits.total_connections
        if admitted:
            served.open += 1
            self._open += 1
        elif len(served.tasks) > 2 * limits.connections:  # a flood: not even an answer
            served.tasks.discard(task)
            writer.transport.abort()
            return
        try:
            if not admitted:
                await _reply(reader, writer, 503, "mcp-setup's proxy: too many connections from this server at once.")
            elif served.forward_to is not None:
                await self._forward_one(served, served.forward_to, reader, writer)
            else:
                await self._proxy_one(served, reader, writer)
        except _Refusal as refusal:
            await _reply(reader, writer, refusal.status, refusal.message, refusal.reason)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:  # a bug of ours ends this connection, never the proxy
            logger.exception("net proxy: a connection failed")
        finally:
            if admitted:
                served.open -= 1
                self._open -= 1
            served.tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _proxy_one(self, served: _Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self._limits.header_timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise _Refusal(431, f"The request head is larger than {self._limits.header_bytes} bytes.") from None
        except TimeoutError:
            raise _Refusal(408, "The request head did not arrive in time.") from None
        method, target, version, headers = _parse_head(head)
        if method == b"CONNECT":
            host, port = _authority(target)
        else:
            host, port, path = _absolute(target)
        attempt, verdict, shown = await self._decide(served, host, port)
        up_reader, up_writer = await self._connect(served, attempt, verdict, shown, port)
        try:
            if method == b"CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                up_writer.write(_forwarded_head(method, path, version, headers, host, port))
            await self._relay(reader, writer, up_reader, up_writer, plain_http=method != b"CONNECT")
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _forward_one(
        self, served: _Served, to: Endpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            attempt, verdict, shown = await self._decide(served, to.host, to.port)
            up_reader, up_writer = await self._connect(served, attempt, verdict, shown, to.port)
        except _Refusal:
            return  # raw TCP: no words to send; the record has it
        try:
            await self._relay(reader, writer, up_reader, up_writer, plain_http=False)
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _decide(self, served: _Served, host: str, port: int) -> tuple[Attempt | None, Verdict, str]:
        policy = served.policy()
        try:
            shown = str(Endpoint.of(host, port))
        except InvalidInput:
            shown = f"{host}:{port}"[:200]
        step = policy.check(host, port)
        if not isinstance(step, Verdict):
            try:
                async with asyncio.timeout(self._limits.connect_timeout), served.lookups:
                    addresses = await self._resolver.resolve(step.endpoint.host, step.endpoint.port)
            except (OSError, TimeoutError, UnicodeError):
                addresses = ()
            step = policy.after_lookup(step, addresses)
        attempt = served.record.note(shown, step)
        if not step.allowed:
            logger.info("net proxy: refused %s (%s)", shown, step.reason)
            if step.reason == "unresolved":
                raise _Refusal(502, f"mcp-setup's proxy could not resolve {shown}.", step.reason)
            raise _Refusal(
                403,
                f"mcp-setup refused a connection to {shown}: {REASONS.get(step.reason, step.reason)}. "
                "If this server needs it, allow it in mcp-setup.",
                step.reason,
            )
        return attempt, step, shown

    async def _connect(
        self, served: _Served, attempt: Attempt | None, verdict: Verdict, shown: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        errors: list[str] = []
        for address in verdict.addresses[:8]:
            try:
                async with asyncio.timeout(self._limits.connect_timeout):
                    upstream = await self._connector.connect(address, port)
            except TimeoutError:
                errors.append(f"{address}: no answer in {self._limits.connect_timeout:g} s")
            except OSError as exc:
                # asyncio says "Connect call failed (…)" with the errno beside it: the errno's words
                why = os.strerror(exc.errno) if exc.errno else exc.strerror or type(exc).__name__
                errors.append(f"{address}: {why}")
            else:
                served.record.outcome(attempt, True)
                return upstream
        error = "; ".join(errors) or "no address"
        served.record.outcome(attempt, False, error)
        status = 504 if errors and all("no answer" in e for e in errors) else 502
        raise _Refusal(status, f"mcp-setup's proxy could not reach {shown}: {error}.")

    async def _relay(
        self,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        *,
        plain_http: bool,
    ) -> None:
        """Bytes both ways until both sides are done (a forwarded HTTP request: until the upstream
        is done, as it closes after one response), or nothing moved for ``idle_timeout``."""
        loop = asyncio.get_running_loop()
        last = [loop.time()]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(_CHUNK):
                    last[0] = loop.time()
                    dst.write(data)
                    await dst.drain()
                if dst.can_write_eof():
                    dst.write_eof()

        outbound = asyncio.ensure_future(pump(client_reader, up_writer))
        inbound = asyncio.ensure_future(pump(up_reader, client_writer))
        pending: set[asyncio.Future[None]] = {outbound, inbound}
        try:
            while pending and not (plain_http and inbound.done()):
                left = last[0] + self._limits.idle_timeout - loop.time()
                if left <= 0:
                    break
                _, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump_task in (outbound, inbound):
                pump_task.cancel()
            await asyncio.gather(outbound, inbound, return_exceptions=True)


def _source(policy: PolicySource) -> Callable[[], NetPolicy]:
    if isinstance(policy, NetPolicy):
        return lambda: policy
    return policy


def _parse_head(head: bytes) -> tuple[bytes, bytes, bytes, list[bytes]]:
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith(b"HTTP/1."):
        raise _Refusal(400, "mcp-setup's proxy reads HTTP/1.x requests: CONNECT host:port, or GET http://host/path.")
    headers = [line for line in lines[1:] if line]
    if any(b":" not in line or line[:1] in (b" ", b"\t") for line in headers):
        raise _Refusal(400, "A request header is malformed.")
    return parts[0].upper(), parts[1], parts[2], headers


def _authority(target: bytes) -> tuple[str, int]:
    text = target.decode("ascii", "replace")
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise _Refusal(400, f"CONNECT needs host:port, not {text[:200]!r}.")
    return host, int(port)


def _absolute(target: bytes) -> tuple[str, int, bytes]:
    text = target.decode("ascii", "replace")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise _Refusal(400, f"{text[:200]!r} is not a URL.") from None
    if parts.scheme != "http" or not parts.hostname:
        if parts.scheme == "https":
            raise _Refusal(400, "For https, send CONNECT host:443 and speak TLS through the tunnel.")
        raise _Refusal(400, "mcp-setup's proxy forwards absolute http:// URLs; use CONNECT for anything else.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port or 80, path.encode("ascii", "replace")


def _forwarded_head(method: bytes, path: bytes, version: bytes, headers: list[bytes], host: str, port: int) -> bytes:
    """The request as the origin expects it: origin-form, no ``Proxy-*`` or hop-by-hop headers,
    ``Connection: close`` (one request per upstream connection, so the next one is checked)."""
    kept = []
    has_host = False
    for line in headers:
        name = line.partition(b":")[0].strip().lower()
        if name.startswith(b"proxy-") or name in _HOP_BY_HOP:
            continue
        has_host = has_host or name == b"host"
        kept.append(line)
    if not has_host:
        shown = f"[{host}]" if ":" in host else host
        kept.insert(0, b"Host: " + (shown if port == 80 else f"{shown}:{port}").encode("ascii", "replace"))
    return b"\r\n".join([b" ".join((method, path, version)), *kept, b"Connection: close", b"", b""])


async def _reply(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int, message: str, reason: str = ""
) -> None:
    """Answer and close gently: what the client still sends is read (briefly) and dropped, since
    closing on unread data resets the connection and the client may lose the answer."""
    body = (message + "\n").encode()
    head = [
        f"HTTP/1.1 {status} {_STATUS.get(status, 'Error')}",
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if reason:
        head.append(f"X-MCP-Setup-Refused: {reason}")
    with contextlib.suppress(ConnectionError, OSError, TimeoutError):
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(_LINGER):
            while await reader.read(_CHUNK):
                pass
