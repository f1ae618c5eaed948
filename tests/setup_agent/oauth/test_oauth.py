"""OAuth sign-in through SetupService against a local authorization server and protected MCP server.

The browser is played over HTTP here (``approve_over_http``); tests/browser/test_oauth_browser.py
drives Chromium through the same flow.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest

from app.runtime import Runtime
from setup_agent.oauth.sign_ins import GRANT_KEY
from setup_agent.setup.service import CallContext
from tests.fakes.oauth_server import OAuthPair, approve_over_http, serve_oauth_pair
from tests.helpers.oauth_runtime import NAME, oauth_runtime
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


@pytest.fixture
async def runtime(tmp_path: Path, pair: OAuthPair, memory_keyring) -> AsyncIterator[Runtime]:
    async with oauth_runtime(tmp_path, pair, memory_keyring, sign_in_timeout=scaled(20), also=["io.test/other"]) as rt:
        yield rt


class Face:
    """A face that shows the sign-in and lets the 'user' act on the link; records what it saw."""

    def __init__(self, act: Any = approve_over_http) -> None:
        self.shown: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.act = act
        self.acted: asyncio.Task[Any] | None = None

    def ctx(self) -> CallContext:
        async def present(info: dict[str, Any]) -> dict[str, Any]:
            self.shown.append(info)
            self.acted = asyncio.create_task(self.act(info["url"]))
            return {"status": "shown"}

        async def progress(event: dict[str, Any]) -> None:
            self.events.append(event)

        return CallContext(installed_by="agent", present_authorization=present, on_progress=progress)


async def call(rt: Runtime, tool: str, face: Face | None = None, **args: Any) -> dict[str, Any]:
    return await rt.service.call(tool, args, (face or Face()).ctx())


async def signed_in(rt: Runtime, face: Face | None = None) -> str:
    face = face or Face()
    out = await call(rt, "mcp_setup_authorize", face, qualified_name=NAME)
    assert out["status"] == "authorized", out
    return out["ref"]


async def test_a_remote_that_wants_oauth_is_oauth_required_then_signs_in_and_installs(
    runtime: Runtime, pair: OAuthPair
) -> None:
    first = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME)
    assert first["error"]["code"] == "oauth_required"
    face = Face()
    out = await call(runtime, "mcp_setup_authorize", face, qualified_name=NAME)
    assert out["status"] == "authorized" and out["ref"].startswith("secret://")
    (info,) = face.shown  # the consent step: the sign-in service's host and the scopes, before the browser
    assert info["authorization_server"] == urlsplit(pair.issuer).netloc
    assert info["scopes"] == ["notes:read"] and "notes:read" in info["message"]
    query = parse_qs(urlsplit(info["url"]).query)
    assert query["resource"] == [pair.mcp_url] and query["code_challenge_method"] == ["S256"]
    tested = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, oauth_ref=out["ref"])
    assert {t["name"] for t in tested["tools"]} == {"echo", "whoami"}
    installed = await call(runtime, "mcp_setup_install_and_connect", qualified_name=NAME, oauth_ref=out["ref"])
    assert installed["status"] == "connected", installed
    result = await runtime.connections.call_tool(installed["server_id"], "whoami")
    assert result["content"][0]["text"] == "ok"
    again = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, oauth_ref=out["ref"])
    assert again["error"]["code"] == "already_installed"  # refused before the ref is even looked at
    await call(runtime, "mcp_setup_remove", server_id=installed["server_id"])
    again = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, oauth_ref=out["ref"])
    assert again["error"]["code"] == "secret_missing"  # an install uses the ref up


async def test_a_sign_in_ref_only_works_for_the_server_it_was_made_for(runtime: Runtime) -> None:
    ref = await signed_in(runtime)
    out = await call(runtime, "mcp_setup_test_connection", qualified_name="io.test/other", oauth_ref=ref)
    assert out["error"]["code"] == "secret_wrong_key"
    assert "mcp_setup_authorize" in out["error"]["message"]


async def test_tokens_appear_in_no_result_event_log_line_or_data_dir_byte(
    runtime: Runtime, pair: OAuthPair, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    face = Face()
    results = [await call(runtime, "mcp_setup_test_connection", face, qualified_name=NAME)]
    results.append(await call(runtime, "mcp_setup_authorize", face, qualified_name=NAME))
    ref = results[-1]["ref"]
    results.append(await call(runtime, "mcp_setup_test_connection", face, qualified_name=NAME, oauth_ref=ref))
    results.append(await call(runtime, "mcp_setup_install_and_connect", face, qualified_name=NAME, oauth_ref=ref))
    server_id = results[-1]["server_id"]
    pair.provider.expire_access_tokens()  # a 401, then a refresh: new tokens
    results.append(await runtime.connections.call_tool(server_id, "echo", {"text": "hi"}))
    results.append(await call(runtime, "mcp_setup_list_servers", face))
    pair.provider.revoke_refresh_tokens()
    pair.provider.expire_access_tokens()
    with pytest.raises(Exception):
        await runtime.connections.call_tool(server_id, "echo", {"text": "hi"})
    results.append(await call(runtime, "mcp_setup_list_servers", face, wait_seconds=5))
    results.append(await call(runtime, "mcp_setup_remove", face, server_id=server_id))
    tokens = pair.provider.issued_access + pair.provider.issued_refresh
    assert len(pair.provider.issued_access) >= 2 and pair.provider.refreshes >= 1
    outbound = json.dumps([results, face.shown, face.events]) + "\n".join(r.getMessage() for r in caplog.records)
    data = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
    for token in tokens:
        assert token not in outbound
        assert token.encode() not in data


async def test_an_expiring_token_is_renewed_before_use_and_the_new_one_is_stored(
    runtime: Runtime, pair: OAuthPair
) -> None:
    ref = await signed_in(runtime)
    installed = await call(runtime, "mcp_setup_install_and_connect", qualified_name=NAME, oauth_ref=ref)
    server_id = installed["server_id"]
    before = json.loads(runtime.store.values.env_values(server_id)[GRANT_KEY].reveal())
    runtime.sign_ins.clock = lambda: time.time() + 7200  # the access token (1 h) is about to expire
    server = runtime.store.servers.get(server_id)
    assert server is not None
    status = await runtime.connections.connect(server)
    assert status.status == "connected"
    assert pair.provider.refreshes == 1  # renewed before it was used, not after a 401
    after = json.loads(runtime.store.values.env_values(server_id)[GRANT_KEY].reveal())
    assert after["access_token"] != before["access_token"] and after["access_token"] == pair.provider.issued_access[-1]


async def test_a_revoked_refresh_token_makes_the_server_need_sign_in(
    runtime: Runtime, pair: OAuthPair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    ref = await signed_in(runtime)
    installed = await call(runtime, "mcp_setup_install_and_connect", qualified_name=NAME, oauth_ref=ref)
    server_id = installed["server_id"]
    pair.provider.expire_access_tokens()
    await runtime.connections.call_tool(server_id, "whoami")  # 401, renewed, answered
    assert pair.provider.refreshes == 1
    pair.provider.revoke_refresh_tokens()
    pair.provider.expire_access_tokens()
    with pytest.raises(Exception):
        await runtime.connections.call_tool(server_id, "whoami")
    status = await runtime.connections.wait_for_status(server_id, "needs_sign_in", timeout=scaled(10))
    assert "sign in again" in (status.reason or "")
    listed = await call(runtime, "mcp_setup_list_servers")
    assert listed["servers"][0]["status"] == "needs_sign_in"
    reason = listed["servers"][0]["reason"]  # what to do, in the order that works (install refuses a namesake)
    assert reason.index("mcp_setup_remove") < reason.index("mcp_setup_authorize") < reason.index("install it again")
    logged = [r.getMessage() for r in caplog.records if "needs sign-in" in r.getMessage()]
    assert logged and f"({NAME}) needs sign-in: The sign-in to {NAME} no longer works" in logged[0]
    # A face with no live session (`mcp-setup list`, another process) reads it from the store.
    from app.cli.server_view import server_json
    from app.cli.server_view import state_notes as _state_notes

    stored = await asyncio.to_thread(runtime.store.servers.get, server_id)
    assert server_json(stored)["status"] == "needs_sign_in"
    assert any("sign in again" in note for note in _state_notes(stored, NAME))


async def test_remove_revokes_the_sign_in(runtime: Runtime, pair: OAuthPair) -> None:
    ref = await signed_in(runtime)
    installed = await call(runtime, "mcp_setup_install_and_connect", qualified_name=NAME, oauth_ref=ref)
    assert pair.provider.refresh
    out = await call(runtime, "mcp_setup_remove", server_id=installed["server_id"])
    assert out == {"ok": True, "removed": True, "signed_out": True}
    assert pair.provider.revocations >= 1 and not pair.provider.refresh and not pair.provider.access


# -- refusals -------------------------------------------------------------------------


async def test_a_callback_with_a_wrong_state_is_refused_and_the_sign_in_goes_on(runtime: Runtime) -> None:
    async def forged_then_real(url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        callback = query["redirect_uri"][0]
        async with httpx.AsyncClient() as http:
            forged = await http.get(callback, params={"code": "attacker-code", "state": "not-the-state"})
        assert forged.status_code == 400
        assert await approve_over_http(url) == 200

    face = Face(forged_then_real)
    out = await call(runtime, "mcp_setup_authorize", face, qualified_name=NAME)
    assert out["status"] == "authorized"
    assert face.acted is not None and face.acted.done() and face.acted.exception() is None


async def test_a_redirect_addressed_to_another_port_is_refused(runtime: Runtime) -> None:
    async def elsewhere_then_real(url: str) -> None:
        assert await approve_over_http(url, callback_host="127.0.0.1:1") == 400
        # the code of that redirect was never taken; a fresh sign-in page finishes the job
        assert await approve_over_http(url) == 200

    face = Face(elsewhere_then_real)
    out = await call(runtime, "mcp_setup_authorize", face, qualified_name=NAME)
    assert out["status"] == "authorized"
    assert face.acted is not None
    with anyio.fail_after(scaled(10)):
        await face.acted  # the person's side ran in a task of its own: its refusal (400) is checked here


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        ({"issuer": "http://localhost:{port}/"}, "issuer"),
        ({"token_endpoint": "http://localhost:{port}/token"}, "token endpoint"),
        ({"authorization_endpoint": "http://127.0.0.2:{port}/authorize"}, "sign-in page"),
    ],
)
async def test_an_authorization_server_on_another_host_than_the_metadata_names_is_refused(
    runtime: Runtime, pair: OAuthPair, patch: dict[str, str], words: str
) -> None:
    port = urlsplit(pair.issuer).port
    pair.provider.metadata_patch = {k: v.format(port=port) for k, v in patch.items()}
    face = Face()
    out = await call(runtime, "mcp_setup_authorize", face, qualified_name=NAME)
    assert out["error"]["code"] == "oauth_refused", out
    assert words in out["error"]["message"].lower()
    assert face.shown == []  # refused before the user was sent anywhere
    assert pair.provider.issued_access == []


async def test_a_face_that_does_not_wait_gets_the_link_and_the_ref_works_once_the_user_signed_in(
    runtime: Runtime,
) -> None:
    async def show_later(info: dict[str, Any]) -> dict[str, Any]:
        return {"status": "pending"}

    ctx = CallContext(present_authorization=show_later)
    out = await runtime.service.call("mcp_setup_authorize", {"qualified_name": NAME}, ctx)
    assert (
        out["status"] == "pending" and out["url"].startswith("http://127.0.0.1:") and "open the link" in out["message"]
    )
    early = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, oauth_ref=out["ref"])
    assert early["error"]["code"] == "secret_pending" and "signing in" in early["error"]["message"]
    assert await approve_over_http(out["url"]) == 200
    done, _ = await asyncio.wait(list(runtime.sign_ins._flows), timeout=scaled(20))
    assert done
    tested = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, oauth_ref=out["ref"])
    assert tested["ok"] is True


async def test_the_terminal_prints_who_signs_in_what_is_asked_and_the_link() -> None:
    import io

    from app.cli.terminal import TerminalIO

    out = io.StringIO()
    face = TerminalIO(None, out=out)  # type: ignore[arg-type]
    info = {
        "server": NAME,
        "url": "http://127.0.0.1:1/authorize?x=1",
        "message": "Sign in to io.test/notes at as.example.",
    }
    assert await face.present_authorization(info) == {"status": "shown"}
    text = out.getvalue()
    assert "Sign in to io.test/notes at as.example." in text and "http://127.0.0.1:1/authorize?x=1" in text


async def test_the_web_sign_in_frame_names_host_scopes_and_link_and_nothing_else() -> None:
    from app.web.agent_runs import oauth_request_event

    info = {
        "server": NAME,
        "url": "http://as/authorize",
        "authorization_server": "as",
        "scopes": ["a"],
        "message": "m",
        "resource": "http://rs/mcp",
        "ref": "secret://" + "0" * 32,
    }
    assert oauth_request_event(info) == {
        "type": "oauth_request",
        "server": NAME,
        "authorization_server": "as",
        "scopes": ["a"],
        "message": "m",
        "url": "http://as/authorize",
    }


async def test_a_test_with_a_sign_in_whose_renewal_is_refused_says_needs_sign_in(
    runtime: Runtime, pair: OAuthPair
) -> None:
    ref = await signed_in(runtime)
    pair.provider.revoke_refresh_tokens()
    pair.provider.expire_access_tokens()
    out = await call(runtime, "mcp_setup_test_connection", qualified_name=NAME, oauth_ref=ref)
    assert out["error"]["code"] == "needs_sign_in", out
    assert "mcp_setup_authorize" in out["error"]["message"]


async def test_a_foreign_registration_endpoint_is_refused_before_the_registration_is_sent(
    runtime: Runtime, pair: OAuthPair
) -> None:
    # #24 item 11: the check at the browser step came after the SDK had POSTed the registration
    port = urlsplit(pair.issuer).port
    pair.provider.metadata_patch = {"registration_endpoint": f"http://localhost:{port}/register"}
    face = Face()
    out = await call(runtime, "mcp_setup_authorize", face, qualified_name=NAME)
    assert out["error"]["code"] == "oauth_refused", out
    assert "registration endpoint" in out["error"]["message"].lower()
    assert pair.provider.clients == {}  # the foreign host never got the registration
    assert face.shown == [] and pair.provider.issued_access == []
