"""The download phase in the sandbox (setup_agent/launch/fetch_sandbox.py): a real ``npm exec``
and ``uvx`` against one-package registries on loopback (tests/fakes), in real bubblewrap with a
network namespace of its own (and under Landlock, its TCP held to the proxy and the registry's
port), the registry granted as its only destination.

A hostile package (an npm install script, a wheel's ``.pth`` file that runs when uv's Python
starts) tries to reach another loopback port and to write outside the cache: each attempt fails
sandboxed and succeeds with ``MCP_SETUP_SANDBOX=off``, so the tests can fail.

A private registry (a token in the user's ``.npmrc``; an index's basic login in uv's variables,
its URL or ``.netrc``) is given its own credentials in the sandbox and no other host's: what the
registry received is checked, and a download without them fails naming the login. A scoped npm
package whose scope has a registry of its own (``@scope:registry=``) comes from it, with its
token, while its dependency without a scope comes from the default registry, which gets none.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from setup_agent.launch.fetch import Fetcher, FetchState, npx_entry_name
from setup_agent.launch.fetch_sandbox import download_launch
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


async def fetch(tmp_path: Path, box: Sandbox, spec: LaunchSpec, extra_env: dict[str, str] | None = None) -> FetchState:
    env = {**host_env(tmp_path), **(extra_env or {})}
    fetcher = Fetcher(host_env=env, workdir=tmp_path / "data" / "scratch", sandbox=box, tick=0.2)
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


# --- a private registry's credentials ----------------------------------------------------------


def user_npmrc(tmp_path: Path, registry: NpmRegistry, token: str | None, other_token: str) -> None:
    """The user's ``~/.npmrc``: the registry's token (written as ``${NPM_TOKEN}``) when given,
    and another host's token, which must never be passed on."""
    host = registry.url.removeprefix("http://")
    lines = ["; the user's own", "//npm.other.example/:_authToken=" + other_token, "color=false"]
    if token is not None:
        lines.append(f"//{host}/:_authToken=${{NPM_TOKEN}}")
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / ".npmrc").write_text("\n".join(lines) + "\n")


def test_the_sandboxed_download_gets_a_private_npmrc_with_the_registrys_line_only(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / ".npmrc").write_text(
        "//127.0.0.1:4873/:_authToken=${NPM_TOKEN}\n//npm.other.example/:_authToken=other-token\n"
    )
    env = {
        "HOME": str(user),
        "PATH": os.environ["PATH"],
        "NPM_TOKEN": "local-token",
    }
    box = Sandbox("bwrap", hide=(tmp_path / "data",), user_home=user, host_env=env)
    if box.mechanism != "bwrap":
        pytest.skip(box.why)
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("needs npm")
    work = tmp_path / "work"
    work.mkdir()
    launch = download_launch(box, [npm, "exec", "--registry=http://127.0.0.1:4873", "--package=x"], env, work, env)
    try:
        private = Path(launch.env["npm_config_userconfig"])
        assert private == work / "home" / ".npmrc"
        assert private.read_text() == '//127.0.0.1:4873/:_authToken="local-token"\n'
        assert "local-token" not in json.dumps(launch.argv) and "other-token" not in json.dumps(launch.env)
    finally:
        if launch.net is not None:
            launch.net.close()


@needs_npx
@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_a_private_npm_registry_gets_the_token_of_the_users_npmrc_for_its_host_and_no_other(
    tmp_path: Path, mode: str, canary: str
) -> None:
    other = canary + "-other-host"
    with serve_npm_package(PACKAGE, "1.0.0", token=canary) as registry:
        user_npmrc(tmp_path, registry, canary, other)
        state = await fetch(tmp_path, sandbox(tmp_path, mode), npx_spec(registry), {"NPM_TOKEN": canary})
    assert state.ok is True, state.tail.decode(errors="replace")
    assert len(registry.tarball_requests) == 1
    assert set(registry.authorizations) == {f"Bearer {canary}"}  # its own token, never the other host's
    assert canary not in state.tail.decode(errors="replace")
    assert not list((tmp_path / "data" / "scratch").rglob(".npmrc"))  # the private npmrc went with the run


@needs_npx
@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
async def test_a_private_npm_registry_without_its_token_fails_saying_it_needs_a_login(
    tmp_path: Path, mode: str, canary: str
) -> None:
    with serve_npm_package(PACKAGE, "1.0.0", token=canary) as registry:
        user_npmrc(tmp_path, registry, None, canary + "-other-host")
        state = await fetch(tmp_path, sandbox(tmp_path, mode), npx_spec(registry))
    assert state.ok is False
    error = state.error()
    assert error is not None and error.code == "download_failed"  # type: ignore[attr-defined]
    assert "needs a login" in str(error) and "your .npmrc" in str(error)
    assert registry.authorizations == [] and canary not in repr(error.to_dict())  # type: ignore[attr-defined]


@needs_npx
async def test_a_wrong_npm_token_fails_saying_the_registry_refused_the_credentials(tmp_path: Path, canary: str) -> None:
    with serve_npm_package(PACKAGE, "1.0.0", token=canary) as registry:
        user_npmrc(tmp_path, registry, canary + "-expired", canary + "-other-host")
        state = await fetch(
            tmp_path, sandbox(tmp_path, "bwrap"), npx_spec(registry), {"NPM_TOKEN": canary + "-expired"}
        )
    error = state.error()
    assert state.ok is False and error is not None, state.tail.decode(errors="replace")
    assert "refused the credentials" in str(error)
    assert registry.authorizations and set(registry.authorizations) == {f"Bearer {canary}-expired"}
    assert canary not in repr(error.to_dict()) + state.tail.decode(errors="replace")  # type: ignore[attr-defined]


def uv_login_ways(
    index: PypiIndex, tmp_path: Path, user: str, password: str
) -> dict[str, tuple[LaunchSpec, dict[str, str]]]:
    """The ways a person gives uv an index's login: a named index's variables, the URL, a netrc."""
    host = index.url.split("//", 1)[1].split(":", 1)[0]
    (tmp_path / "netrc").write_text(
        f"machine other.example login x password other-{password}\nmachine {host} login {user} password {password}\n"
    )
    named = uvx_spec(index).model_copy(
        update={"args": ["--default-index", f"private={index.url}", f"{PACKAGE}==1.0.0"]}
    )
    with_login = index.url.replace("http://", f"http://{user}:{password}@")
    return {
        "variables": (
            named,
            {
                "UV_INDEX_PRIVATE_USERNAME": user,
                "UV_INDEX_PRIVATE_PASSWORD": password,
                "UV_INDEX_OTHER_PASSWORD": "x" + password,
            },
        ),
        "url": (uvx_spec(index).model_copy(update={"args": [f"{PACKAGE}==1.0.0"]}), {"UV_DEFAULT_INDEX": with_login}),
        "netrc": (uvx_spec(index), {"NETRC": str(tmp_path / "netrc")}),
    }


@needs_uv
@pytest.mark.parametrize("way", ["variables", "url", "netrc"])
@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_a_private_uv_index_gets_its_login_sandboxed(tmp_path: Path, mode: str, way: str, canary: str) -> None:
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0"), login=("alice", canary)) as index:
        spec, env = uv_login_ways(index, tmp_path, "alice", canary)[way]
        state = await fetch(tmp_path, sandbox(tmp_path, mode), spec, env)
    assert state.ok is True, state.tail.decode(errors="replace")
    assert len(index.file_requests) == 1
    import base64

    assert set(index.authorizations) == {"Basic " + base64.b64encode(f"alice:{canary}".encode()).decode()}
    assert canary not in state.tail.decode(errors="replace")


@needs_uv
@pytest.mark.parametrize("mode", ["bwrap", "off"])
async def test_a_private_uv_index_without_its_login_fails_saying_it_needs_a_login(
    tmp_path: Path, mode: str, canary: str
) -> None:
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0"), login=("alice", canary)) as index:
        state = await fetch(tmp_path, sandbox(tmp_path, mode), uvx_spec(index))
    error = state.error()
    assert state.ok is False and error is not None, state.tail.decode(errors="replace")
    assert error.code == "download_failed" and "needs a login" in str(error)  # type: ignore[attr-defined]


@needs_uv
async def test_a_wrong_login_in_the_index_url_fails_saying_it_was_refused_without_repeating_it(
    tmp_path: Path, canary: str
) -> None:
    with serve_pypi_package(PACKAGE, stub_wheel(PACKAGE, "1.0.0"), login=("alice", "the-right-password")) as index:
        wrong = index.url.replace("http://", f"http://alice:{canary}@")
        spec = uvx_spec(index).model_copy(update={"args": ["--default-index", wrong, f"{PACKAGE}==1.0.0"]})
        state = await fetch(tmp_path, sandbox(tmp_path, "bwrap"), spec)
    error = state.error()
    assert state.ok is False and error is not None, state.tail.decode(errors="replace")
    assert "refused the credentials" in str(error) and index.url.rsplit("/", 1)[0] in str(error)
    assert canary not in repr(error.to_dict()) + state.tail.decode(errors="replace")  # type: ignore[attr-defined]


@needs_npx
@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_a_scoped_package_comes_from_its_scopes_registry_with_its_token_and_its_dependency_from_the_default_one(
    tmp_path: Path, mode: str, canary: str
) -> None:
    dep = "mcp-setup-unscoped-dep"
    scoped = f"@acme/{PACKAGE}"
    with (
        serve_npm_package(dep, "1.0.0") as default,
        serve_npm_package(scoped, "1.0.0", token=canary, dependencies={dep: "1.0.0"}) as scope_registry,
    ):
        (tmp_path / "home").mkdir(exist_ok=True)
        (tmp_path / "home" / ".npmrc").write_text(
            f"registry={default.url}/\n"
            f"@acme:registry={scope_registry.url}/\n"
            f"//{scope_registry.url.removeprefix('http://')}/:_authToken=${{NPM_TOKEN}}\n"
            f"//npm.other.example/:_authToken={canary}-other-host\n"
        )
        spec = LaunchSpec(
            command="npx",
            args=["-y", f"{scoped}@1.0.0"],
            package_type="npm",
            identifier=scoped,
            version="1.0.0",
            runner="npx",
        )
        state = await fetch(tmp_path, sandbox(tmp_path, mode), spec, {"NPM_TOKEN": canary})
    assert state.ok is True, state.tail.decode(errors="replace")
    assert state.refused == ()
    assert len(scope_registry.tarball_requests) == 1 and set(scope_registry.authorizations) == {f"Bearer {canary}"}
    assert len(default.tarball_requests) == 1  # npm needs the default registry for it
    assert default.authorizations == []  # and never sends it the scope's token
    assert canary not in state.tail.decode(errors="replace")
    entry = tmp_path / "home" / ".npm" / "_npx" / npx_entry_name(f"{scoped}@1.0.0")
    assert (entry / "node_modules" / "@acme" / PACKAGE / "package.json").is_file()
    assert (entry / "node_modules" / dep / "package.json").is_file()


@needs_npx
async def test_a_scoped_package_whose_scopes_registry_refuses_the_token_is_told_with_that_registry_named(
    tmp_path: Path, canary: str
) -> None:
    scoped = f"@acme/{PACKAGE}"
    with (
        serve_npm_package("mcp-setup-unused", "1.0.0") as default,
        serve_npm_package(scoped, "1.0.0", token="the-right-token") as scope_registry,
    ):
        (tmp_path / "home").mkdir(exist_ok=True)
        (tmp_path / "home" / ".npmrc").write_text(
            f"@acme:registry={scope_registry.url}/\n"
            f"//{scope_registry.url.removeprefix('http://')}/:_authToken=${{NPM_TOKEN}}\n"
        )
        spec = LaunchSpec(
            command="npx",
            # the entry's own registry is npm's default: the scope's own still wins
            args=["-y", f"--registry={default.url}", f"{scoped}@1.0.0"],
            package_type="npm",
            identifier=scoped,
            version="1.0.0",
            runner="npx",
        )
        state = await fetch(tmp_path, sandbox(tmp_path, "bwrap"), spec, {"NPM_TOKEN": canary})
    error = state.error()
    assert state.ok is False and error is not None, state.tail.decode(errors="replace")
    assert "refused the credentials" in str(error) and f"from {scope_registry.url}:" in str(error), str(error)
    assert set(scope_registry.authorizations) == {f"Bearer {canary}"} and default.authorizations == []
    assert canary not in repr(error.to_dict()) + state.tail.decode(errors="replace")  # type: ignore[attr-defined]
