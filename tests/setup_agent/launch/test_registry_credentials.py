"""The credentials a sandboxed download is given (setup_agent/launch/registry_credentials.py): the
lines of the user's npmrc for the registry's host, uv's index login, nothing of any other host;
and, through the whole flow against a private npm registry on loopback (tests/fakes), that the
planted token reaches the registry and nothing else: not the running server's environment or
files, not the logs, the audit, the consent or an error, also when the download fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.launch.registry_credentials import registry_credentials
from setup_agent.setup.service import CallContext
from tests.fakes.npm_registry import NpmRegistry, serve_npm_package
from tests.fakes.pypi_index import serve_pypi_package, stub_wheel
from tests.helpers.canary import all_bytes_under
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.processes import processes_mentioning, runners_above
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

needs_npx = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


def npmrc(home: Path, *lines: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".npmrc").write_text("\n".join(lines) + "\n")
    return {"HOME": str(home)}


# --- what is read -------------------------------------------------------------------------------


def test_npm_gets_the_auth_lines_of_the_users_npmrc_for_the_registrys_host_only(tmp_path: Path) -> None:
    env = npmrc(
        tmp_path,
        "registry=https://npm.corp.example/",
        "//npm.corp.example/:_authToken=${CORP_TOKEN}",
        "//npm.corp.example/team/:username=alice",
        "//npm.corp.example/team/:_password=" + base64.b64encode(b"pw-corp").decode(),
        "//npm.corp.example:8443/:_authToken=another-port",
        "//registry.npmjs.org/:_authToken=npmjs-token",
        "//npm.corp.example/:email=alice@corp.example",
        "_authToken=unscoped",
        "; //npm.corp.example/:_authToken=commented-out",
        "color=false",
    )
    creds = registry_credentials("npm", ["exec", "--package=x"], {**env, "CORP_TOKEN": "corp-token"})
    assert creds.files == {
        ".npmrc": '//npm.corp.example/:_authToken="corp-token"\n'
        '//npm.corp.example/team/:username="alice"\n'
        '//npm.corp.example/team/:_password="' + base64.b64encode(b"pw-corp").decode() + '"\n'
    }
    assert creds.given and {"corp-token", "pw-corp"} <= set(creds.secrets)
    assert "npmjs-token" not in repr(creds) and "another-port" not in repr(creds) and "unscoped" not in repr(creds)


def test_npm_reads_the_registry_of_the_command_line_and_the_npmrc_the_environment_names(tmp_path: Path) -> None:
    rc = tmp_path / "elsewhere" / "npmrc"
    rc.parent.mkdir()
    rc.write_text("//127.0.0.1:4873/:_authToken=local-token\n//npm.corp.example/:_authToken=corp-token\n")
    env = {"HOME": str(tmp_path), "NPM_CONFIG_USERCONFIG": str(rc)}
    creds = registry_credentials("npx", ["--registry=http://127.0.0.1:4873"], env)
    assert creds.files == {".npmrc": '//127.0.0.1:4873/:_authToken="local-token"\n'}
    creds = registry_credentials("npm", [], {**env, "npm_config_registry": "https://npm.corp.example"})
    assert creds.files == {".npmrc": '//npm.corp.example/:_authToken="corp-token"\n'}
    # npm's own registry: the default port written or not is the same host
    rc.write_text("//registry.npmjs.org:443/:_authToken=npmjs-token\n")
    assert registry_credentials("npm", [], env).secrets == ("npmjs-token",)


def test_an_npmrc_line_naming_a_variable_that_is_not_set_is_left_out(tmp_path: Path) -> None:
    env = npmrc(tmp_path, "//npm.corp.example/:_authToken=${UNSET_TOKEN}", "//npm.corp.example/:username=${WHO?}")
    creds = registry_credentials("npm", ["--registry=https://npm.corp.example/"], env)
    assert creds.files == {".npmrc": '//npm.corp.example/:username=""\n'} and not creds.given
    assert registry_credentials("npm", [], {"HOME": str(tmp_path / "nobody")}).files == {}


def test_uv_gets_the_login_of_the_indexes_it_uses_and_no_other(tmp_path: Path) -> None:
    (tmp_path / ".netrc").write_text(
        "machine pypi.corp.example login alice password netrc-pw\n"
        "machine github.com login bob password github-pw\n"
        "default login anyone password default-pw\n"
    )
    host_env = {
        "HOME": str(tmp_path),
        "UV_INDEX_CORP_USERNAME": "alice",
        "UV_INDEX_CORP_PASSWORD": "corp-pw",
        "UV_INDEX_OTHER_PASSWORD": "other-pw",
        "UV_EXTRA_INDEX_URL": "https://bob:extra-pw@extra.example/simple",
    }
    creds = registry_credentials("uvx", ["--index", "corp=https://pypi.corp.example/simple", "x"], host_env)
    assert creds.env == {
        "UV_INDEX_CORP_USERNAME": "alice",
        "UV_INDEX_CORP_PASSWORD": "corp-pw",
        "UV_EXTRA_INDEX_URL": "https://bob:extra-pw@extra.example/simple",
    }
    assert creds.files == {".netrc": "machine pypi.corp.example login alice password netrc-pw\n"}
    assert {"corp-pw", "netrc-pw", "extra-pw"} <= set(creds.secrets)
    assert not {"other-pw", "github-pw", "default-pw"} & set(creds.secrets)
    # PyPI, the default: nothing to give
    assert registry_credentials("uvx", ["--from", "x", "python"], {"HOME": str(tmp_path)}).files == {}


def test_what_is_written_is_the_owners_only_and_named_to_the_runner(tmp_path: Path) -> None:
    env = npmrc(tmp_path / "user", "//npm.corp.example/:_authToken=t0ken")
    creds = registry_credentials("npm", ["--registry=https://npm.corp.example/"], env)
    home = tmp_path / "private-home"
    home.mkdir()
    (home / ".npmrc").symlink_to(tmp_path / "planted")  # never written through
    named = creds.write(home)
    assert named == {"npm_config_userconfig": str(home / ".npmrc")}
    assert not (home / ".npmrc").is_symlink() and not (tmp_path / "planted").exists()
    assert stat.S_IMODE((home / ".npmrc").stat().st_mode) == 0o600
    assert creds.scrub(b"GET with t0ken failed") == b"GET with [registry credential] failed"


# --- the whole flow, with a canary --------------------------------------------------------------

NAME = "io.test/private-npm"
PACKAGE = "mcp-setup-private-stub"


async def call(runtime: Runtime, tool: str, **args: Any) -> dict:
    with anyio.fail_after(scaled(90)):
        return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


async def consented(runtime: Runtime, tool: str, shown: list[Any], **args: Any) -> dict:
    """``tool``, the user approving each consent it asks for (what it showed goes into ``shown``)."""
    answer = await call(runtime, tool, **args)
    while answer.get("error", {}).get("code") == "consent_required":
        pending = runtime.consents.pending()[-1]
        shown.append(pending.request.public())
        runtime.consents.approve(pending.consent_id)
        answer = await call(runtime, tool, **args)
    return answer


def private_runtime(new_runtime, tmp_path: Path, registry: NpmRegistry, npmrc_lines: list[str], token: str) -> Runtime:
    write_catalog_entry(
        tmp_path / "catalog",
        NAME,
        "The stub server from a private npm registry on loopback.",
        {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": PACKAGE},
    )
    home = tmp_path / "user"
    host_env = {**npmrc(home, *npmrc_lines), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "NPM_TOKEN": token}
    return new_runtime(
        Settings(
            home=tmp_path / "data",
            registries="local",
            catalog_dir=tmp_path / "catalog",
            probe_timeout_seconds=scaled(30),
            adopt_tested_servers=False,
        ),
        host_env=host_env,
    )


def environ_of(pids: list[int]) -> bytes:
    out = b""
    for pid in pids:
        try:
            out += Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
    return out


@needs_npx
async def test_a_private_registrys_token_reaches_the_registry_and_nothing_the_server_or_a_person_sees(
    new_runtime, tmp_path: Path, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = canary + "-other-host"
    with serve_npm_package(PACKAGE, "1.0.0", token=canary) as registry:  # its metadata too
        host = registry.url.removeprefix("http://")
        lines = [f"//{host}/:_authToken=${{NPM_TOKEN}}", f"//npm.other.example/:_authToken={other}"]
        runtime = private_runtime(new_runtime, tmp_path, registry, lines, canary)
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here: the download reads the user's npmrc itself")
        await runtime.start(eager=False)
        shown: list[Any] = []
        ref = runtime.refs.mint("STUB_API_KEY", "the-servers-own-key")
        tested = await consented(
            runtime, "mcp_setup_test_connection", shown, qualified_name=NAME, env_refs={"STUB_API_KEY": ref}
        )
        assert tested.get("ok") is True, tested
        installed = await consented(
            runtime, "mcp_setup_install_and_connect", shown, qualified_name=NAME, env_refs={"STUB_API_KEY": ref}
        )
        assert installed.get("status") == "connected", installed
        await runtime.gateway.refresh(force=True)
        with anyio.fail_after(scaled(30)):
            echoed = await runtime.gateway.call("private-npm__echo", {"text": "hello"})
        assert echoed["content"] == [{"type": "text", "text": "hello"}], echoed
        running = processes_mentioning(PACKAGE)
        assert running  # the server (its node launcher and python), in the sandbox
        assert runners_above(running) == []  # no npx, which would ask the registry again without its token
        seen_by_server = environ_of(running)
        assert b"the-servers-own-key" in seen_by_server  # the check reads the right processes
        assert set(registry.authorizations) == {f"Bearer {canary}"}  # the registry got its token, only it
        await runtime.aclose()
    assert canary.encode() not in seen_by_server
    said = json.dumps([tested, installed, echoed, shown])
    assert canary not in said and canary not in caplog.text
    # the server's folder, the database (its audit rows), the logs
    for path, data in all_bytes_under(tmp_path / "data"):
        assert canary.encode() not in data, path
    for path, data in all_bytes_under(tmp_path / "user" / ".npm"):  # the caches servers are shown
        assert canary.encode() not in data, path


@needs_npx
@pytest.mark.parametrize("planted", ["none", "wrong"])
async def test_a_download_the_private_registry_refuses_says_why_and_shows_no_token(
    new_runtime, tmp_path: Path, canary: str, caplog: pytest.LogCaptureFixture, planted: str
) -> None:
    with serve_npm_package(PACKAGE, "1.0.0", token="the-right-token") as registry:
        host = registry.url.removeprefix("http://")
        lines = [f"//npm.other.example/:_authToken={canary}-other"]
        if planted == "wrong":
            lines.append(f"//{host}/:_authToken=${{NPM_TOKEN}}")
        runtime = private_runtime(new_runtime, tmp_path, registry, lines, canary)
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here: the download reads the user's npmrc itself")
        shown: list[Any] = []
        ref = runtime.refs.mint("STUB_API_KEY", "the-servers-own-key")
        tested = await consented(
            runtime, "mcp_setup_test_connection", shown, qualified_name=NAME, env_refs={"STUB_API_KEY": ref}
        )
        await runtime.aclose()
    assert tested["ok"] is False and tested["error"]["code"] == "download_failed", tested
    words = "refused the credentials" if planted == "wrong" else "needs a login"
    assert words in tested["error"]["message"] and "your .npmrc" in tested["error"]["message"], tested
    assert registry.authorizations == (
        [f"Bearer {canary}"] * len(registry.authorizations) if planted == "wrong" else []
    )
    said = json.dumps([tested, shown])
    assert canary not in said and canary not in caplog.text
    for path, data in all_bytes_under(tmp_path / "data"):
        assert canary.encode() not in data, path


def _uv_bin() -> Path | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except FileNotFoundError:
        return None


PYPI_NAME, PYPI_PACKAGE = "io.test/private-pypi", "mcp-setup-private-pypi"


@pytest.mark.skipif(_uv_bin() is None, reason="needs the uv wheel (pip install -e '.[test]')")
async def test_a_private_indexs_login_reaches_the_index_and_never_the_running_uvx_server(
    new_runtime, tmp_path: Path, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    uv = _uv_bin()
    assert uv is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("uv", "uvx"):
        (bin_dir / tool).symlink_to(uv.with_name(tool))
    home = tmp_path / "user"
    (home / ".config" / "uv").mkdir(parents=True)
    (home / ".config" / "uv" / "uv.toml").write_text('python-downloads = "never"\n')
    wheel = stub_wheel(PYPI_PACKAGE, "1.0.0")
    with serve_pypi_package(PYPI_PACKAGE, wheel, login=("alice", canary)) as index:  # its pages too
        (home / ".netrc").write_text(f"machine 127.0.0.1 login alice password {canary}\n")
        write_catalog_entry(
            tmp_path / "catalog",
            PYPI_NAME,
            "The stub server from a private index on loopback.",
            {"registryType": "pypi", "registryBaseUrl": index.url, "identifier": PYPI_PACKAGE},
        )
        # uv reads no PIP_* variable, but the download and the start are handed them: the start never with the login
        extra = index.url.replace("http://", f"http://bob:{canary}@")
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "LANG": "C.UTF-8"}
        runtime = new_runtime(
            Settings(
                home=tmp_path / "data",
                registries="local",
                catalog_dir=tmp_path / "catalog",
                probe_timeout_seconds=scaled(30),
                adopt_tested_servers=False,
            ),
            host_env={**env, "PIP_EXTRA_INDEX_URL": extra},
            which=lambda name: shutil.which(name, path=env["PATH"]),
        )
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here: the download reads the user's netrc itself")
        await runtime.start(eager=False)
        shown: list[Any] = []
        ref = runtime.refs.mint("STUB_API_KEY", "the-servers-own-key")
        args = {"qualified_name": PYPI_NAME, "env_refs": {"STUB_API_KEY": ref}}
        tested = await consented(runtime, "mcp_setup_test_connection", shown, **args)
        assert tested.get("ok") is True, tested
        installed = await consented(runtime, "mcp_setup_install_and_connect", shown, **args)
        assert installed.get("status") == "connected", installed
        await runtime.gateway.refresh(force=True)
        with anyio.fail_after(scaled(30)):
            echoed = await runtime.gateway.call("private-pypi__echo", {"text": "hello"})
        assert echoed["content"] == [{"type": "text", "text": "hello"}], echoed
        assert runners_above(processes_mentioning(PYPI_PACKAGE)) == []  # no uvx, which would ask the index again
        seen_by_server = environ_of(processes_mentioning(PYPI_PACKAGE))
        assert b"the-servers-own-key" in seen_by_server  # the check reads the right processes
        assert b"PIP_EXTRA_INDEX_URL=" + index.url.encode() in seen_by_server  # named to it, without the login
        login = "Basic " + base64.b64encode(f"alice:{canary}".encode()).decode()
        assert index.file_requests and set(index.authorizations) == {login}
        await runtime.aclose()
    assert canary.encode() not in seen_by_server
    assert canary not in json.dumps([tested, installed, echoed, shown]) and canary not in caplog.text
    for path, data in all_bytes_under(tmp_path / "data"):
        assert canary.encode() not in data, path


def test_a_scoped_package_from_its_scopes_registry_gets_that_hosts_lines_and_never_npms_own_token(
    tmp_path: Path,
) -> None:
    lines = [
        "@acme:registry=https://npm.acme.example/",
        "//npm.acme.example/:_authToken=${ACME_TOKEN}",
        "//registry.npmjs.org/:_authToken=npmjs-publish-token",
        "//npm.other.example/:_authToken=other-token",
    ]
    env = {**npmrc(tmp_path, *lines), "ACME_TOKEN": "acme-token"}
    creds = registry_credentials("npx", ["-y", "@acme/stub@1.0.0"], env)
    assert creds.files == {".npmrc": '//npm.acme.example/:_authToken="acme-token"\n'}
    assert creds.secrets == ("acme-token",)
    # a package of no scope still gets its registry's (npm's own) line, and only it
    assert registry_credentials("npx", ["-y", "stub@1"], env).secrets == ("npmjs-publish-token",)
    # the person's own default registry (a company's mirror) serves the scoped package's unscoped
    # dependencies: its line is given too
    npmrc(tmp_path, *lines, "registry=https://mirror.corp.example/", "//mirror.corp.example/:_authToken=mirror-token")
    creds = registry_credentials("npm", ["exec", "--package=@acme/stub@1.0.0", "--call", ":"], env)
    assert set(creds.secrets) == {"acme-token", "mirror-token"}


def test_the_global_npmrcs_lines_for_the_registry_are_given_below_the_users(tmp_path: Path) -> None:
    (tmp_path / "global").write_text(
        "//npm.corp.example/:_authToken=global-token\n//npm.corp.example/:username=ci\n//x.example/:_authToken=x\n"
    )
    env = {
        **npmrc(tmp_path / "home", "//npm.corp.example/:_authToken=user-token"),
        "npm_config_globalconfig": str(tmp_path / "global"),
    }
    creds = registry_credentials("npm", ["--registry=https://npm.corp.example/"], env)
    assert creds.files == {".npmrc": '//npm.corp.example/:_authToken="user-token"\n//npm.corp.example/:username="ci"\n'}
    assert creds.secrets == ("user-token",)


SCOPED_NAME, SCOPED_PACKAGE, DEPENDENCY = "io.test/scoped-npm", "@acme/mcp-setup-scoped-stub", "mcp-setup-plain-dep"


@needs_npx
async def test_a_scoped_package_from_its_scopes_private_registry_is_tested_installed_and_called_with_its_token_in_the_download_only(
    new_runtime, tmp_path: Path, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        serve_npm_package(DEPENDENCY, "1.0.0") as default,
        serve_npm_package(SCOPED_PACKAGE, "1.0.0", token=canary, dependencies={DEPENDENCY: "1.0.0"}) as scope,
    ):
        write_catalog_entry(
            tmp_path / "catalog",
            SCOPED_NAME,
            "The stub server from its scope's private npm registry on loopback.",
            {"registryType": "npm", "identifier": SCOPED_PACKAGE},
        )
        lines = [
            f"registry={default.url}/",
            f"@acme:registry={scope.url}/",
            f"//{scope.url.removeprefix('http://')}/:_authToken=${{NPM_TOKEN}}",
        ]
        host_env = {**npmrc(tmp_path / "user", *lines), "PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
        runtime = new_runtime(
            Settings(
                home=tmp_path / "data",
                registries="local",
                catalog_dir=tmp_path / "catalog",
                probe_timeout_seconds=scaled(30),
                adopt_tested_servers=False,
            ),
            host_env={**host_env, "NPM_TOKEN": canary},
        )
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here: the download reads the user's npmrc itself")
        await runtime.start(eager=False)
        shown: list[Any] = []
        ref = runtime.refs.mint("STUB_API_KEY", "the-servers-own-key")
        args = {"qualified_name": SCOPED_NAME, "env_refs": {"STUB_API_KEY": ref}}
        tested = await consented(runtime, "mcp_setup_test_connection", shown, **args)
        assert tested.get("ok") is True, tested
        installed = await consented(runtime, "mcp_setup_install_and_connect", shown, **args)
        assert installed.get("status") == "connected", installed
        await runtime.gateway.refresh(force=True)
        with anyio.fail_after(scaled(30)):
            echoed = await runtime.gateway.call("scoped-npm__echo", {"text": "hello"})
        assert echoed["content"] == [{"type": "text", "text": "hello"}], echoed
        assert runners_above(processes_mentioning("mcp-setup-scoped-stub")) == []
        seen_by_server = environ_of(processes_mentioning("mcp-setup-scoped-stub"))
        assert b"the-servers-own-key" in seen_by_server  # the check reads the right processes
        await runtime.aclose()
    assert scope.tarball_requests and set(scope.authorizations) == {f"Bearer {canary}"}
    assert default.tarball_requests and default.authorizations == []  # its dependency, with no token
    assert canary.encode() not in seen_by_server
    assert canary not in json.dumps([tested, installed, echoed, shown]) and canary not in caplog.text
    for path, data in all_bytes_under(tmp_path / "data"):
        assert canary.encode() not in data, path
    for path, data in all_bytes_under(tmp_path / "user" / ".npm"):
        assert canary.encode() not in data, path


@needs_npx
async def test_a_package_that_must_start_through_npx_from_a_registry_protecting_its_metadata_fails_saying_npx_gets_no_login(
    new_runtime, tmp_path: Path, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An npx option the direct start does not read: the download works (with the token), the
    # start goes through npx, which asks the registry again without it.
    caplog.set_level("INFO")
    with serve_npm_package(PACKAGE, "1.0.0", token=canary) as registry:
        write_catalog_entry(
            tmp_path / "catalog",
            NAME,
            "The stub server from a private npm registry on loopback, with an npx option.",
            {
                "registryType": "npm",
                "registryBaseUrl": registry.url,
                "identifier": PACKAGE,
                "runtimeArguments": [{"type": "named", "name": "--no-color", "value": ""}],
            },
        )
        lines = [f"//{registry.url.removeprefix('http://')}/:_authToken=${{NPM_TOKEN}}"]
        host_env = {**npmrc(tmp_path / "user", *lines), "PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
        runtime = new_runtime(
            Settings(
                home=tmp_path / "data",
                registries="local",
                catalog_dir=tmp_path / "catalog",
                probe_timeout_seconds=scaled(30),
                adopt_tested_servers=False,
            ),
            host_env={**host_env, "NPM_TOKEN": canary},
        )
        if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
            pytest.skip("no sandbox here: npx reads the user's npmrc itself")
        shown: list[Any] = []
        ref = runtime.refs.mint("STUB_API_KEY", "the-servers-own-key")
        args = {"qualified_name": NAME, "env_refs": {"STUB_API_KEY": ref}}
        tested = await consented(runtime, "mcp_setup_test_connection", shown, **args)
        await runtime.aclose()
    assert registry.tarball_requests  # the download came through, with its token
    assert tested["ok"] is False and tested["error"]["code"] == "exited", tested
    message = tested["error"]["message"]
    assert "The runner failed" in message and "to the download only, never to a server's start" in message, message
    assert set(registry.authorizations) == {f"Bearer {canary}"}  # the download's
    assert len(registry.requests) > len(registry.authorizations)  # and npx's at the start, with none
    assert canary not in json.dumps([tested, shown]) and canary not in caplog.text
    for path, data in all_bytes_under(tmp_path / "data"):
        assert canary.encode() not in data, path
