"""A Smithery-hosted remote's ``smithery_api_key``: the user is told it is their Smithery API key
and where to get one; the configured Smithery key never shows in a result, an error or a log."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from registry_clients.serverjson import parse_server_json
from registry_clients.smithery import smithery_detail
from setup_agent.setup.service import CallContext
from tests.fakes.smithery_registry import FakeSmitheryRegistry
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.anyio

OFFICIAL = FIXTURES / "registry" / "official" / "servers_sample_2025-12-18.json"
WHERE = "https://smithery.ai/account/api-keys"


def _official(name: str) -> dict:
    for item in json.loads(OFFICIAL.read_text()):
        if (item.get("server") or item)["name"] == name:
            return item
    raise LookupError(name)


def test_an_official_entry_hosted_by_smithery_asks_for_the_smithery_api_key_by_that_name() -> None:
    detail = parse_server_json(_official("ai.smithery/222wcnm-bilistalkermcp"), source="official")
    (key,) = detail.packages[0].required_keys
    assert key.name == "smithery_api_key" and key.secret and key.provided_by == "smithery"
    assert key.description.startswith("Your Smithery API key") and WHERE in key.description


def test_a_host_that_only_ends_like_smithery_gets_no_smithery_key() -> None:
    detail = smithery_detail(
        {
            "qualifiedName": "@x/y",
            "displayName": "Y",
            "description": None,
            "remote": True,
            "connections": [{"type": "http", "deploymentUrl": "https://evilsmithery.ai/mcp", "configSchema": {}}],
        }
    )
    (remote,) = detail.packages
    assert remote.headers == {} and remote.required_keys == []


async def test_a_smithery_remote_describes_the_smithery_key_and_the_configured_key_shows_nowhere(
    new_runtime, tmp_path: Path, memory_keyring, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeSmitheryRegistry(api_key=canary) as fake:
        settings = Settings(home=tmp_path, registries="smithery", smithery_url=fake.url, smithery_api_key=canary)
        runtime = new_runtime(settings, keyring_backend=memory_keyring)
        try:
            detail = await runtime.service.call(
                "mcp_setup_get", {"qualified_name": "smithery-ai/github"}, CallContext()
            )
            (remote,) = detail["packages"]
            keys = {k["name"]: k for k in remote["keys"]}
            assert keys["smithery_api_key"]["secret"] is True
            assert "Smithery API key" in keys["smithery_api_key"]["description"]
            assert WHERE in keys["smithery_api_key"]["description"]
            failed = await runtime.service.call(
                "mcp_setup_test_connection", {"qualified_name": "smithery-ai/github"}, CallContext()
            )
            # the configured key fills smithery_api_key: only the server's own key is missing
            assert failed["ok"] is False and "githubPersonalAccessToken" in failed["error"]["message"]
            assert "smithery_api_key" not in failed["error"]["message"]
            refused = await runtime.service.call(
                "mcp_setup_test_connection",
                {"qualified_name": "smithery-ai/github", "env": {"smithery_api_key": canary}},
                CallContext(),
            )
            assert refused["ok"] is False
        finally:
            await runtime.aclose()
    assert fake.requests  # the key was used, as Authorization, with the registry
    for text in (json.dumps(detail), json.dumps(failed), json.dumps(refused), caplog.text):
        assert canary not in text


async def test_with_a_smithery_key_configured_a_smithery_remote_is_filled_in_and_never_asked_for(
    new_runtime, tmp_path: Path, memory_keyring, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    from setup_agent.launch import materialize, remote_endpoint
    from setup_agent.setup import TestRequest

    caplog.set_level(logging.DEBUG)
    with FakeSmitheryRegistry(api_key=canary) as fake:
        settings = Settings(home=tmp_path, registries="smithery", smithery_url=fake.url, smithery_api_key=canary)
        runtime = new_runtime(settings, keyring_backend=memory_keyring)
        try:
            detail = await runtime.service.call(
                "mcp_setup_get", {"qualified_name": "smithery-ai/github"}, CallContext()
            )
            (key,) = [k for k in detail["required_env_keys"] if k["name"] == "smithery_api_key"]
            assert key["required"] is False and key["provided"] is True and "do not request it" in key["note"]

            async def progress(*_a: object, **_k: object) -> None:
                return None

            token = runtime.refs.mint("githubPersonalAccessToken", "ghp_" + "x" * 36)
            request = TestRequest(qualified_name="smithery-ai/github", env_refs={"githubPersonalAccessToken": token})
            prepared = await runtime.service.preparer.prepare(request, tmp_path / "work", progress)  # type: ignore[arg-type]
            launch = remote_endpoint(materialize(prepared.spec, prepared.values))  # what the remote receives
            assert launch.url and launch.url.startswith("https://server.smithery.ai/")
            assert launch.headers == {"Authorization": f"Bearer {canary}"}  # to Smithery's own host, as the bearer only
            assert canary not in launch.url
        finally:
            await runtime.aclose()
    for text in (json.dumps(detail), caplog.text):
        assert canary not in text


async def test_a_server_that_also_wants_a_setting_named_like_the_smithery_key_gets_no_fill(preparer) -> None:
    # Its configSchema names a setting smithery_api_key too: that one goes into the URL's query,
    # which Smithery passes on to the third-party server, so the configured key is not filled in.
    def remote(config_schema: dict) -> Any:
        (option,) = smithery_detail(
            {
                "qualifiedName": "@x/y",
                "displayName": "Y",
                "description": None,
                "remote": True,
                "connections": [
                    {
                        "type": "http",
                        "deploymentUrl": "https://server.smithery.ai/@x/y/mcp",
                        "configSchema": config_schema,
                    }
                ],
            }
        ).packages
        return option

    colliding = remote(
        {
            "type": "object",
            "required": ["smithery_api_key"],
            "properties": {"smithery_api_key": {"type": "string", "description": "Your key"}},
        }
    )
    assert preparer.fillable(colliding, list(colliding.required_keys)) == set()
    plain = remote({})
    assert preparer.fillable(plain, list(plain.required_keys)) == {"smithery_api_key"}


@pytest.fixture
async def preparer(new_runtime, tmp_path: Path, memory_keyring, canary: str):
    """The Preparer of a runtime whose configured Smithery key is ``canary``."""
    runtime = new_runtime(
        Settings(home=tmp_path, registries="local", smithery_api_key=canary), keyring_backend=memory_keyring
    )
    try:
        yield runtime.service.preparer
    finally:
        await runtime.aclose()


def smithery_key():
    from registry_clients.models import RequiredKey

    return RequiredKey(name="smithery_api_key", secret=True, provided_by="smithery")


async def test_the_configured_smithery_key_is_never_sent_to_a_host_outside_smithery(preparer, canary: str) -> None:
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets import SecretValue

    key = smithery_key()
    values = preparer.values([key], {}, {}, fill={"smithery_api_key"})
    assert values == {"smithery_api_key": SecretValue(canary)}  # filled in, masked until the launch
    elsewhere = LaunchSpec(
        transport="streamable-http", url="https://${host}/mcp", headers={"Authorization": "Bearer ${smithery_api_key}"}
    )
    with pytest.raises(Exception) as refused:
        preparer.refuse_foreign_destination([key], {**values, "host": "attacker.example"}, elsewhere)
    assert refused.value.code == "invalid_input" and canary not in str(refused.value)  # type: ignore[attr-defined]
    preparer.refuse_foreign_destination([key], {**values, "host": "server.smithery.ai"}, elsewhere)


async def test_the_smithery_key_is_sent_only_as_the_one_bearer_header_even_when_carried_over_by_an_update(
    preparer, canary: str
) -> None:
    from setup_agent.launch.spec import LaunchSpec

    key = smithery_key()
    values = {"smithery_api_key": canary}  # as `mcp-setup update` brings the stored value back
    bearer = {"Authorization": "Bearer ${smithery_api_key}"}
    url = "https://server.smithery.ai/@x/y/mcp"
    preparer.refuse_foreign_destination([key], values, LaunchSpec(transport="streamable-http", url=url, headers=bearer))
    for elsewhere in (
        LaunchSpec(transport="streamable-http", url=url + "?key=${smithery_api_key}", headers=bearer),
        LaunchSpec(transport="streamable-http", url=url, headers={**bearer, "X-Key": "${smithery_api_key}"}),
        LaunchSpec(transport="streamable-http", url=url, headers={**bearer, "authorization": "${smithery_api_key}"}),
    ):
        with pytest.raises(Exception) as refused:
            preparer.refuse_foreign_destination([key], values, elsewhere)
        assert refused.value.code == "invalid_input" and canary not in str(refused.value)  # type: ignore[attr-defined]
