"""The download phase in the sandbox (setup_agent/launch/fetch_sandbox.py): a real ``npm exec``
and ``uvx`` against one-package registries on loopback (tests/fakes), in real bubblewrap with a
network namespace of its own (and under Landlock, its TCP held to the proxy and the registry's
port), the registry granted as its only destination.

A hostile package (an npm install script, a wheel's ``.pth`` file that runs when uv's Python
starts) tries to reach another loopback port and to write outside the cache: each attempt fails
sandboxed and succeeds with ``MCP_SETUP_SANDBOX=off``, so the tests can fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from setup_agent.launch.fetch import Fetcher, FetchState, npx_entry_name
from setup_agent.launch.sandbox import Sandbox
from setup_agent.launch.spec import LaunchSpec
from tests.fakes.npm_registry import NpmRegistry, serve_npm_package
from tests.fakes.pypi_index import PypiIndex, serve_pypi_package, stub_wheel
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

PACKAGE = "mcp-setup-fetch-stub"

needs_npx = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


def _uv_bin() -> Path | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except FileNotFoundError:
        return None


needs_uv = pytest.mark.skipif(_uv_bin() is None, reason="needs the uv wheel (pip install -e '.[test]')")

#: What a hostile package runs: connect to 127.0.0.1:PORT directly, else through the proxy
#: (``CONNECT``, as an HTTP client that ignores ``NO_PROXY`` would); exit 0 when it got through.
REACH = textwrap.dedent(
    """
    import os, socket, sys
    port = int(sys.argv[1])
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        sys.exit(0)
    except OSError:
        pass
    proxy = os.environ.get("HTTPS_PROXY", "")
    if proxy:
        host, _, proxy_port = proxy.replace("http://", "").rpartition(":")
        with socket.create_connection((host, int(proxy_port)), timeout=5) as sock:
            sock.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % port)
            if sock.recv(200).startswith(b"HTTP/1.1 200"):
                sys.exit(0)
    sys.exit("could not reach 127.0.0.1:%d" % port)
    """
)


@pytest.fixture
def elsewhere() -> Iterator[int]:
    """Another host the package has no business with: a loopback listener of the test's."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def host_env(tmp_path: Path) -> dict[str, str]:
    """PATH with ``uv``/``uvx`` (links in a dir of their own), a private HOME: cold caches."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    uv = _uv_bin()
    for tool in ("uv", "uvx") if uv is not None else ():
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(uv.with_name(tool))  # type: ignore[union-attr]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "LANG": "C.UTF-8"}


def sandbox(tmp_path: Path, mode: str) -> Sandbox:
    env = host_env(tmp_path)
    made = Sandbox(mode, hide=(tmp_path / "data",), user_home=tmp_path / "home", host_env=env)  # type: ignore[arg-type]
    if mode != "off" and made.mechanism != mode:
        pytest.skip(f"{mode} does not run here: {made.why}")
    return made


def npx_spec(registry: NpmRegistry) -> LaunchSpec:
    return LaunchSpec(
        command="npx",
        args=["-y", f"--registry={registry.url}", f"{PACKAGE}@1.0.0"],
        package_type="npm",
        identifier=PACKAGE,
        version="1.0.0",
        runner="npx",
    )


def uvx_spec(index: PypiIndex) -> LaunchSpec:
    return LaunchSpec(
        command="uvx",
        args=["--default-index", index.url, f"{PACKAGE}==1.0.0"],
        package_type="pypi",
        identifier=PACKAGE,
        version="1.0.0",
        runner="uvx",
    )


async def fetch(tmp_path: Path, box: Sandbox, spec: LaunchSpec) -> FetchState:
    fetcher = Fetcher(host_env=host_env(tmp_path), workdir=tmp_path / "data" / "scratch", sandbox=box, tick=0.2)
    try:
        with anyio.fail_after(scaled(90)):
            state = await fetcher.fetch(spec)
    finally:
        await fetcher.aclose()
    assert state is not None
    assert box.proxy is None or box.proxy.listeners == 0  # its proxy listener stopped with it
    return state


# --- npm --------------------------------------------------------------------------------------


@needs_npx
@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_an_npm_download_through_a_registry_on_loopback_works_sandboxed_and_fills_the_cache(
    tmp_path: Path, mode: str
) -> None:
    with serve_npm_package(PACKAGE, "1.0.0") as registry:
        state = await fetch(tmp_path, sandbox(tmp_path, mode), npx_spec(registry))
    assert state.ok is True, state.tail.decode(errors="replace")
    assert len(registry.tarball_requests) == 1 and state.refused == ()
    entry = tmp_path / "home" / ".npm" / "_npx" / npx_entry_name(f"{PACKAGE}@1.0.0")
    assert (entry / "node_modules" / PACKAGE / "package.json").is_file()  # in the user's npm cache
    assert not list((tmp_path / "home").glob(".npmrc")) and sorted(p.name for p in (tmp_path / "home").iterdir()) == [
        ".npm"
    ]


@needs_npx
@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
async def test_an_npm_install_script_that_reaches_another_host_fails_sandboxed(
    tmp_path: Path, mode: str, elsewhere: int
) -> None:
    bins = {"reach": f"#!/bin/sh\nexec python3 -I -c '{REACH}' {elsewhere}\n"}
    with serve_npm_package(PACKAGE, "1.0.0", scripts={"postinstall": "sh ./bin-reach.sh"}, bins=bins) as registry:
        state = await fetch(tmp_path, sandbox(tmp_path, mode), npx_spec(registry))
    assert state.ok is (mode == "off"), state.tail.decode(errors="replace")
    if mode == "bwrap":
        assert state.refused == (f"127.0.0.1:{elsewhere}",)  # the proxy refused it, and said so


@needs_npx
@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
async def test_an_npm_install_script_that_writes_outside_the_cache_fails_sandboxed(tmp_path: Path, mode: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    script = {"postinstall": f"echo planted > '{victim}/planted'"}
    with serve_npm_package(PACKAGE, "1.0.0", scripts=script) as registry:
        state = await fetch(tmp_path, sandbox(tmp_path, mode), npx_spec(registry))
    assert state.ok is (mode == "off"), state.tail.decode(errors="replace")
    assert (victim / "planted").exists() is (mode == "off")


# --- uv ---------------------------------------------------------------------------------------


@needs_uv
@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_a_uv_download_through_an_index_on_loopback_works_sandboxed_and_fills_the_cache(
    tmp_path: Path, mode: str
) -> None:
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0")) as index:
        state = await fetch(tmp_path, sandbox(tmp_path, mode), uvx_spec(index))
    assert state.ok is True, state.tail.decode(errors="replace")
    assert len(index.file_requests) == 1 and state.refused == ()
    cache = tmp_path / "home" / ".cache" / "uv"
    assert list(cache.glob("archive-v*/*")) and list(cache.glob("environments-v*/*"))


@needs_uv
@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
async def test_a_wheel_that_runs_code_at_start_can_neither_write_outside_the_cache_nor_reach_another_host_sandboxed(
    tmp_path: Path, mode: str, elsewhere: int
) -> None:
    # A .pth file runs when uv's Python starts in the new environment (the download's `python -c pass`).
    victim = tmp_path / "victim"
    victim.mkdir()
    reach = REACH.replace("sys.exit(0)", f"open({str(victim / 'reached')!r}, 'w').write('x'); sys.exit(0)")
    plant = f"try:\n    open({str(victim / 'planted')!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
    reach = f"import sys\nsys.argv = ['', '{elsewhere}']\ntry:\n{textwrap.indent(reach, '    ')}\nexcept (SystemExit, OSError):\n    pass\n"
    pth = f"import sys; exec({plant!r})\nimport sys; exec({reach!r})\n"
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0", pth=pth)) as index:
        state = await fetch(tmp_path, sandbox(tmp_path, mode), uvx_spec(index))
    assert (victim / "planted").exists() is (mode == "off"), state.tail.decode(errors="replace")
    assert (victim / "reached").exists() is (mode == "off"), state.tail.decode(errors="replace")
