"""mcp-setup's proxy for sandboxed servers, over loopback sockets only.

Public-looking names resolve (through a test resolver) to public-looking addresses, and the
test connector maps those addresses to origin servers on loopback: the proxy's own code path runs
whole, and no packet leaves the machine. The sandbox and its namespace are tests/setup_agent/launch/test_netns.py.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from setup_agent.launch.net_policy import Endpoint, NetPolicy
from setup_agent.launch.net_proxy import NetProxy, ProxyLimits, ProxyListener
from setup_agent.launch.net_record import Attempt, NetRecord
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

PUBLIC = "93.184.215.14"


class TableResolver:
    """Names from a table (a list of answers, one a call); counts the questions."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table, self.asked = table, []

    async def resolve(self, host: str, port: int) -> list:
        self.asked.append(host)
        answers = self.table.get(host)
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(a) for a in (answers.pop(0) if len(answers) > 1 else answers[0])]


class LoopbackConnector:
    """Connects an (address, port) the test maps to a loopback origin; anything else is refused."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, int], int] = {}
        self.calls: list[tuple[str, int]] = []

    async def connect(self, address: object, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.calls.append((str(address), port))
        target = self.routes.get((str(address), port))
        if target is None:
            raise ConnectionRefusedError(111, "Connection refused")
        return await asyncio.open_connection("127.0.0.1", target)


@dataclass
class Origin:
    """A loopback HTTP origin that keeps every request it got (head and body)."""

    server: asyncio.Server
    requests: list[bytes] = field(default_factory=list)
    got_request: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])


async def start_origin(body: bytes = b"hello from the origin", *, hold: asyncio.Event | None = None) -> Origin:
    origin: Origin

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            origin.requests.append(head + (await reader.readexactly(length) if length else b""))
            origin.got_request.set()
            if hold is not None:
                await hold.wait()
            close = b"connection: close" in head.lower()  # as HTTP/1.1 servers must honour
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            if not close:
                await reader.read()  # a tunnelled client's own connection: until it closes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    origin = Origin(await asyncio.start_server(answer, "127.0.0.1", 0))
    return origin


@dataclass
class Rig:
    proxy: NetProxy
    listener: ProxyListener
    resolver: TableResolver
    connector: LoopbackConnector
    record: NetRecord
    refused: list[Attempt]

    @property
    def port(self) -> int:
        return self.listener.port

    async def ask(self, request: bytes) -> bytes:
        """Send ``request`` to the proxy; everything it answers until it closes."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(request)
            await writer.drain()
            async with asyncio.timeout(scaled(10)):
                return await reader.read()
        finally:
            writer.close()


async def make_rig(
    policy: NetPolicy | Callable[[], NetPolicy],
    table: dict[str, list[list[str]]] | None = None,
    limits: ProxyLimits | None = None,
) -> Rig:
    resolver = TableResolver(table or {"api.example.com": [[PUBLIC]]})
    connector = LoopbackConnector()
    refused: list[Attempt] = []
    record = NetRecord(on_refused=refused.append)
    proxy = NetProxy(resolver=resolver, connector=connector, limits=limits)
    listener = await proxy.serve(socket.create_server(("127.0.0.1", 0)), policy, record)
    return Rig(proxy, listener, resolver, connector, record, refused)


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    origin = await start_origin()
    yield origin
    origin.server.close()


@pytest.fixture
async def rig(origin: Origin) -> AsyncIterator[Rig]:
    rig = await make_rig(NetPolicy.default())
    rig.connector.routes[(PUBLIC, 443)] = origin.port
    rig.connector.routes[(PUBLIC, 80)] = origin.port
    yield rig
    await rig.proxy.aclose()


async def open_tunnel(rig: Rig, authority: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.port)
    writer.write(
        f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nProxy-Authorization: Basic eDp5\r\n\r\n".encode()
    )
    async with asyncio.timeout(scaled(10)):
        head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, head


async def test_a_connect_to_a_public_name_is_tunnelled_to_the_address_that_was_checked(
    rig: Rig, origin: Origin
) -> None:
    reader, writer, head = await open_tunnel(rig, "api.example.com:443")
    assert head == b"HTTP/1.1 200 Connection Established\r\n\r\n"
    writer.write(b"GET /through HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n")
    async with asyncio.timeout(scaled(10)):
        answer = await reader.readuntil(b"hello from the origin")
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert origin.requests == [b"GET /through HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n"]
    assert rig.resolver.asked == ["api.example.com"] and rig.connector.calls == [(PUBLIC, 443)]
    (attempt,) = rig.record.attempts()
    assert (attempt.destination, attempt.allowed, attempt.reason, attempt.reached) == (
        "api.example.com:443",
        True,
        "public",
        True,
    )
    assert attempt.addresses == (PUBLIC,)
    assert rig.record.words() == ["api.example.com:443: connected"]
    # "Only these": what the test reached, as the strict policy the person may choose.
    assert NetPolicy.strict(rig.record.reached()).only == {Endpoint("api.example.com", 443)}


async def test_a_plain_http_request_is_forwarded_in_origin_form_without_proxy_headers_and_closed_after_it(
    rig: Rig, origin: Origin
) -> None:
    request = (
        b"POST http://api.example.com/v1/things?x=1 HTTP/1.1\r\nHost: api.example.com\r\n"
        b"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
        b'Content-Type: application/json\r\nContent-Length: 11\r\n\r\n{"a": "b"}\n'
    )
    answer = await rig.ask(request)
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"hello from the origin")
    assert origin.requests == [
        b"POST /v1/things?x=1 HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\n"
        b'Content-Length: 11\r\nConnection: close\r\n\r\n{"a": "b"}\n'
    ]
    assert rig.connector.calls == [(PUBLIC, 80)]


async def test_a_loopback_destination_is_refused_with_a_403_that_names_it_and_why_and_nothing_is_connected(
    rig: Rig,
) -> None:
    for request in (b"CONNECT 127.0.0.1:5432 HTTP/1.1\r\n\r\n", b"GET http://localhost:5432/ HTTP/1.1\r\n\r\n"):
        answer = await rig.ask(request)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 403 Forbidden") and b"X-MCP-Setup-Refused: loopback" in head
        assert body.startswith(b"mcp-setup refused a connection to ") and b"a loopback address (this computer)" in body
    assert rig.connector.calls == [] and rig.resolver.asked == []
    assert [(a.destination, a.allowed, a.reason) for a in rig.record.attempts()] == [
        ("127.0.0.1:5432", False, "loopback"),
        ("localhost:5432", False, "loopback"),
    ]


async def test_a_name_that_resolves_to_loopback_is_refused_and_a_rebinding_answer_is_never_connected_to(
    origin: Origin,
) -> None:
    # First answer public, every later one loopback: a second lookup at connect time would hit loopback.
    rig = await make_rig(NetPolicy.default(), {"rebind.example": [[PUBLIC], ["127.0.0.1"]]})
    rig.connector.routes[(PUBLIC, 80)] = origin.port
    rig.connector.routes[("127.0.0.1", 80)] = origin.port
    try:
        first = await rig.ask(b"GET http://rebind.example/ HTTP/1.1\r\nHost: rebind.example\r\n\r\n")
        assert first.startswith(b"HTTP/1.1 200 OK")
        second = await rig.ask(b"GET http://rebind.example/ HTTP/1.1\r\nHost: rebind.example\r\n\r\n")
        assert second.startswith(b"HTTP/1.1 403") and b"rebind.example:80: a loopback address" in second
        assert rig.resolver.asked == ["rebind.example", "rebind.example"]  # once a request
        assert rig.connector.calls == [(PUBLIC, 80)]
    finally:
        await rig.proxy.aclose()


async def test_a_strict_server_is_refused_a_new_destination_and_the_person_is_told_once(origin: Origin) -> None:
    allowed = [NetPolicy.strict(["api.example.com:443"])]
    rig = await make_rig(lambda: allowed[0], {"api.example.com": [[PUBLIC]], "new.example": [[PUBLIC]]})
    rig.connector.routes[(PUBLIC, 443)] = origin.port
    try:
        for _ in range(2):
            answer = await rig.ask(b"CONNECT new.example:443 HTTP/1.1\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 403") and b"not on this server's list of destinations" in answer
        assert [a.destination for a in rig.refused] == ["new.example:443"]  # one report for both tries
        assert rig.resolver.asked == []  # an unlisted name is not even looked up
        # The person allows it in one step: the next connection goes through.
        allowed[0] = NetPolicy.strict(["api.example.com:443", "new.example:443"])
        reader, writer, head = await open_tunnel(rig, "new.example:443")
        writer.close()
        assert head.startswith(b"HTTP/1.1 200")
        (attempt,) = rig.record.attempts()
        assert (attempt.allowed, attempt.reason, attempt.tries, attempt.reached) == (True, "listed", 3, True)
    finally:
        await rig.proxy.aclose()


async def test_a_server_with_no_network_is_refused_everything_and_no_name_is_resolved() -> None:
    rig = await make_rig(NetPolicy.none())
    try:
        answer = await rig.ask(b"CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403") and b"this server has no network" in answer
        assert rig.resolver.asked == [] and rig.connector.calls == []
        assert rig.record.words() == ["api.example.com:443: refused (this server has no network)"]
    finally:
        await rig.proxy.aclose()


async def test_an_unreachable_or_unresolvable_destination_is_a_502_and_recorded_as_not_reached(rig: Rig) -> None:
    answer = await rig.ask(b"CONNECT api.example.com:8443 HTTP/1.1\r\n\r\n")  # no route: refused
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway") and b"could not reach api.example.com:8443" in answer
    assert b"Connection refused" in answer
    answer = await rig.ask(b"CONNECT nowhere.example:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502") and b"could not resolve nowhere.example:443" in answer
    attempts = {a.destination: a for a in rig.record.attempts()}
    assert (
        attempts["api.example.com:8443"].reached is False
        and "Connection refused" in attempts["api.example.com:8443"].words
    )
    assert rig.refused == []  # neither is the policy's refusal


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),  # not a proxy request
        (b"GET https://api.example.com/ HTTP/1.1\r\n\r\n", b"400"),  # https goes through CONNECT
        (b"CONNECT api.example.com HTTP/1.1\r\n\r\n", b"400"),  # no port
        (b"CONNECT api.example.com:443 HTTP/1.1\r\n bad\r\n\r\n", b"400"),
        (b"CONNECT api.example.com:443 HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", b"431"),
    ],
)
async def test_a_malformed_or_oversized_request_is_answered_and_closed(
    rig: Rig, request_bytes: bytes, status: bytes
) -> None:
    answer = await rig.ask(request_bytes)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    assert rig.connector.calls == []


async def test_a_request_head_that_does_not_arrive_in_time_is_answered_408() -> None:
    rig = await make_rig(NetPolicy.default(), limits=ProxyLimits(header_timeout=0.2))  # meant to fire
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", rig.port)
        writer.write(b"CONNECT api.example.com:443 HTTP/1.1\r\n")  # and nothing more
        async with asyncio.timeout(scaled(10)):
            answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408")
    finally:
        await rig.proxy.aclose()


async def test_connections_past_the_limit_are_answered_503_while_the_others_stay_open(origin: Origin) -> None:
    rig = await make_rig(NetPolicy.default(), limits=ProxyLimits(connections=2))
    rig.connector.routes[(PUBLIC, 443)] = origin.port
    try:
        held = [await open_tunnel(rig, "api.example.com:443") for _ in range(2)]
        assert all(head.startswith(b"HTTP/1.1 200") for _, _, head in held)
        answer = await rig.ask(b"CONNECT api.example.com:443 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503") and b"too many connections" in answer
        assert rig.listener.open_connections == 2
        for _, writer, _ in held:
            writer.close()
    finally:
        await rig.proxy.aclose()


async def test_closing_a_servers_listener_ends_its_tunnels_and_accepts_no_more(rig: Rig, origin: Origin) -> None:
    reader, writer, head = await open_tunnel(rig, "api.example.com:443")
    assert head.startswith(b"HTTP/1.1 200")
    port = rig.port
    async with asyncio.timeout(scaled(10)):
        await rig.listener.aclose()
        assert await reader.read() == b""  # the tunnel ended
    writer.close()
    assert rig.listener.open_connections == 0 and rig.proxy.listeners == 0  # the proxy forgot it
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_a_tunnel_idle_past_the_limit_is_closed(origin: Origin) -> None:
    rig = await make_rig(NetPolicy.default(), limits=ProxyLimits(idle_timeout=0.3))  # meant to fire
    rig.connector.routes[(PUBLIC, 443)] = origin.port
    try:
        reader, writer, head = await open_tunnel(rig, "api.example.com:443")
        assert head.startswith(b"HTTP/1.1 200")
        async with asyncio.timeout(scaled(10)):
            assert await reader.read() == b""
        writer.close()
    finally:
        await rig.proxy.aclose()


async def test_a_forward_relays_raw_tcp_to_its_granted_service_and_drops_it_once_no_longer_allowed(
    origin: Origin,
) -> None:
    policies = [NetPolicy.default([f"127.0.0.1:{origin.port}"])]
    connector = LoopbackConnector()
    connector.routes[("127.0.0.1", origin.port)] = origin.port
    record = NetRecord()
    proxy = NetProxy(resolver=TableResolver({}), connector=connector)
    listener = await proxy.forward(
        socket.create_server(("127.0.0.1", 0)), Endpoint("127.0.0.1", origin.port), lambda: policies[0], record
    )
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(b"GET /raw HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(scaled(10)):
            assert (await reader.readuntil(b"hello from the origin")).startswith(b"HTTP/1.1 200 OK")
        writer.close()
        policies[0] = NetPolicy.default()  # the person withdrew it
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        async with asyncio.timeout(scaled(10)):
            assert await reader.read() == b""
        writer.close()
        assert [(a.allowed, a.reason, a.tries) for a in record.attempts()] == [(False, "loopback", 2)]
        assert connector.calls == [("127.0.0.1", origin.port)]
    finally:
        await proxy.aclose()


async def test_the_record_is_bounded_against_a_server_trying_endless_names(rig: Rig) -> None:
    bounded = NetRecord(limit=3)
    from setup_agent.launch.net_policy import Verdict

    for i in range(5):
        bounded.note(f"host{i}.example:443", Verdict(False, "not-listed"))
    assert len(bounded.attempts()) == 3 and bounded.dropped == 2
    assert bounded.words()[-1] == "… and 2 more destinations (not recorded)"


async def test_the_system_resolver_answers_from_the_hosts_resolver_on_threads_of_its_own() -> None:
    from setup_agent.launch.net_proxy import SystemResolver

    found = await SystemResolver(threads=1).resolve("localhost", 80)  # /etc/hosts: no packet sent
    assert ipaddress.ip_address("127.0.0.1") in found
