"""The one-time consent page, over real HTTP against a running SecretPageServer with a ConsentBroker."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.pages.server import SecretPageServer
from registry_clients.models import RequiredKey
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.prompts import PromptBroker
from setup_agent.secrets.refs import SecretRefStore
from setup_agent.setup.consent import ConsentBroker, ConsentWarning, PendingConsent, build_consent_request
from tests.timeouts import scaled


@pytest.fixture
def served() -> Iterator[tuple[SecretPageServer, ConsentBroker, httpx.Client]]:
    consents = ConsentBroker(ttl_seconds=600)
    with SecretPageServer(PromptBroker(SecretRefStore(ttl_seconds=600)), consents=consents) as server:
        with httpx.Client(timeout=scaled(5), trust_env=False) as http:
            yield server, consents, http


def open_remote(consents: ConsentBroker, *, warnings: bool = False) -> PendingConsent:
    spec = LaunchSpec(transport="streamable-http", url="https://${tenant_host}/mcp", headers={"Authorization": "Bearer ${TOKEN}"},
                      package_type="remote", identifier="https://${tenant_host}/mcp")
    keys = [RequiredKey(name="tenant_host", kind="url_variable", description="Your <b>tenant</b>"),
            RequiredKey(name="TOKEN", secret=True, kind="header")]
    warns = [ConsentWarning("argv_secret", "TOKEN would be visible in ps")] if warnings else []
    request = build_consent_request(server="io.test/remote", version="1.0", spec=spec, keys=keys,
                                    values={"tenant_host": "evil.example"}, warnings=warns)
    return consents.open(request)


def post(server: SecretPageServer, http: httpx.Client, pending: PendingConsent, **form: str) -> httpx.Response:
    url = f"{server.base_url}/secrets/consents/{pending.consent_id}"
    return http.post(url, data={"t": server.token, **form}, headers={"Origin": server.base_url})


def test_the_page_shows_the_launch_the_secret_host_and_the_suggested_destination_escaped(served) -> None:
    server, consents, http = served
    pending = open_remote(consents)
    page = http.get(server.consent_url(pending.consent_id))
    assert page.status_code == 200
    assert "Bearer ${TOKEN}" in page.text and "https://${tenant_host}/mcp" in page.text
    assert "host evil.example" in page.text
    assert 'name="setting.tenant_host" value="evil.example"' in page.text
    assert "<b>tenant</b>" not in page.text and "&lt;b&gt;tenant&lt;/b&gt;" in page.text
    assert "<script" not in page.text


def test_the_users_edit_is_what_is_approved(served) -> None:
    server, consents, http = served
    pending = open_remote(consents)
    answer = post(server, http, pending, action="approve", **{"setting.tenant_host": "mine.example"})
    assert answer.status_code == 200 and "Approved" in answer.text
    assert consents.decision(pending.request).settings == {"tenant_host": "mine.example"}


def test_warnings_are_shown_and_approval_needs_the_box_ticked(served) -> None:
    server, consents, http = served
    pending = open_remote(consents, warnings=True)
    page = http.get(server.consent_url(pending.consent_id))
    assert "argv_secret" in page.text and 'name="accept_warnings"' in page.text
    refused = post(server, http, pending, action="approve")
    assert refused.status_code == 400 and "Accept the warnings" in refused.text
    assert consents.status(pending.consent_id) == "pending"
    assert post(server, http, pending, action="approve", accept_warnings="yes").status_code == 200
    assert consents.status(pending.consent_id) == "approved"


def test_deny_and_the_guards(served) -> None:
    server, consents, http = served
    pending = open_remote(consents)
    assert http.get(f"{server.base_url}/secrets/consents/{pending.consent_id}?t=wrong").status_code == 403
    foreign = http.post(f"{server.base_url}/secrets/consents/{pending.consent_id}",
                        data={"t": server.token, "action": "approve"}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403 and consents.status(pending.consent_id) == "pending"
    assert post(server, http, pending, action="deny").status_code == 200
    assert consents.status(pending.consent_id) == "denied"
    assert post(server, http, pending, action="approve").status_code == 410
