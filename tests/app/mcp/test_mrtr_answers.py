"""How a 2026-07-28 session's input-required answers end (#29 item 7), with the SDK client over
stdio: a person who declines or dismisses the page in the client, or never finishes before the
timeout, gets the agent a clear tool result (a stable code, ``details.reason``, a sentence) and
leaves nothing open: the secret page and the consent page answer 410, the sign-in's loopback
listener is closed and every ref is unusable. And the canary: the secret, the pages' links and the
sign-in's URL and ``state`` reach only the elicitation the client shows the person, never a tool
result the model reads. (The 2025-11-25 completion notification is checked in the classic tests
of test_consent_mcp_face.py and test_oauth_mcp_face.py.)"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp_types as types
import pytest

from tests.fakes.oauth_server import OAuthPair, approve_over_http, remote_server_json, serve_oauth_pair
from tests.helpers.mcp_face import Browser, Recorder, call, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME = "io.test/notes"
KEY = "NOTES_API_KEY"


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


def env_for(tmp_path: Path, pair: OAuthPair, **extra: str) -> dict[str, str]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
    return face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), **extra)


class Person:
    """Answers each URL-mode elicitation with the next action, doing nothing on the page."""

    def __init__(self, *actions: str) -> None:
        self.actions = list(actions)
        self.urls: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        assert params.mode == "url" and getattr(params, "elicitation_id", None) is None  # removed at 2026-07-28
        self.urls.append(params.url)
        action = self.actions.pop(0)
        if action == "cancel on the page":
            assert (await Browser().submit(params.url, "", action="cancel")).status_code == 200
            action = "accept"
        return types.ElicitResult(action=action)


def refs_held(recorder: Recorder) -> list[str]:
    """The refs the face's signed requestStates name (the model never sees them)."""
    refs = []
    for message in recorder.messages:
        state = json.loads(message).get("result", {}).get("requestState")
        if state:
            body = json.loads(base64.urlsafe_b64decode(state.rsplit(".", 1)[0]))
            refs += [body["ref"]] if "ref" in body else []
    return refs


async def ended(client: Any, person: Person, recorder: Recorder, reasons: list[str]) -> None:
    """Ask for a secret, a test (a consent) and a sign-in; each answer says why it ended, and
    nothing it waited for is left open."""
    secret = await call(client, "mcp_setup_request_secret", {"key_name": KEY, "prompt": "Your notes key"})
    consent = await call(client, "mcp_setup_test_connection", {"qualified_name": NAME})
    sign_in = await call(client, "mcp_setup_authorize", {"qualified_name": NAME})
    answers = {"prompt_cancelled": secret, "consent_denied": consent, "oauth_denied": sign_in}
    for (code, out), reason in zip(answers.items(), reasons, strict=True):
        assert out["ok"] is False and out["error"]["code"] == code, out
        assert out["error"]["details"]["reason"] == reason and out["error"]["message"].startswith("The "), out
        assert "ref" not in out and "url" not in out
    assert all(KEY not in json.dumps(out) and NAME not in json.dumps(out) for out in answers.values())  # no echo
    page, consent_page, sign_in_url = person.urls
    async with httpx.AsyncClient(timeout=scaled(10), trust_env=False) as http:
        assert (await http.get(page)).status_code == 410  # "Request cancelled"
        assert (await http.get(consent_page)).status_code in (404, 410)  # denied: no longer open
        with pytest.raises(httpx.ConnectError):  # the redirect has nowhere to land
            await http.get(parse_qs(urlsplit(sign_in_url).query)["redirect_uri"][0])
    _, oauth_ref = refs_held(recorder)  # the prompt's ref went with its page (410 above)
    stale = await call(client, "mcp_setup_test_connection", {"qualified_name": NAME, "oauth_ref": oauth_ref})
    assert stale["error"]["code"] in ("secret_missing", "secret_expired"), stale


async def test_a_person_who_declines_or_dismisses_the_page_in_the_client_leaves_nothing_pending(
    tmp_path: Path, pair: OAuthPair
) -> None:
    person, recorder = Person("decline", "cancel", "decline"), Recorder()
    env = env_for(tmp_path, pair, MCP_SETUP_CONSENT="ask")
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(
            tmp_path, tmp_path / "stderr.log", recorder, env=env, mode="auto", elicitation_callback=person
        ) as client:
            assert client.protocol_version == "2026-07-28"
            await ended(client, person, recorder, ["decline", "cancel", "decline"])
            person.actions.append("cancel on the page")  # accepted in the client, then Cancel on the page
            again = await call(client, "mcp_setup_request_secret", {"key_name": KEY, "prompt": "Your notes key"})
            assert again["error"]["code"] == "prompt_cancelled" and again["error"]["details"] == {"reason": "cancel"}
            assert KEY not in json.dumps(again)


async def test_a_person_who_never_finishes_before_the_timeout_leaves_nothing_pending(
    tmp_path: Path, pair: OAuthPair
) -> None:
    person, recorder = Person("accept", "accept", "accept"), Recorder()  # opened the pages, did nothing there
    env = env_for(tmp_path, pair, MCP_SETUP_CONSENT="ask", MCP_SETUP_SECRET_PROMPT_TIMEOUT_SECONDS="1")
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(
            tmp_path, tmp_path / "stderr.log", recorder, env=env, mode="auto", elicitation_callback=person
        ) as client:
            await ended(client, person, recorder, ["timeout", "timeout", "timeout"])


async def test_the_secret_and_the_sign_in_link_reach_only_the_elicitation_never_a_tool_result(
    tmp_path: Path, pair: OAuthPair, canary: str
) -> None:
    browser, shown = Browser(), []

    async def person(context: Any, params: Any) -> types.ElicitResult:
        shown.append(params.url)
        if urlsplit(params.url).netloc == urlsplit(pair.issuer).netloc:
            assert await approve_over_http(params.url) == 200
        else:
            assert (await browser.submit(params.url, canary)).status_code == 200
        return types.ElicitResult(action="accept")

    recorder, stderr = Recorder(), tmp_path / "stderr.log"
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(
            tmp_path, stderr, recorder, env=env_for(tmp_path, pair), mode="auto", elicitation_callback=person
        ) as client:
            secret = await call(client, "mcp_setup_request_secret", {"key_name": KEY, "prompt": "Your notes key"})
            signed_in = await call(client, "mcp_setup_authorize", {"qualified_name": NAME})
            assert secret["status"] == "answered" and signed_in["status"] == "authorized", (secret, signed_in)
            tested = await call(
                client, "mcp_setup_test_connection", {"qualified_name": NAME, "oauth_ref": signed_in["ref"]}
            )
            assert tested.get("ok") is True, tested
    page, sign_in_url = shown
    state = parse_qs(urlsplit(sign_in_url).query)["state"][0]
    page_key = parse_qs(urlsplit(page).query)["t"][0]
    asked = [m for m in recorder.messages if '"input_required"' in m]
    results = [m for m in recorder.messages if '"content"' in m and '"result"' in m]
    assert len(asked) == 2 and results
    # What the person is shown travels in the input requests only ...
    assert json.dumps(page)[1:-1] in asked[0] and state in asked[1]
    # ... never in a result the model reads, nor the secret anywhere on the wire or in the log.
    for message in results:
        assert not any(
            s in message for s in (state, page_key, "/secrets/", urlsplit(pair.issuer).netloc + "/authorize")
        )
    assert canary not in recorder.text() and canary not in stderr.read_text()
    assert state not in stderr.read_text() and page_key not in stderr.read_text()
    assert "notifications/elicitation/complete" not in recorder.text()  # removed at 2026-07-28
