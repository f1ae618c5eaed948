"""``mcp-setup mcp`` (a real subprocess, the SDK client) shows an OAuth sign-in: URL-mode
elicitation to the sign-in page on a classic session; on a 2026-07-28 session (no server
requests) an input-required answer whose URL-mode elicitation carries the link (#29 item 7), or,
for a client without URL elicitation, the result. Either way the ref then tests and installs, and no token
crosses the wire or reaches the face's log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import mcp_types as types
import pytest

from tests.fakes.oauth_server import OAuthPair, approve_over_http, remote_server_json, serve_oauth_pair
from tests.helpers.mcp_face import Recorder, call, elicitation_ids, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME = "io.test/notes"


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


def env_for(tmp_path: Path, pair: OAuthPair) -> dict[str, str]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
    return face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))


def assert_no_token(pair: OAuthPair, *texts: str) -> None:
    tokens = pair.provider.issued_access + pair.provider.issued_refresh
    assert tokens
    for token in tokens:
        assert all(token not in text for text in texts)


async def install_with(client: Any, ref: str) -> dict[str, Any]:
    tested = await call(client, "mcp_setup_test_connection", {"qualified_name": NAME, "oauth_ref": ref})
    assert {t["name"] for t in tested["tools"]} == {"echo", "whoami"}, tested
    installed = await call(client, "mcp_setup_install_and_connect", {"qualified_name": NAME, "oauth_ref": ref})
    assert installed["status"] == "connected", installed
    return installed


async def test_a_classic_client_is_sent_to_the_sign_in_page_by_url_elicitation(tmp_path: Path, pair: OAuthPair) -> None:
    asked: list[Any] = []
    landed: list[int] = []

    async def sign_in(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        landed.append(await approve_over_http(params.url))
        return types.ElicitResult(action="accept")

    recorder, stderr = Recorder(), tmp_path / "stderr.log"
    with anyio.fail_after(scaled(90)):
        async with mcp_setup_client(
            tmp_path, stderr, recorder, env=env_for(tmp_path, pair), elicitation_callback=sign_in
        ) as client:
            first = await call(client, "mcp_setup_test_connection", {"qualified_name": NAME})
            assert first["error"]["code"] == "oauth_required"
            out = await call(client, "mcp_setup_authorize", {"qualified_name": NAME})
            assert out["status"] == "authorized" and out["ref"].startswith("secret://"), out
            assert "url" not in out  # the link went to the user, not to the agent
            (params,) = asked
            host = urlsplit(pair.issuer).netloc
            assert params.mode == "url" and urlsplit(params.url).netloc == host
            assert f"Sign in to {NAME} at {host}" in params.message and "notes:read" in params.message
            assert landed == [200]
            assert elicitation_ids(recorder) == ([params.elicitation_id], [params.elicitation_id])  # complete, once
            await install_with(client, out["ref"])
    assert_no_token(pair, recorder.text(), stderr.read_text())


async def test_a_2026_session_signs_in_through_an_input_required_answer_and_the_model_sees_no_link(
    tmp_path: Path, pair: OAuthPair
) -> None:
    asked: list[Any] = []

    async def sign_in(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        assert await approve_over_http(params.url) == 200
        return types.ElicitResult(action="accept")

    recorder, stderr = Recorder(), tmp_path / "stderr.log"
    with anyio.fail_after(scaled(90)):
        async with mcp_setup_client(
            tmp_path, stderr, recorder, env=env_for(tmp_path, pair), mode="auto", elicitation_callback=sign_in
        ) as client:
            assert client.protocol_version == "2026-07-28"
            out = await call(client, "mcp_setup_authorize", {"qualified_name": NAME})
            assert out["status"] == "authorized" and out["ref"].startswith("secret://"), out
            assert out["scopes"] == ["notes:read"] and "url" not in out
            (params,) = asked
            assert params.mode == "url"
            assert urlsplit(params.url).netloc == urlsplit(pair.issuer).netloc and "notes:read" in params.message
            await install_with(client, out["ref"])
    assert '"input_required"' in recorder.text()
    # The authorization URL (its state) went to the person only: no result the model reads holds it.
    state = parse_qs(urlsplit(params.url).query)["state"][0]
    results = [m for m in recorder.messages if '"result"' in m and '"content"' in m]
    assert results and not any(state in m or urlsplit(pair.issuer).netloc + "/authorize" in m for m in results)
    assert state not in stderr.read_text()
    assert_no_token(pair, recorder.text(), stderr.read_text())


async def test_a_2026_client_without_url_elicitation_gets_the_sign_in_link_in_the_result(
    tmp_path: Path, pair: OAuthPair
) -> None:
    recorder, stderr = Recorder(), tmp_path / "stderr.log"
    with anyio.fail_after(scaled(90)):
        async with mcp_setup_client(tmp_path, stderr, recorder, env=env_for(tmp_path, pair), mode="auto") as client:
            out = await call(client, "mcp_setup_authorize", {"qualified_name": NAME})
            assert out["status"] == "pending", out
            assert urlsplit(out["url"]).netloc == urlsplit(pair.issuer).netloc and "open the link" in out["message"]
            assert await approve_over_http(out["url"]) == 200
            while True:  # the code is exchanged after the redirect landed: each call is a round trip
                tested = await call(
                    client, "mcp_setup_test_connection", {"qualified_name": NAME, "oauth_ref": out["ref"]}
                )
                if (tested.get("error") or {}).get("code") != "secret_pending":
                    break
            assert tested.get("ok") is not False, tested
    assert_no_token(pair, recorder.text(), stderr.read_text())
