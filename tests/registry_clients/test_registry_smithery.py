"""SmitheryRegistry against the fake Smithery registry over real HTTP."""

from __future__ import annotations

import logging
import secrets

import pytest

from registry_clients import RegistryAuthFailed, RegistryNotFound, SmitheryRegistry
from registry_clients.smithery import smithery_detail
from tests.fakes.smithery_registry import DEFAULT_API_KEY, FakeSmitheryRegistry
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.anyio


async def test_search_with_a_key_pages_through_smithery_summaries(smithery_fake: FakeSmitheryRegistry) -> None:
    registry = SmitheryRegistry(smithery_fake.url, api_key=DEFAULT_API_KEY)
    try:
        page = await registry.search("demo", 2, 4)
        github = await registry.search("github", 1, 10)
    finally:
        await registry.aclose()
    assert [s.qualified_name for s in page.servers] == ["demo/tool-5", "demo/tool-6", "demo/tool-7", "demo/tool-8"]
    assert page.total_pages == 3
    assert smithery_fake.requests[0].query == {"q": "demo", "page": "2", "pageSize": "4"}
    assert all(r.authorized for r in smithery_fake.requests)
    (summary,) = github.servers
    assert (summary.display_name, summary.source, summary.verified, summary.remote) == (
        "GitHub",
        "smithery",
        True,
        True,
    )
    assert summary.homepage == "https://smithery.ai/server/smithery-ai/github"


async def test_get_encodes_a_name_with_at_and_slash_as_one_segment_and_maps_a_bundle(smithery_fake) -> None:
    registry = SmitheryRegistry(smithery_fake.url, api_key=DEFAULT_API_KEY)
    try:
        detail = await registry.get("@acme/weather")
    finally:
        await registry.aclose()
    assert smithery_fake.requests[-1].raw_path == "/servers/%40acme%2Fweather"
    (bundle,) = detail.packages
    assert (bundle.id, bundle.type, bundle.transport, bundle.runtime_hint) == ("mcpb", "mcpb", "stdio", "node")
    assert bundle.identifier == "https://bundles.example.com/acme/weather-1.2.0.mcpb"
    keys = {k.name: k for k in bundle.required_keys}
    assert [k for k in keys if keys[k].required] == ["units", "auth.token", "dbPass"]
    optional = {k: keys[k].default for k in keys if not keys[k].required}  # offered too (issue 26 item 10)
    assert optional == {"auth.region": "eu", "debug": "false", "optionalNote": None}
    assert keys["debug"].choices == ["true", "false"]
    assert keys["units"].choices == ["metric", "imperial"] and keys["units"].secret is False
    assert keys["auth.token"].secret is True  # name contains "token"
    assert keys["dbPass"].secret is True  # format: password
    assert {k.kind for k in keys.values()} == {"user_config"}


async def test_an_http_connection_becomes_a_streamable_http_remote_with_templated_config(smithery_fake) -> None:
    registry = SmitheryRegistry(smithery_fake.url, api_key=DEFAULT_API_KEY)
    try:
        current = await registry.get("smithery-ai/github")
        legacy = await registry.get("exa")
    finally:
        await registry.aclose()
    (remote,) = current.packages
    assert (remote.type, remote.transport) == ("remote", "streamable-http")
    assert remote.url == (
        "https://server.smithery.ai/smithery-ai/github/mcp"
        "?githubPersonalAccessToken={githubPersonalAccessToken}&readOnly={readOnly}"
    )
    assert remote.headers == {"Authorization": "Bearer {smithery_api_key}"}
    keys = {k.name: (k.kind, k.secret, k.required) for k in remote.required_keys}
    assert keys == {
        "smithery_api_key": ("header", True, True),
        "githubPersonalAccessToken": ("url_variable", True, True),
        "readOnly": ("url_variable", False, False),
    }  # optional: offered, with its default
    # Legacy shape: connection "url", a header-borne key, a stdio connection without a bundle (skipped).
    assert [p.id for p in legacy.packages] == ["remote"]
    (old,) = legacy.packages
    assert old.url == "https://server.smithery.ai/exa/mcp?profile={profile}"
    assert old.headers["x-exa-api-key"] == "{exaApiKey}"
    assert {k.name: k.kind for k in old.required_keys}["exaApiKey"] == "header"


def test_a_legacy_server_level_deployment_url_is_used_when_the_connection_has_none() -> None:
    detail = smithery_detail(
        {
            "qualifiedName": "@old/thing",
            "displayName": "Old",
            "description": None,
            "remote": True,
            "deploymentUrl": "https://old.example.com/mcp",
            "connections": [
                {
                    "type": "http",
                    "configSchema": {
                        "required": ["auth"],
                        "properties": {
                            "auth": {
                                "type": "object",
                                "required": ["secretWord"],
                                "properties": {"secretWord": {"type": "string"}},
                            }
                        },
                    },
                }
            ],
        }
    )
    (remote,) = detail.packages
    assert remote.url == "https://old.example.com/mcp?auth.secretWord={auth.secretWord}"
    assert remote.headers == {}  # not Smithery-hosted: no Smithery bearer header
    assert [(k.name, k.secret) for k in remote.required_keys] == [("auth.secretWord", True)]
    assert detail.description == ""


async def test_an_unknown_server_raises_registry_not_found(smithery_fake) -> None:
    registry = SmitheryRegistry(smithery_fake.url, api_key=DEFAULT_API_KEY)
    try:
        with pytest.raises(RegistryNotFound, match="Server not found"):
            await registry.get("nobody/nothing")
    finally:
        await registry.aclose()


async def test_without_a_key_search_fails_before_any_request_with_the_setup_hint(smithery_fake) -> None:
    registry = SmitheryRegistry(smithery_fake.url, api_key=None)
    try:
        with pytest.raises(RegistryAuthFailed) as info:
            await registry.search("x", 1, 10)
    finally:
        await registry.aclose()
    assert "Smithery API key missing or rejected" in str(info.value)
    assert "MCP_SETUP_SMITHERY_API_KEY" in str(info.value)
    assert info.value.source == "smithery" and smithery_fake.requests == []


async def test_a_rejected_key_fails_and_never_appears_in_messages_logs_or_reprs(
    smithery_fake, caplog: pytest.LogCaptureFixture
) -> None:
    canary = "canary-" + secrets.token_hex(16)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="httpx")  # an in-process CLI test before this one quiets httpx
    registry = SmitheryRegistry(smithery_fake.url, api_key=canary)
    try:
        with pytest.raises(RegistryAuthFailed) as search_info:
            await registry.search("github", 1, 10)
        with pytest.raises(RegistryAuthFailed) as get_info:
            await registry.get("smithery-ai/github")
    finally:
        await registry.aclose()
    assert [r.authorized for r in smithery_fake.requests] == [False, False]
    for exc in (search_info.value, get_info.value):
        assert "Smithery API key missing or rejected (HTTP 401)" in str(exc)
        assert canary not in str(exc) and canary not in repr(exc)
        assert exc.__context__ is None  # nothing chained that could carry the request
    assert canary not in repr(registry) and canary not in str(vars(registry))
    assert canary not in caplog.text
    assert any("HTTP Request" in r.getMessage() for r in caplog.records)  # httpx did log the calls


async def test_a_smithery_outage_is_a_registry_error_not_an_auth_error(smithery_fake) -> None:
    smithery_fake.down = True
    registry = SmitheryRegistry(smithery_fake.url, api_key=DEFAULT_API_KEY)
    try:
        with pytest.raises(Exception) as info:
            await registry.search("x", 1, 10)
    finally:
        await registry.aclose()
    assert type(info.value).__name__ == "RegistryError" and "500" in str(info.value)


def test_the_default_smithery_host_is_the_current_platform_api_not_the_legacy_registry() -> None:
    import json

    from app.settings import Settings
    from registry_clients.smithery import DEFAULT_SMITHERY_URL

    spec = json.loads((FIXTURES / "registry/smithery/api-openapi.json").read_text())
    assert DEFAULT_SMITHERY_URL == spec["servers"][0]["url"] == "https://api.smithery.ai"
    assert Settings().smithery_url == DEFAULT_SMITHERY_URL


async def test_asking_smithery_for_a_version_says_plainly_it_keeps_none_without_a_request(smithery_fake) -> None:
    registry = SmitheryRegistry(smithery_fake.url, api_key=DEFAULT_API_KEY)
    try:
        with pytest.raises(RegistryNotFound, match="Smithery keeps no versions"):
            await registry.get("nobody/nothing", version="1.0.0")
        assert smithery_fake.requests == []
    finally:
        await registry.aclose()
