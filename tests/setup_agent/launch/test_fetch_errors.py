"""The download phase reads the runner's own errors: what failed, from which registry, and whether
to stop at once. Lines as npm 11, uv 0.13, pip and docker print them; a real ``uv`` run against a
closed port on loopback through the :class:`Fetcher`."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from setup_agent.launch.fetch import Fetcher
from setup_agent.launch.fetch_errors import (
    download_failed,
    for_a_login,
    read_failure,
    registry_of,
    through_the_proxy,
)
from setup_agent.launch.spec import LaunchSpec
from tests.fakes import closed_port_url
from tests.helpers.timeouts import scaled


def test_npm_s_first_refused_attempt_stops_the_download_naming_the_registry_it_tried() -> None:
    found = read_failure("npx", "npm http fetch GET http://127.0.0.1:9/foo-bar-x attempt 1 failed with ECONNREFUSED\n")
    assert found is not None and found.final and found.code == "ECONNREFUSED"
    assert found.registry == "http://127.0.0.1:9" and found.cause == "nothing answers there (connection refused)"


@pytest.mark.parametrize(
    ("line", "code", "words"),
    [
        ("npm http fetch GET https://registry.npmjs.org/x attempt 1 failed with ENOTFOUND", "ENOTFOUND", "address"),
        ("npm http fetch GET https://registry.npmjs.org/x attempt 1 failed with ETIMEDOUT", "ETIMEDOUT", "in time"),
        (
            "npm http fetch GET https://registry.npmjs.org/x attempt 1 failed with SELF_SIGNED_CERT_IN_CHAIN",
            "SELF_SIGNED_CERT_IN_CHAIN",
            "certificate",
        ),
        ("npm error code E404", "E404", "no such package"),
        ("npm error code ETARGET", "ETARGET", "no such version"),
        ("npm error code E407", "E407", "proxy"),
    ],
)
def test_npm_s_network_tls_proxy_and_registry_answers_are_each_a_cause_in_words(
    line: str, code: str, words: str
) -> None:
    found = read_failure("npx", line)
    assert found is not None and found.final and found.code == code and words in found.cause


def test_a_reset_connection_lets_npm_retry_and_lines_of_a_working_download_say_nothing() -> None:
    reset = read_failure("npx", "npm http fetch GET https://r.example/x attempt 1 failed with ECONNRESET")
    assert reset is not None and not reset.final
    assert read_failure("npx", "npm http fetch GET 200 https://registry.npmjs.org/x 120ms (cache miss)") is None
    assert read_failure("uvx", "Downloaded mcp-server-time") is None
    assert read_failure("uvx", "Installed 12 packages in 30ms") is None


@pytest.mark.parametrize(
    ("runner", "line", "code"),
    [
        ("uvx", "  cause: Connection refused (os error 111)", "ECONNREFUSED"),
        ("uvx", "  cause: dns error: failed to lookup address information: Name or service not known", "ENOTFOUND"),
        ("uvx", "  cause: invalid peer certificate: UnknownIssuer", "TLS"),
        ("uvx", "  ╰─▶ Because mcp-x was not found in the package registry and you require mcp-x==1.0", "E404"),
        (
            "pip",
            "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection "
            "broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed "
            "to establish a new connection: [Errno 111] Connection refused')': /simple/mcp-x/",
            "ECONNREFUSED",
        ),
        ("pip", "ERROR: No matching distribution found for mcp-x==1.0", "E404"),
        (
            "docker",
            'Error response from daemon: Get "https://ghcr.io/v2/": dial tcp: lookup ghcr.io: no such host',
            "ENOTFOUND",
        ),
    ],
)
def test_uv_pip_and_docker_causes_are_read_from_their_error_lines(runner: str, line: str, code: str) -> None:
    found = read_failure(runner, line)
    assert found is not None and found.code == code


def test_the_error_names_the_package_and_the_registry_without_its_credentials() -> None:
    package = ("pypi", "--default-index", "https://me:hunter2@pypi.example.com:8443/simple", "mcp-x==1.0")
    assert registry_of("uvx", package) == "https://pypi.example.com:8443"
    assert registry_of("npx", ("npm", "mcp-x@1.0")) == "the npm registry"
    failure = read_failure("uvx", "  cause: Connection refused (os error 111)")
    assert failure is not None
    error = download_failed("uvx", package, failure)
    assert error.code == "download_failed"
    assert error.message == (
        "Could not download mcp-x==1.0 from https://pypi.example.com:8443: nothing answers there (connection refused)."
    )
    assert error.details["cause"] == "nothing answers there (connection refused)"
    assert "hunter2" not in str(error.to_dict())


def _uv_dir() -> Path | None:
    try:
        from uv import find_uv_bin

        return Path(find_uv_bin()).parent
    except (ImportError, FileNotFoundError):
        return None


@pytest.mark.anyio
@pytest.mark.skipif(_uv_dir() is None, reason="needs the uv wheel")
async def test_a_real_uvx_fetch_from_a_closed_port_fails_with_the_cause_uv_gave(tmp_path: Path) -> None:
    uv_dir = _uv_dir()
    assert uv_dir is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("uv", "uvx"):
        (bin_dir / tool).symlink_to(uv_dir / tool)
    home = tmp_path / "home"
    (home / ".config" / "uv").mkdir(parents=True)
    (home / ".config" / "uv" / "uv.toml").write_text('python-downloads = "never"\n')
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "LANG": "C.UTF-8"}
    index = closed_port_url() + "/simple"
    spec = LaunchSpec(
        command="uvx",
        args=["--default-index", index, "mcp-x==1.0"],
        package_type="pypi",
        identifier="mcp-x",
        runner="uvx",
    )
    fetcher = Fetcher(host_env=env, workdir=tmp_path / "work", prefetch=False)
    with anyio.fail_after(scaled(30)):
        state = await fetcher.fetch(spec)
    assert state is not None and state.ok is False
    error = state.error()
    assert error is not None and error.to_dict()["code"] == "download_failed"  # type: ignore[attr-defined]
    assert str(error) == (
        f"Could not download mcp-x==1.0 from {index.rsplit('/', 1)[0]}: nothing answers there (connection refused)."
    )
    assert not fetcher.is_warm(spec)


def test_a_reset_the_sandboxs_proxy_made_is_read_as_what_the_proxy_met() -> None:
    line = "npm http fetch GET http://127.0.0.1:4873/pkg attempt 1 failed with ECONNRESET"
    reset = read_failure("npx", line)
    assert reset is not None and reset.code == "ECONNRESET" and not reset.final
    refused = through_the_proxy(reset, ["127.0.0.1: Connection refused"])
    assert (refused.code, refused.final, refused.registry) == ("ECONNREFUSED", True, reset.registry)
    silent = through_the_proxy(reset, ["127.0.0.1: no answer in 10 s"])
    assert (silent.code, silent.final) == ("ETIMEDOUT", True)
    assert through_the_proxy(reset, []) == reset  # the proxy reached it: a reset of the registry's own


def test_a_refused_login_is_told_as_the_registry_needing_one_or_refusing_the_one_set() -> None:
    npm = read_failure("npx", "npm error code E401")
    assert npm is not None
    refused = for_a_login(npm, True, "your .npmrc")
    assert refused.final and refused.cause.startswith("the registry refused the credentials set for it")
    missing = for_a_login(npm, False, "your .npmrc")
    assert missing.cause == "the registry needs a login, and no credentials are set for it (in your .npmrc)"
    forbidden = read_failure("npx", "npm error code E403")
    assert forbidden is not None and "needs a login" in for_a_login(forbidden, False, "your .npmrc").cause
    refused_host = read_failure("npx", "npm error code ECONNREFUSED")
    assert refused_host is not None and for_a_login(refused_host, True, "your .npmrc") == refused_host


def test_uv_s_not_found_waits_for_its_hint_that_the_index_wanted_a_login() -> None:
    # uv says "not found" first, then why: its hint names the index's 401
    not_found = read_failure(
        "uvx", "  cause: Because mcp-x was not found in the package registry and you require mcp-x==1.0"
    )
    assert not_found is not None and not_found.code == "E404" and not not_found.final
    hint = read_failure(
        "uvx",
        "hint: An index URL (http://127.0.0.1:4000/simple) could not be queried due to a lack of valid "
        "authentication credentials (401 Unauthorized)",
    )
    assert hint is not None and hint.code == "E401" and hint.final and hint.registry == "http://127.0.0.1:4000"
    told = download_failed("uvx", ("pypi", "mcp-x==1.0"), for_a_login(hint, False, "your .netrc"))
    assert str(told) == (
        "Could not download mcp-x==1.0 from http://127.0.0.1:4000: the registry needs a login, "
        "and no credentials are set for it (in your .netrc)."
    )
    pip = read_failure("pip", "ERROR: No matching distribution found for mcp-x==1.0")
    assert pip is not None and pip.final  # pip says no more after it
