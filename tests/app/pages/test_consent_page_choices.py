"""The one-time consent page draws the consent's choices as radio buttons, the default picked,
and what the person picks is what is approved. Over real HTTP against a running SecretPageServer."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import httpx
import pytest

from app.pages.server import SecretPageServer
from registry_clients.models import RequiredKey
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.prompts import PromptBroker
from setup_agent.secrets.refs import SecretRefStore
from setup_agent.setup.consent import ConsentBroker, PendingConsent, build_consent_request
from setup_agent.setup.consent_choices import choices_for
from tests.helpers.timeouts import scaled


@pytest.fixture
def served() -> Iterator[tuple[SecretPageServer, ConsentBroker, httpx.Client]]:
    consents = ConsentBroker(ttl_seconds=600)
    with SecretPageServer(PromptBroker(SecretRefStore(ttl_seconds=600)), consents=consents) as server:
        with httpx.Client(timeout=scaled(5), trust_env=False) as http:
            yield server, consents, http


def _open_install(consents: ConsentBroker) -> PendingConsent:
    spec = LaunchSpec(command="writer", args=["--serve"], package_type="npm", identifier="writer")
    request = build_consent_request(
        server="io.test/writer",
        version="1.0",
        spec=spec,
        keys=[RequiredKey(name="REGION")],
        values={"REGION": "eu"},
        action="install",
    )
    return consents.open(dataclasses.replace(request, choices=choices_for("install")))


def test_the_page_asks_whether_it_may_ask_your_ai_to_write_text_with_the_default_picked(served) -> None:
    server, consents, http = served
    pending = _open_install(consents)
    page = http.get(server.consent_url(pending.consent_id)).text
    assert "<legend>May ask your AI to write text</legend>" in page
    assert '<input type="radio" name="choice.sampling" value="no"> No' in page
    assert '<input type="radio" name="choice.sampling" value="text" checked> Yes, without tools' in page
    assert '<input type="radio" name="choice.sampling" value="tools"> Yes, with tools' in page


def test_the_option_the_person_picks_is_what_is_approved(served) -> None:
    server, consents, http = served
    pending = _open_install(consents)
    url = f"{server.base_url}/secrets/consents/{pending.consent_id}"
    key = server.capabilities.issue(pending.consent_id, "consent")
    answer = http.post(
        url, data={"t": key, "action": "approve", "choice.sampling": "tools"}, headers={"Origin": server.base_url}
    )
    assert answer.status_code == 200 and "Approved" in answer.text
    assert consents.decision(pending.request).choices == {"sampling": "tools"}
