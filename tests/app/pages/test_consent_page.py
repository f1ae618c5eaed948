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
from setup_agent.setup import consent_document
from setup_agent.setup.consent import ConsentBroker, ConsentWarning, PendingConsent, build_consent_request
from tests.helpers.consent_page import open_remote
from tests.helpers.timeouts import scaled


@pytest.fixture
def served() -> Iterator[tuple[SecretPageServer, ConsentBroker, httpx.Client]]:
    consents = ConsentBroker(ttl_seconds=600)
    with SecretPageServer(PromptBroker(SecretRefStore(ttl_seconds=600)), consents=consents) as server:
        with httpx.Client(timeout=scaled(5), trust_env=False) as http:
            yield server, consents, http


def post(server: SecretPageServer, http: httpx.Client, pending: PendingConsent, **form: str) -> httpx.Response:
    url = f"{server.base_url}/secrets/consents/{pending.consent_id}"
    key = server.capabilities.issue(pending.consent_id, "consent")  # what consent_url's link carries
    return http.post(url, data={"t": key, **form}, headers={"Origin": server.base_url})


def test_the_page_shows_the_launch_the_secret_host_and_the_suggested_destination_escaped(served) -> None:
    server, consents, http = served
    pending = open_remote(consents)
    page = http.get(server.consent_url(pending.consent_id))
    assert page.status_code == 200
    # templates in words: a secret as "<your TOKEN>" (never its value), the address with the suggestion
    assert "Bearer &lt;your TOKEN&gt;" in page.text and "https://evil.example/mcp" in page.text
    assert "${" not in page.text and "{tenant_host}" not in page.text
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
    foreign = http.post(
        f"{server.base_url}/secrets/consents/{pending.consent_id}",
        data={"t": server.capabilities.issue(pending.consent_id, "consent"), "action": "approve"},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403 and consents.status(pending.consent_id) == "pending"
    assert post(server, http, pending, action="deny").status_code == 200
    assert consents.status(pending.consent_id) == "denied"
    assert post(server, http, pending, action="approve").status_code == 410


def _key(url: str) -> str:
    return url.rsplit("?t=", 1)[1]


def test_a_secret_entry_link_opens_no_consent_and_approves_nothing(served) -> None:
    """The finding of #22: the agent got the secret page's link and approved its own launch with it."""
    server, consents, http = served
    pending = open_remote(consents)
    prompt = server.broker.open("TOKEN", "Paste it")
    secret_key = _key(server.url_for(prompt))  # what an agent without URL elicitation is handed
    url = f"{server.base_url}/secrets/consents/{pending.consent_id}"
    assert http.get(url, params={"t": secret_key}).status_code == 403
    curl_like = http.post(url, data={"t": secret_key, "action": "approve", "accept_warnings": "yes"})  # no Origin
    assert curl_like.status_code == 403
    assert consents.status(pending.consent_id) == "pending"
    assert consents.decision(pending.request) is None


def test_a_consent_key_opens_its_own_consent_once_and_no_other(served) -> None:
    server, consents, http = served
    first, second = open_remote(consents), open_remote(consents, warnings=True)
    key = _key(server.consent_url(first.consent_id))
    other = f"{server.base_url}/secrets/consents/{second.consent_id}"
    assert http.post(other, data={"t": key, "action": "deny"}, headers={"Origin": server.base_url}).status_code == 403
    assert consents.status(second.consent_id) == "pending"
    mine = f"{server.base_url}/secrets/consents/{first.consent_id}"
    assert http.post(mine, data={"t": key, "action": "approve"}, headers={"Origin": server.base_url}).status_code == 200
    again = http.post(mine, data={"t": key, "action": "deny"}, headers={"Origin": server.base_url})
    assert again.status_code in (403, 404, 409) and consents.status(first.consent_id) == "approved"
    # and a consent key enters no secret
    prompt = server.broker.open("TOKEN", "Paste it")
    fresh = _key(server.consent_url(second.consent_id))
    typed = http.post(f"{server.base_url}/secrets/{prompt.prompt_id}", data={"t": fresh, "value": "v"})
    assert typed.status_code == 403 and server.broker.pending() == [prompt]


def test_the_user_may_widen_a_local_servers_sandbox_on_the_page_and_the_agent_cannot(served, tmp_path) -> None:
    """#23: an extra folder, or no network, chosen in the consent; never in the agent's arguments."""
    from setup_agent.setup.sandbox_choice import apply_sandbox_choice

    server, consents, http = served
    spec = LaunchSpec(
        command="npx",
        args=["-y", "some-server@1.0.0"],
        runner="npx",
        package_type="npm",
        identifier="some-server",
        version="1.0.0",
    )
    request = build_consent_request(
        server="io.test/local", version="1.0.0", spec=spec, keys=[], values={}, sandbox="bwrap"
    )
    assert request.widenable
    pending = consents.open(request)
    page = http.get(server.consent_url(pending.consent_id))
    assert 'name="sandbox.extra_path"' in page.text and 'name="sandbox.no_network"' in page.text
    folder = tmp_path / "notes"
    folder.mkdir()
    answer = post(
        server, http, pending, action="approve", **{"sandbox.extra_path": str(folder), "sandbox.no_network": "yes"}
    )
    assert answer.status_code == 200, answer.text
    decision = consents.decision(request)
    widened = apply_sandbox_choice(spec, decision.sandbox)
    assert widened.sandbox_grants == [str(folder.resolve())] and widened.sandbox_network is False
    # a remote has no sandbox of ours: nothing to widen, and no field for it
    remote = open_remote(consents)
    assert not remote.request.widenable
    assert "sandbox.extra_path" not in http.get(server.consent_url(remote.consent_id)).text
    refused = post(server, http, remote, action="approve", **{"sandbox.extra_path": str(folder)})
    assert refused.status_code == 400 and consents.status(remote.consent_id) == "pending"


def test_a_form_shown_again_after_an_error_keeps_the_tools_the_person_unticked(served) -> None:
    from setup_agent.launch.spec import LaunchSpec as Spec

    server, consents, http = served
    spec = Spec(transport="stdio", command="python3", args=["server.py"], package_type="stdio", identifier="server.py")
    tools = [
        {"name": "echo", "description": "Echo", "estimated_tokens": 40},
        {"name": "wipe", "description": "Wipe", "estimated_tokens": 30},
    ]
    request = build_consent_request(
        server="io.test/tools",
        version="1.0",
        spec=spec,
        keys=[],
        values={},
        action="install",
        warnings=[ConsentWarning("argv_secret", "visible in ps")],
        tools=tools,
    )
    pending = consents.open(request)
    shown = http.get(server.consent_url(pending.consent_id)).text
    assert 'name="tool.0" value="keep" checked' in shown and 'name="tool.1" value="keep" checked' in shown
    refused = post(
        server, http, pending, action="approve", **{"tool.0": "keep"}
    )  # wipe unticked, warnings not accepted
    assert refused.status_code == 400 and "Accept the warnings" in refused.text
    assert 'name="tool.0" value="keep" checked' in refused.text
    assert 'name="tool.1" value="keep">' in refused.text  # still unticked, as the person left it
    assert post(server, http, pending, action="approve", accept_warnings="yes", **{"tool.0": "keep"}).status_code == 200
    assert consents.decision(request).hidden_tools == {"wipe"}


def test_the_page_draws_the_consents_document_settings_first_one_sandbox_block_and_the_internals_folded(
    served,
) -> None:
    server, consents, http = served
    spec = LaunchSpec(
        command="python3",
        args=["${__dirname}/server.py"],
        package_type="mcpb",
        identifier="io.test/notes",
        version="1.0.0",
        env={"NOTES_KEY": "${NOTES_KEY}", "BUNDLE_MODE": "quiet"},
    )
    request = build_consent_request(
        server="io.test/notes",
        version="1.0.0",
        spec=spec,
        keys=[RequiredKey(name="NOTES_KEY", secret=True)],
        values={},
        action="install",
        sandbox="bwrap",
        asker="Claude Desktop",
    )
    pending = consents.open(request)
    page = http.get(server.consent_url(pending.consent_id)).text
    assert "Claude Desktop asked to install io.test/notes." in page
    titles = [s.title for s in consent_document(request).sections]
    assert titles[0] == "Your settings" and titles[-1] == "Technical details"
    at = [page.index(f"<h2>{t}</h2>") for t in titles[:-1]] + [page.index("<summary>Technical details</summary>")]
    assert at == sorted(at)  # the document's order
    folded = page[page.index("<details>") : page.index("</details>")]
    assert "BUNDLE_MODE=quiet" in folded and "BUNDLE_MODE" not in page[: page.index("<details>")]
    assert page.count("<h2>Sandbox</h2>") == 1 and "<dt>Sandbox</dt>" not in page
    assert "&lt;its own folder&gt;/server.py" in page and "${" not in page


def test_the_page_says_where_the_servers_tools_leave_the_context_budget(served) -> None:
    server, consents, http = served
    spec = LaunchSpec(transport="stdio", command="python3", args=["server.py"], package_type="stdio", identifier="s.py")
    request = build_consent_request(
        server="io.test/tools",
        version="1.0",
        spec=spec,
        keys=[],
        values={},
        action="install",
        tools=[{"name": "echo", "description": "Echo " * 400, "inputSchema": {"type": "object"}}],
        budget={"budget": 8000, "listed": 7600},
    )
    adds = request.tools[0]["estimated_tokens"]
    shown = http.get(server.consent_url(consents.open(request).consent_id)).text
    assert f"With them, AI clients are listed {7600 + adds:,} of your budget of 8,000 tokens." in shown
    assert "Past the budget, AI clients are listed the tools used most recently" in shown
