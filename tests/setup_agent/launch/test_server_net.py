"""The launch gives each sandboxed start its network (setup_agent/launch/server_net.py): a
namespace of its own behind a proxy listener under bubblewrap, the proxy's port alone under
Landlock's TCP rules, nothing where neither runs; the listener lives as long as the command that
owns it, and ``mcp-setup run`` keeps it alive by running the server attached.

Real bubblewrap and Landlock, real processes, a loopback service the test opens.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from setup_agent.launch import LaunchSpec, NetPolicy, Sandbox, local_command, materialize
from setup_agent.launch.landlock import NET_ABI, abi_version
from setup_agent.launch.server_net import server_network, with_registries
from tests.helpers.timeouts import scaled

#: A "server" that reports its proxy variable and what it gets from a loopback port, directly and
#: through the proxy (CONNECT), then exits.
TRY = textwrap.dedent(
    """
    import json, os, socket, sys
    port = int(sys.argv[1])
    out = {"proxy": os.environ.get("HTTPS_PROXY", "")}
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        out["direct"] = "connected"
    except OSError as exc:
        out["direct"] = "failed: %s" % exc.strerror
    if out["proxy"]:
        host, _, proxy_port = out["proxy"].replace("http://", "").rpartition(":")
        with socket.create_connection((host, int(proxy_port)), timeout=5) as sock:
            sock.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % port)
            out["via_proxy"] = sock.recv(200).decode().split("\\r\\n")[0]
    print(json.dumps(out), flush=True)
    """
)


@pytest.fixture
def service() -> Iterator[int]:
    """A loopback listener on the host that nothing granted."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def _sandbox(tmp_path: Path, mode: str) -> Sandbox:
    sandbox = Sandbox(mode, hide=(tmp_path / "data",), user_home=tmp_path / "user", host_env=dict(os.environ))  # type: ignore[arg-type]
    if mode != "off" and sandbox.mechanism != mode:
        pytest.skip(f"{mode} does not run here: {sandbox.why}")
    return sandbox


def _resolved(tmp_path: Path, port: int, **spec: object) -> object:
    work = tmp_path / "server"
    work.mkdir(exist_ok=True)
    launch = LaunchSpec(command=sys.executable, args=["-I", "-S", "-c", TRY, str(port)], **spec)  # type: ignore[arg-type]
    return materialize(launch, {}, cwd=str(work))


async def _run(tmp_path: Path, sandbox: Sandbox, port: int, **spec: object) -> tuple[dict[str, str], int, int]:
    """What the server reported, and the proxy's listeners while it ran and after its command closed."""
    command = local_command(_resolved(tmp_path, port, **spec), sandbox=sandbox, host_env=os.environ)  # type: ignore[arg-type]
    async with command:
        process = await command.spawn()
        assert process.stdout is not None
        async with asyncio.timeout(scaled(30)):
            line = await process.stdout.receive()
            await process.wait()
        during = sandbox.net_proxy().listeners if command.net is not None else 0
    after = sandbox.proxy.listeners if sandbox.proxy is not None else 0
    return json.loads(line), during, after


@pytest.mark.anyio
async def test_under_bubblewrap_a_start_gets_its_own_namespace_and_a_proxy_listener_that_stops_with_it(
    tmp_path: Path, service: int
) -> None:
    sandbox = _sandbox(tmp_path, "bwrap")
    if sandbox.network_isolation().mechanism != "bwrap-netns":
        pytest.skip(sandbox.network_isolation().why)
    got, during, after = await _run(tmp_path, sandbox, service)
    assert got["proxy"].startswith("http://127.0.0.1:")
    assert got["direct"] == "failed: Connection refused"  # its own loopback has nothing there
    assert got["via_proxy"] == "HTTP/1.1 403 Forbidden"
    assert (during, after) == (1, 0)


@pytest.mark.anyio
@pytest.mark.skipif(abi_version() < NET_ABI, reason=f"no Landlock TCP rules here (ABI {NET_ABI}, Linux 6.7)")
async def test_under_landlock_a_start_may_connect_only_to_its_proxys_port_on_the_host(
    tmp_path: Path, service: int
) -> None:
    sandbox = _sandbox(tmp_path, "landlock")
    got, during, after = await _run(tmp_path, sandbox, service)
    assert got["proxy"].startswith("http://127.0.0.1:")
    assert got["direct"] == "failed: Permission denied"
    assert got["via_proxy"] == "HTTP/1.1 403 Forbidden"
    assert (during, after) == (1, 0)


@pytest.mark.anyio
async def test_with_the_sandbox_off_or_no_network_no_proxy_stands_in_front_and_the_faces_say_so(
    tmp_path: Path, service: int
) -> None:
    off = _sandbox(tmp_path, "off")
    got, _, _ = await _run(tmp_path, off, service)
    assert got == {"proxy": "", "direct": "connected"}  # which proves the tests above can fail
    assert off.network_isolation().words == "Network: not restricted on this system."
    bwrap = Sandbox("bwrap", user_home=tmp_path / "user")
    resolved = _resolved(tmp_path, service, sandbox_network=False)
    assert server_network(bwrap, sys.executable, resolved, None) is None  # the sandbox alone cuts it  # type: ignore[arg-type]
    assert server_network(bwrap, "/usr/bin/docker", _resolved(tmp_path, service), None) is None  # type: ignore[arg-type]


def test_a_registry_the_start_reads_is_granted_by_name_and_nothing_for_a_server_with_no_network() -> None:
    args = ["-y", "--registry=http://127.0.0.1:4873/", "some-server@1.0.0"]
    granted = {str(e) for e in with_registries(NetPolicy.default(), args, "npx").granted}
    assert granted == {"127.0.0.1:4873", "registry.npmjs.org:443"}
    strict = with_registries(
        NetPolicy.strict(["api.example.com:443"]), ["--default-index", "https://pypi.corp/"], "uvx"
    )
    assert {str(e) for e in strict.granted} == {"pypi.corp:443", "pypi.org:443", "files.pythonhosted.org:443"}
    assert strict.check("pypi.corp", 443) is not None and strict.mode == "strict"
    assert with_registries(NetPolicy.none(), args, "npx") == NetPolicy.none()


def test_mcp_setup_run_keeps_the_proxy_alive_by_running_the_server_attached(tmp_path: Path, service: int) -> None:
    """``LocalCommand.become``: with a proxy in this process the server is not exec'd but run on
    this process's stdio, and its exit code is the command's."""
    sandbox = _sandbox(tmp_path, "bwrap")
    if sandbox.network_isolation().mechanism != "bwrap-netns":
        pytest.skip(sandbox.network_isolation().why)
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from setup_agent.launch import LaunchSpec, Sandbox, local_command, materialize
        sandbox = Sandbox("bwrap", hide=(Path({str(tmp_path / "data")!r}),), user_home=Path({str(tmp_path / "user")!r}))
        spec = LaunchSpec(command=sys.executable, args=["-I", "-S", "-c", {TRY + "sys.exit(3)"!r}, "{service}"])
        resolved = materialize(spec, {{}}, cwd={str(tmp_path / "server")!r})
        sys.exit(local_command(resolved, sandbox=sandbox, host_env=os.environ).become())
        """
    )
    (tmp_path / "server").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=scaled(60), cwd=os.getcwd()
    )
    assert done.returncode == 3, done.stderr
    got = json.loads(done.stdout)
    assert got["via_proxy"] == "HTTP/1.1 403 Forbidden" and got["direct"] == "failed: Connection refused"


def test_links_a_server_planted_in_its_folder_are_removed_not_followed_when_its_next_start_is_prepared(
    tmp_path: Path,
) -> None:
    """A server that replaced its ``home/.npm`` (or its ``home``) with a link to a folder outside
    would have the host write through it (npx's ``_npx`` link) as the next start is prepared."""
    from setup_agent.launch.sandbox import Profile

    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "npm-cache"
    (cache / "_npx").mkdir(parents=True)
    sandbox = Sandbox("bwrap", user_home=tmp_path / "user", host_env={"npm_config_cache": str(cache)})
    work = tmp_path / "server"
    (work / "home").mkdir(parents=True)
    (work / "home" / ".npm").symlink_to(outside, target_is_directory=True)
    (work / "tmp").symlink_to(outside, target_is_directory=True)
    if sandbox.mechanism != "bwrap":
        pytest.skip(sandbox.why)
    sandbox.wrap(shutil.which("npx") or "/usr/bin/npx", ["-y", "some-server@1.0.0"], {}, Profile(work))
    for planted in ("home/.npm", "tmp"):
        assert (work / planted).is_dir() and not (work / planted).is_symlink(), planted
    npx = work / "home" / ".npm" / "_npx"
    assert npx.is_dir() and not npx.is_symlink()  # its own, holding only its own package's entry
    assert list(outside.iterdir()) == []  # nothing was written through the links
