"""Consent through ``mcp-setup mcp``: URL elicitation to the one-time consent page, as the user.

The agent suggests its own listener as ``jira_host``; the user sees that suggestion on the
page, changes it to the real host, and approves. The secret reaches only the real host, and
the canary appears nowhere: not on the page, not in any JSON-RPC frame, not in the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp_types as types
import pytest

from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.consent import JIRA, Listener, jira_entry
from tests.helpers.mcp_face import Browser, Recorder, call, elicitation_ids, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled
from tests.stub_server.http_server import serve_http_stub, sha256_hex

pytestmark = pytest.mark.anyio


class User:
    """Answers secret pages with the canary and consent pages with an approval (and an edit)."""

    def __init__(self, secret: str, edits: dict[str, str]) -> None:
        self.secret = secret
        self.edits = edits
        self.pages: list[str] = []
        self.consent_pages: list[str] = []
        self.keys: list[str] = []  # every link key the person was shown

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        url = params.url
        token = parse_qs(urlsplit(url).query)["t"][0]
        self.keys.append(token)
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        async with httpx.AsyncClient(timeout=scaled(10), trust_env=False) as http:
            page = await http.get(url)
            assert page.status_code == 200, page.text
            self.pages.append(page.text)
            if "/secrets/consents/" in url:
                self.consent_pages.append(page.text)
                form = {"t": token, "action": "approve", **{f"setting.{k}": v for k, v in self.edits.items()}}
            else:
                form = {"t": token, "action": "submit", "value": self.secret}
            answer = await http.post(url.split("?", 1)[0], data=form, headers={"Origin": origin})
            assert answer.status_code == 200, answer.text
            self.pages.append(answer.text)
        return types.ElicitResult(action="accept")


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: a 2026-07-28 session, input-required answers (#29 item 7)
async def test_the_user_approves_on_the_elicitation_page_and_their_host_is_used(
    tmp_path: Path, canary: str, mode: str
) -> None:
    with serve_http_stub(expected_sha256=sha256_hex(f"Bearer {canary}")) as real_url:
        real_host = real_url.split("/")[2]
        async with Listener() as evil:
            with FakeOfficialRegistry([jira_entry()]) as registry:
                env = face_env(
                    tmp_path,
                    MCP_SETUP_REGISTRIES="official",
                    MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
                    MCP_SETUP_CONSENT="ask",
                )
                user = User(canary, {"jira_host": real_host})
                recorder = Recorder()
                stderr = tmp_path / "stderr.log"
                with anyio.fail_after(scaled(90)):
                    async with mcp_setup_client(
                        tmp_path, stderr, recorder, elicitation_callback=user, env=env, mode=mode
                    ) as client:
                        assert (client.protocol_version == "2026-07-28") == (mode == "auto")
                        secret = await call(
                            client, "mcp_setup_request_secret", {"key_name": "JIRA_TOKEN", "prompt": "Token"}
                        )
                        args = {
                            "qualified_name": JIRA,
                            "env_refs": {"JIRA_TOKEN": secret["ref"]},
                            "env": {"jira_host": evil.host},
                        }
                        tested = await call(client, "mcp_setup_test_connection", args)
                        assert tested.get("ok") is True, tested
                        installed = await call(client, "mcp_setup_install_and_connect", args)
                        assert installed["status"] == "connected", installed
    # One approval per install: the test's covers it (its page says so), and the user's host stands
    # (the secret reached only it, below).
    assert len(user.consent_pages) == 1 and "no second question" in user.consent_pages[0]
    assert ('"input_required"' in recorder.text()) == (mode == "auto")
    # 2025-11-25: the secret page and the consent page each end with notifications/elicitation/complete
    # for its elicitation; 2026-07-28 removed it (the retry is the signal).
    asked, done = elicitation_ids(recorder)
    assert (len(asked), done) == ((0, []) if mode == "auto" else (2, asked))
    page = user.consent_pages[0]
    assert "Bearer &lt;your JIRA_TOKEN&gt;" in page and f"http://{evil.host}/mcp" in page  # templates in words
    assert evil.connections == 0 and canary.encode() not in evil.received
    for text in (*user.pages, recorder.text(), stderr.read_text()):
        assert canary not in text
    # The consent link went to the person (URL elicitation), never into a result the model reads.
    results = [m for m in recorder.messages if '"result"' in m and '"content"' in m]
    assert results and user.keys
    for message in results:
        assert "/secrets/consents/" not in message and not any(key in message for key in user.keys)
    assert not any(key in stderr.read_text() for key in user.keys)  # nor a log line


async def test_a_client_without_url_elicitation_gets_consent_required_and_no_approval_link(
    tmp_path: Path, canary: str
) -> None:
    with FakeOfficialRegistry([jira_entry()]) as registry:
        env = face_env(
            tmp_path,
            MCP_SETUP_REGISTRIES="official",
            MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
            MCP_SETUP_CONSENT="ask",
        )
        recorder = Recorder()
        with anyio.fail_after(scaled(60)):
            async with mcp_setup_client(tmp_path, tmp_path / "stderr.log", recorder, env=env) as client:
                secret = await call(client, "mcp_setup_request_secret", {"key_name": "JIRA_TOKEN", "prompt": "Token"})
                await Browser().submit(secret["url"], canary)
                args = {
                    "qualified_name": JIRA,
                    "env": {"jira_host": "127.0.0.1:9"},
                    "env_refs": {"JIRA_TOKEN": secret["ref"]},
                }
                result = await call(client, "mcp_setup_install_and_connect", args)
    assert result["ok"] is False and result["error"]["code"] == "consent_required", result
    assert "mcp-setup approve" in result["error"]["message"]  # where the user can approve it
    # A link, id or key given to the agent would let the agent approve its own request.
    assert result["error"]["details"] == {"status": "pending"} and "/consents/" not in recorder.text()
    assert canary not in recorder.text()
