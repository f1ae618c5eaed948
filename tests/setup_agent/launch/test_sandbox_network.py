"""A sandboxed server's network, through the normal flow: a hostile stub
(tests/stub_server/net_hostile.py, an MCPB python bundle) is tested, consented to and installed,
and its one tool, called through the gateway, tries an abstract unix socket the test opened on
the host, a loopback port the test listens on (directly, and through its proxy by every spelling
of loopback) and a granted one. In its own network namespace each attempt fails; with
``MCP_SETUP_SANDBOX=off`` the same attempts succeed, which proves the test can fail. A server
limited to "only these" (the destinations its test reached) is refused a new one, the person
reads it in ``mcp-setup logs`` with the one step that allows it, and after ``mcp-setup allow``
the granted loopback service answers, through the proxy and at its own loopback port. "Only
these" is one step away after an install too (``mcp-setup allow NAME --only-tested``): the
running server restarts under it, and a public destination it reached a moment before is refused.

The test reaches its "public" destination through the proxy's seams (a resolver and connector
that keep it on loopback): nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import keyring.backends.fail
import pytest

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from setup_agent.launch import NetProxy, Sandbox
from setup_agent.setup.service import CallContext
from tests.helpers.paths import STUB_DIR
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

pytestmark = pytest.mark.anyio

NET_HOSTILE_PY = STUB_DIR / "net_hostile.py"
NAME = "io.test/net-hostile"
#: Spellings of the host's loopback the server asks its proxy for.
FORMS = ("127.0.0.1", "localhost", "2130706433", "0x7f000001", "127.1", "[::1]")
HELLO, PUBLIC = "api.example.test", "93.184.215.14"
#: A public destination the server tries only when called: never seen by its test.
OTHER, OTHER_PUBLIC = "other.example.test", "93.184.215.15"


def _netns_or_skip() -> None:
    isolation = Sandbox("auto").network_isolation()
    if isolation.mechanism != "bwrap-netns":
        pytest.skip(f"bubblewrap cannot give a server a network namespace here: {isolation.why}")


@dataclass
class Host:
    granted: int
    refused: int
    hello: int
    abstract: str
    v6: bool


async def _http(body: str, host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            text = f"{body} {head.split(b' ')[1].decode()}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(text), text))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port)


@pytest.fixture
async def host(canary: str) -> AsyncIterator[Host]:
    """Loopback services on the host (one to grant, one never granted, on 127.0.0.1 and ::1, the
    "public" origin) and an abstract unix socket, each answering the canary."""
    servers = [await _http(f"granted {canary}"), await _http(f"not-granted {canary}"), await _http(f"hello {canary}")]
    refused = servers[1].sockets[0].getsockname()[1]
    v6 = True
    try:
        servers.append(await _http(f"not-granted {canary}", "::1", refused))
    except OSError:
        v6 = False
    name = f"mcp-setup-test-{uuid.uuid4().hex}"

    async def tell(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(f"abstract {canary}".encode())
        await writer.drain()
        writer.close()

    servers.append(await asyncio.start_unix_server(tell, path="\0" + name))
    ports = [s.sockets[0].getsockname()[1] for s in servers[:3]]
    try:
        yield Host(ports[0], ports[1], ports[2], name, v6)
    finally:
        for server in servers:
            server.close()


class Seam:
    """The proxy's resolver and connector: ``api.example.test`` and ``other.example.test`` are
    public addresses whose connections land on the test's origin; every other address is
    connected as it is."""

    def __init__(self, hello_port: int) -> None:
        self.hello_port = hello_port

    async def resolve(self, host: str, port: int) -> Sequence[Any]:
        if host in (HELLO, OTHER):
            return [ipaddress.ip_address(PUBLIC if host == HELLO else OTHER_PUBLIC)]
        raise OSError(f"the test resolver knows no {host}")

    async def connect(self, address: Any, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if str(address) in (PUBLIC, OTHER_PUBLIC):
            return await asyncio.open_connection("127.0.0.1", self.hello_port)
        return await asyncio.open_connection(str(address), port)


async def call(runtime: Runtime, tool: str, **args: Any) -> dict:
    with anyio.fail_after(scaled(60)):
        return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


async def install(runtime: Runtime, secret: str, *, only_these: bool = False) -> tuple[str, Any]:
    """Test (consented), then install. The test's approval covers the install (one approval per
    install); with ``only_these`` it is forgotten first (as when it expires), so the install asks
    anew, with the tools and what the test reached, answered with "only these". Returns the
    server id and that consent (None: not asked)."""
    ref = runtime.refs.mint("STUB_API_KEY", secret)
    refs = {"STUB_API_KEY": ref}
    asked = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, env_refs=refs)
    assert asked["error"]["code"] == "consent_required", asked
    runtime.consents.approve(runtime.consents.pending()[-1].consent_id)
    tested = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, env_refs=refs)
    assert tested.get("ok") is True, tested
    if only_these:
        runtime.consents.forget(NAME)
    installed = await call(runtime, "mcp_setup_install_and_connect", qualified_name=NAME, env_refs=refs)
    shown = None
    if installed.get("error", {}).get("code") == "consent_required":
        pending = runtime.consents.pending()[-1]
        shown = pending.request
        runtime.consents.approve(pending.consent_id, sandbox={"only_these": True} if only_these else None)
        installed = await call(runtime, "mcp_setup_install_and_connect", qualified_name=NAME, env_refs=refs)
    assert installed["status"] == "connected", installed
    return installed["server_id"], shown


async def started(tmp_path: Path, host: Host, mode: str, canary: str, *, other: bool = False) -> Runtime:
    """A runtime whose catalog holds the hostile stub; ``other``: its tool also tries ``OTHER``."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    targets: dict[str, Any] = {
        "abstract": host.abstract,
        "refused": host.refused,
        "granted": host.granted,
        "forms": list(FORMS),
        "hello": f"{HELLO}:443",
        **({"other": f"{OTHER}:443"} if other else {}),
    }
    bundle, sha = build_stub_bundle(
        tmp_path / "dist",
        expected_value=None,
        name="net-hostile",
        server_py=NET_HOSTILE_PY,
        extra_env={"NET_TARGETS": json.dumps(targets)},
    )
    (catalog / "net-hostile.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, name=NAME)))
    settings = Settings(
        home=tmp_path / "data",
        registries="local",
        catalog_dir=catalog,
        consent="ask",
        sandbox=mode,
        probe_timeout_seconds=30,
    )
    runtime = build_runtime(settings, keyring_backend=keyring.backends.fail.Keyring())
    assert runtime.prober.sandbox is not None
    runtime.prober.sandbox.proxy = NetProxy(resolver=Seam(host.hello), connector=Seam(host.hello))
    await runtime.start(eager=False)
    return runtime


async def reach(runtime: Runtime) -> dict[str, str]:
    await runtime.gateway.refresh(force=True)
    with anyio.fail_after(scaled(60)):
        answer = await runtime.gateway.call("net-hostile__reach", {})
    return json.loads(answer["content"][0]["text"])


async def test_a_sandboxed_server_reaches_no_host_loopback_port_nor_abstract_socket_by_any_spelling(
    tmp_path: Path, host: Host, canary: str
) -> None:
    _netns_or_skip()
    runtime = await started(tmp_path, host, "auto", canary)
    try:
        await install(runtime, "any-key-" + canary[-8:])
        got = await reach(runtime)
        assert got["proxy"].startswith("http://127.0.0.1:"), got
        assert got["abstract"].startswith("failed:") and canary not in got["abstract"], got["abstract"]
        assert got["direct_refused"].startswith("failed:") and canary not in got["direct_refused"]
        for form in FORMS:
            said = got[f"form {form}"]
            assert said.startswith("failed: HTTP/1.1 403 Forbidden") and canary not in said, (form, said)
            assert "mcp-setup refused a connection to" in said, (form, said)
        assert got["granted"].startswith("failed: HTTP/1.1 403") and canary not in got["granted"]  # not granted yet
    finally:
        await runtime.aclose()


async def test_with_the_sandbox_off_the_same_server_reaches_all_of_it_which_proves_the_test_can_fail(
    tmp_path: Path, host: Host, canary: str
) -> None:
    runtime = await started(tmp_path, host, "off", canary)
    try:
        await install(runtime, "any-key-" + canary[-8:])
        got = await reach(runtime)
        assert got["proxy"] == ""
        assert got["abstract"] == f"ok: abstract {canary}"
        assert got["direct_refused"].endswith(f"not-granted {canary} /direct")
        for form in FORMS:
            if form == "[::1]" and not host.v6:
                continue
            assert got[f"form {form}"].endswith(f"not-granted {canary} /form"), (form, got[f"form {form}"])
        assert got["granted"].endswith(f"granted {canary} /granted")
    finally:
        await runtime.aclose()


async def test_a_strict_servers_new_destination_is_refused_and_told_with_the_step_that_allows_it_which_then_works(
    tmp_path: Path, host: Host, canary: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _netns_or_skip()
    runtime = await started(tmp_path, host, "auto", canary)
    try:
        server_id, shown = await install(runtime, "any-key-" + canary[-8:], only_these=True)
        # The consent after the test said where it went, and offered exactly that.
        assert shown is not None and shown.only_these == [f"{HELLO}:443"], shown
        assert f"During the test it connected to {HELLO}:443." in shown.network
        server = runtime.store.servers.get(server_id)
        assert server is not None
        net = server.launch_spec["sandbox_net"]
        assert net["mode"] == "strict" and net["only"] == [f"{HELLO}:443"] and net["seen"] == [f"{HELLO}:443"]

        got = await reach(runtime)
        assert got["granted"].startswith("failed: HTTP/1.1 403") and canary not in got["granted"]
        assert "not on this server's list" in got["granted"]
        destination = f"127.0.0.1:{host.granted}"
        step = f"mcp-setup allow {server.slug} {destination}"
        monkeypatch.setenv("MCP_SETUP_HOME", str(tmp_path / "data"))
        from app.cli.main import main

        assert main(["logs", server.slug]) == 0
        logs = capsys.readouterr().out
        assert f"tried to connect to {destination}, and mcp-setup refused it" in logs and step in logs, logs
        assert main(["show", server.slug]) == 0
        show = capsys.readouterr().out
        assert f"network: Network policy: only these: {HELLO}:443." in show, show
        assert f"network: During its test it connected to {HELLO}:443." in show

        assert main(step.split()[1:]) == 0  # the one step, as the person types it
        capsys.readouterr()
        again = await reach(runtime)
        assert again["granted"].endswith(f"granted {canary} /granted"), again["granted"]
        assert again["granted_at_own_loopback"].endswith(f"granted {canary} /own"), again  # found at its own port
        assert again["direct_refused"].startswith("failed:") and again["abstract"].startswith("failed:")
    finally:
        await runtime.aclose()


async def test_after_an_install_only_these_is_one_step_that_restarts_the_server_and_refuses_a_new_destination(
    tmp_path: Path, host: Host, canary: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _netns_or_skip()
    runtime = await started(tmp_path, host, "auto", canary, other=True)
    try:
        server_id, asked_again = await install(runtime, "any-key-" + canary[-8:])  # one approval: the test's
        assert asked_again is None
        server = runtime.store.servers.get(server_id)
        assert server is not None
        assert server.launch_spec["sandbox_net"]["seen"] == [f"{HELLO}:443"]  # what its test reached, stored
        before = await reach(runtime)
        assert before["other"].endswith(f"hello {canary} /other"), before["other"]  # the public internet: allowed

        monkeypatch.setenv("MCP_SETUP_HOME", str(tmp_path / "data"))
        from app.cli.main import main

        assert main(["allow", server.slug, "--only-tested"]) == 0  # the one step, as the person types it
        said = capsys.readouterr().out
        assert f"may now connect only to {HELLO}:443 (what it connected to during its test)" in said, said
        after = await reach(runtime)  # the running server was restarted under the new policy
        assert after["other"].startswith("failed: HTTP/1.1 403") and canary not in after["other"], after["other"]
        assert "not on this server's list" in after["other"]
        assert main(["logs", server.slug]) == 0
        logs = capsys.readouterr().out
        assert f"tried to connect to {OTHER}:443, and mcp-setup refused it" in logs
        assert f"mcp-setup allow {server.slug} {OTHER}:443" in logs  # the one step that allows it

        assert main(["allow", server.slug, "--public-internet"]) == 0  # and back to the default
        capsys.readouterr()
        again = await reach(runtime)
        assert again["other"].endswith(f"hello {canary} /other"), again["other"]
        audited = [(r.event, r.actor) for r in runtime.store.audit.entries(server_id=server_id)]
        assert audited[-2:] == [("network", "user:terminal"), ("network", "user:terminal")]
    finally:
        await runtime.aclose()
