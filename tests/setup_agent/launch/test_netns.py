"""A sandboxed server in its own network namespace reaches out only through mcp-setup's proxy.

Real bubblewrap, the sandbox's own bwrap command line (:meth:`Sandbox.wrap`, the user's home
hidden), the bootstrap in front of the server (run by an interpreter that may live in that hidden
home), the socket hand-off and the proxy serving it. The "server" is
``tests/stub_server/net_probe.py`` on the system's Python: it tries a host loopback service the
person granted (through the proxy and at its own loopback port), one that was not granted (by
every spelling, and directly), and an abstract unix socket the test opened on the host. The same
direct attempts run without a namespace of their own and succeed there, which proves the test
can fail.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import pwd
import shutil
import ssl
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from setup_agent.launch.net_policy import NetPolicy
from setup_agent.launch.net_proxy import NetProxy
from setup_agent.launch.net_record import NetRecord
from setup_agent.launch.netns import NetnsBridge, bootstrap_python
from setup_agent.launch.sandbox import Profile, Sandbox
from tests.helpers.paths import STUB_DIR
from tests.helpers.timeouts import scaled

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

PROBE = STUB_DIR / "net_probe.py"
#: Spellings of the host's loopback, each with the port that was not granted.
FORMS = (
    "127.0.0.1",
    "localhost",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "0.0.0.0",
    "loopback-alias.test",  # a name that resolves to 127.0.0.1
)


class LoopbackAliasResolver:
    """Resolves one made-up name to loopback; any other name is a test bug (no DNS is sent)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int) -> list:
        self.asked.append(host)
        if host == "loopback-alias.test":
            return [ipaddress.ip_address("127.0.0.1")]
        raise OSError(f"the test resolver knows no {host}")


@dataclass
class Host:
    granted: int
    refused: int
    abstract: str
    canary: str


async def _http_server(body: str, ssl_context: ssl.SSLContext | None = None) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ")[1].decode()
            text = f"{body} {path}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(text), text))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0, ssl=ssl_context)


@pytest.fixture
async def host(canary: str) -> AsyncIterator[Host]:
    """Two loopback HTTP services on the host and an abstract unix socket, each answering the canary."""
    granted = await _http_server(f"granted {canary}")
    refused = await _http_server(f"not-granted {canary}")
    name = f"mcp-setup-test-{uuid.uuid4().hex}"

    async def tell(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(f"abstract {canary}".encode())
        await writer.drain()
        writer.close()

    unix = await asyncio.start_unix_server(tell, path="\0" + name)
    try:
        yield Host(granted.sockets[0].getsockname()[1], refused.sockets[0].getsockname()[1], name, canary)
    finally:
        for server in (granted, refused, unix):
            server.close()


def _user_home() -> Path:
    return Path(pwd.getpwuid(os.getuid()).pw_dir)


def _probe_python() -> str:
    """The system's Python when there is one: then only the bootstrap needs the interpreter the
    bridge binds (which may live in the hidden home)."""
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else str(bootstrap_python())


def sandbox_argv(
    tmp_path: Path, command: str, args: list[str], reads: tuple[Path, ...], bridge: NetnsBridge | None
) -> list[str]:
    """The sandbox's bwrap command line for ``command``; with a bridge, in its own network
    namespace (no ``--share-net``) behind the bootstrap, as the launch function will build it."""
    workdir = tmp_path / "server"
    workdir.mkdir(exist_ok=True)
    sandbox = Sandbox("bwrap", hide=(tmp_path / "data",), user_home=_user_home(), host_env=dict(os.environ))
    assert sandbox.mechanism == "bwrap", sandbox.why
    profile = Profile(workdir, reads=reads, network=True)  # --share-net, which into_bwrap drops
    wrapped, wrapped_args, _ = sandbox.wrap(command, args, {}, profile)
    argv = [wrapped, *wrapped_args]
    if bridge is None:
        return argv
    assert "--share-net" in argv
    return bridge.into_bwrap(argv)


async def run_probe(
    tmp_path: Path, host: Host, *, namespace: bool, forward_grants: bool = False, python: Path | None = None
) -> tuple[dict, NetRecord, LoopbackAliasResolver]:
    """The probe in the sandbox; with ``namespace``, in its own behind the proxy, the host's
    ``granted`` port allowed (and, with ``forward_grants``, found on its own loopback too)."""
    plan = {
        "granted": host.granted,
        "refused": host.refused,
        "abstract": host.abstract,
        "forms": [f"{form}:{host.refused}" for form in FORMS],
        "direct_only": not namespace,
    }
    resolver = LoopbackAliasResolver()
    record = NetRecord()
    proxy = NetProxy(resolver=resolver)
    policy = NetPolicy.default([f"127.0.0.1:{host.granted}"])
    forwards = {e.port: e for e in policy.loopback_grants()} if forward_grants else {}
    bridge = NetnsBridge(forwards=list(forwards), python=python) if namespace else None
    argv = sandbox_argv(tmp_path, _probe_python(), ["-I", "-S", str(PROBE), json.dumps(plan)], (PROBE,), bridge)
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=bridge.pass_fds if bridge else (),
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        if bridge is not None:
            bridge.spawned()
            sockets = await bridge.sockets(scaled(10))
            await proxy.serve(sockets.proxy, policy, record)
            for port, socks in sockets.forwards.items():
                for sock in socks:
                    await proxy.forward(sock, forwards[port], policy, record)
        async with asyncio.timeout(scaled(30)):
            out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return json.loads(out), record, resolver
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if bridge is not None:
            bridge.close()
        await proxy.aclose()


async def test_a_namespaced_server_reaches_a_granted_host_loopback_service_through_the_proxy_and_at_its_own_port(
    tmp_path: Path, host: Host
) -> None:
    got, record, _ = await run_probe(tmp_path, host, namespace=True, forward_grants=True)
    assert got["connect_granted"] == f"ok: HTTP/1.1 200 OK\r\nContent-Length: {len(host.canary) + 16}\r\n" + (
        f"Connection: close\r\n\r\ngranted {host.canary} /tunnel"
    )
    assert got["get_granted"].startswith("ok: HTTP/1.1 200 OK") and got["get_granted"].endswith(f"{host.canary} /get")
    # The granted port on its own loopback is the host's service (a forward, checked like the proxy).
    assert got["forward_granted"].endswith(f"granted {host.canary} /direct"), got["forward_granted"]
    destination = f"127.0.0.1:{host.granted}"
    reached = {a.destination: a for a in record.attempts()}[destination]
    assert reached.allowed and reached.reached and reached.reason == "granted" and reached.tries == 3


async def test_a_namespaced_server_is_refused_a_host_loopback_port_not_granted_by_every_spelling(
    tmp_path: Path, host: Host
) -> None:
    got, record, resolver = await run_probe(tmp_path, host, namespace=True)
    for form in FORMS:
        answer = got["forms"][f"{form}:{host.refused}"]
        tunnel, _, forwarded = answer.partition(" | ")
        for one in (tunnel, forwarded):
            assert "HTTP/1.1 403 Forbidden" in one and "mcp-setup refused a connection to" in one, (form, one)
            assert host.canary not in one
        assert f":{host.refused}: " in tunnel, (form, tunnel)
        assert "a loopback address" in tunnel or "the unspecified address" in tunnel, (form, tunnel)
    assert resolver.asked == ["loopback-alias.test", "loopback-alias.test"]  # localhost is never asked of DNS
    refused = {a.destination for a in record.refused()}
    assert f"127.0.0.1:{host.refused}" in refused and f"loopback-alias.test:{host.refused}" in refused
    assert f"[::1]:{host.refused}" in refused and f"0.0.0.0:{host.refused}" in refused
    assert all(host.canary not in json.dumps(a.to_dict()) for a in record.attempts())
    # Its environment sends every HTTP client to the proxy on its own loopback.
    port = got["env"]["HTTPS_PROXY"].rpartition(":")[2]
    assert got["env"]["HTTP_PROXY"] == got["env"]["https_proxy"] == f"http://127.0.0.1:{port}"
    assert got["env"]["NO_PROXY"] == "localhost,127.0.0.1,::1" and got["env"]["npm_config_https_proxy"]


async def test_a_namespaced_server_cannot_reach_the_hosts_abstract_unix_sockets_nor_its_loopback_ports(
    tmp_path: Path, host: Host
) -> None:
    got, _, _ = await run_probe(tmp_path, host, namespace=True)
    assert got["abstract"].startswith("failed:") and "Connection refused" in got["abstract"], got["abstract"]
    assert got["direct_refused"].startswith("failed:") and "Connection refused" in got["direct_refused"]


async def test_without_a_namespace_of_its_own_the_same_server_reaches_both_which_proves_the_test_can_fail(
    tmp_path: Path, host: Host
) -> None:
    got, _, _ = await run_probe(tmp_path, host, namespace=False)
    assert got["abstract"] == f"ok: abstract {host.canary}"
    assert got["direct_refused"].endswith(f"not-granted {host.canary} /direct")


async def test_the_bootstrap_runs_on_mcp_setups_own_interpreter_where_it_lives_in_the_hidden_home(
    tmp_path: Path, host: Host
) -> None:
    own = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    if own.is_relative_to("/usr"):
        pytest.skip(f"this interpreter ({own}) is a system one, visible in every sandbox")
    got, _, _ = await run_probe(tmp_path, host, namespace=True, python=own)
    assert got["env"]["HTTPS_PROXY"].startswith("http://127.0.0.1:")
    assert got["abstract"].startswith("failed:") and got["direct_refused"].startswith("failed:")


async def test_the_bootstrap_will_not_start_a_server_that_shares_the_hosts_network_namespace(tmp_path: Path) -> None:
    bridge = NetnsBridge()
    try:
        argv = [*bridge.command(sys.executable, ["-c", "print('the server ran')"])]
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, pass_fds=bridge.pass_fds
        )
        bridge.spawned()
        async with asyncio.timeout(scaled(20)):
            out, err = await process.communicate()
        assert process.returncode == 126 and out == b""
        assert b"not in a network namespace of its own" in err
        from setup_agent.errors import SandboxUnavailable

        with pytest.raises(SandboxUnavailable, match="stopped before it handed out"):
            await bridge.sockets(scaled(10))
    finally:
        bridge.close()


def _tls_context(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, Path]:
    """A self-signed certificate for ``name``: the origin's context, and the file a client trusts."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "origin-cert.pem", tmp_path / "origin-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context, cert_file


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_a_real_http_client_in_the_namespace_goes_through_the_proxy_by_the_standard_variables_alone(
    tmp_path: Path, canary: str
) -> None:
    """curl, told nothing but the URLs, fetches http:// and https:// URLs of a public-looking name;
    the proxy resolves the name (a test table) and connects (a test seam mapping the address to
    loopback origins), so nothing leaves the machine."""
    name, public = "api.example.test", "93.184.215.14"
    tls, cert_file = _tls_context(tmp_path, name)
    plain = await _http_server(f"plain {canary}")
    secure = await _http_server(f"tls {canary}", ssl_context=tls)
    routes = {(public, 80): plain.sockets[0].getsockname()[1], (public, 443): secure.sockets[0].getsockname()[1]}

    class Table:
        async def resolve(self, host: str, port: int) -> list:
            assert host == name, host
            return [ipaddress.ip_address(public)]

    class ToLoopback:
        async def connect(self, address: object, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection("127.0.0.1", routes[(str(address), port)])

    record = NetRecord()
    proxy = NetProxy(resolver=Table(), connector=ToLoopback())
    bridge = NetnsBridge()
    args = ["-sS", "--max-time", str(scaled(20)), "--cacert", str(cert_file)]
    argv = sandbox_argv(
        tmp_path, "/usr/bin/curl", [*args, f"http://{name}/one", f"https://{name}/two"], (cert_file,), bridge
    )
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, pass_fds=bridge.pass_fds
        )
        bridge.spawned()
        sockets = await bridge.sockets(scaled(10))
        await proxy.serve(sockets.proxy, NetPolicy.default(), record)
        async with asyncio.timeout(scaled(30)):
            out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        assert out.decode() == f"plain {canary} /onetls {canary} /two"
        assert [(a.destination, a.allowed, a.reached) for a in record.attempts()] == [
            (f"{name}:80", True, True),
            (f"{name}:443", True, True),
        ]
    finally:
        bridge.close()
        await proxy.aclose()
        plain.close()
        secure.close()
