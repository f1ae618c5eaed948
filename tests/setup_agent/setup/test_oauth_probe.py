"""Detection: a remote that answers 401 with an OAuth challenge is ``oauth_required``, not ``rejected``."""

from __future__ import annotations

import pytest

from setup_agent.errors import OAuthRequired, ServerRejected
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from tests.fakes.oauth_server import serve_oauth_pair
from tests.helpers.timeouts import scaled
from tests.stub_server.http_server import serve_http_stub, sha256_hex

pytestmark = pytest.mark.anyio


async def test_a_remote_with_an_oauth_challenge_is_oauth_required_naming_its_metadata_and_next_tool() -> None:
    prober = Prober(Redactor(), timeout=scaled(20))
    with serve_oauth_pair() as pair:
        with pytest.raises(OAuthRequired) as info:
            await prober.probe(LaunchSpec(transport="streamable-http", url=pair.mcp_url), {})
    await prober.drain()
    err = info.value
    assert err.code == "oauth_required"
    assert err.details["next_tool"] == "mcp_setup_authorize"
    assert err.details["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    assert "mcp_setup_authorize" in err.message


async def test_a_401_without_resource_metadata_stays_rejected() -> None:
    prober = Prober(Redactor(), timeout=scaled(20))
    with serve_http_stub(expected_sha256=sha256_hex("Bearer right")) as url:
        with pytest.raises(ServerRejected):
            await prober.probe(LaunchSpec(transport="streamable-http", url=url), {})
    await prober.drain()
