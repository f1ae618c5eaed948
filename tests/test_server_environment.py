"""What a server inherits from this machine: the CA and proxy settings it needs behind a
TLS-intercepting proxy, nothing else; a proxy URL's credentials are redacted wherever the
server (or an error) repeats them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.errors import ServerRejected
from setup_agent.launch.transport import minimal_environment, proxy_credentials
from tests.test_probe import stub_spec

pytestmark = pytest.mark.anyio

NETWORK = {
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
    "SSL_CERT_FILE": "/etc/corp/bundle.pem",
    "SSL_CERT_DIR": "/etc/corp/certs",
    "REQUESTS_CA_BUNDLE": "/etc/corp/bundle.pem",
    "PIP_CERT": "/etc/corp/bundle.pem",
    "UV_NATIVE_TLS": "true",
    "HTTPS_PROXY": "http://proxy.corp:3128",
    "http_proxy": "http://proxy.corp:3128",
    "NO_PROXY": "localhost,127.0.0.1",
    "no_proxy": "localhost,127.0.0.1",
}


def test_a_server_inherits_the_machines_ca_and_proxy_settings_and_no_other_variable() -> None:
    host = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        **NETWORK,
        "MCP_SETUP_SMITHERY_API_KEY": "smithery-key",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "PIP_INDEX_URL": "https://t@idx",
    }
    env = minimal_environment({"API_KEY": "from-the-store"}, host_env=host)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", **NETWORK, "API_KEY": "from-the-store"}


def test_the_credentials_in_a_proxy_url_are_what_gets_redacted() -> None:
    host = {
        "HTTPS_PROXY": "http://alice:s%40cret-pw@proxy.corp:3128",
        "http_proxy": "proxy.corp:3128",
        "ALL_PROXY": "socks5://tokenonly@proxy.corp:1080",
        "NO_PROXY": "a@b",
    }
    found = set(proxy_credentials(host))
    assert found == {
        ("alice:s%40cret-pw", "[secret:HTTPS_PROXY]"),
        ("s%40cret-pw", "[secret:HTTPS_PROXY]"),
        ("s@cret-pw", "[secret:HTTPS_PROXY]"),
        ("tokenonly", "[secret:ALL_PROXY]"),
    }


@pytest.mark.parametrize("sandbox", ["off", "auto"])
async def test_a_server_echoing_its_environment_shows_the_ca_path_but_not_the_proxy_password(
    tmp_path: Path, memory_keyring, canary: str, caplog: pytest.LogCaptureFixture, sandbox: str
) -> None:
    host = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
        "HTTPS_PROXY": f"http://alice:{canary}@proxy.corp:3128",
    }
    runtime = build_runtime(
        Settings(home=tmp_path / "home", registries="local", sandbox=sandbox),
        keyring_backend=memory_keyring,
        host_env=host,
    )
    try:
        with pytest.raises(ServerRejected) as err:  # the stub wants another key: it fails, quoting its stderr
            await runtime.prober.probe(stub_spec("expected-other", mode="echo_env"), {"STUB_API_KEY": "wrong-value"})
        text = repr(err.value.to_dict())
        assert "env NODE_EXTRA_CA_CERTS=/etc/corp/ca.pem" in text
        if runtime.prober.sandbox is not None and runtime.prober.sandbox.network_isolation().mechanism != "none":
            # Sandboxed with a network of its own: its proxy is mcp-setup's, the host's is never handed in.
            assert "env HTTPS_PROXY=http://127.0.0.1:" in text and "proxy.corp" not in text
        else:  # the host's proxy is inherited, its password redacted
            assert "env HTTPS_PROXY=http://[secret:HTTPS_PROXY]@proxy.corp:3128" in text
        assert canary not in text
        assert canary not in caplog.text
    finally:
        await runtime.aclose()
