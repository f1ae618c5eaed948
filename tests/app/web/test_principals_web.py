"""Principals on the web face (#22): a member's named token is a client credential. It calls
tools and asks for secrets; it never opens the user's page, never hears or answers a consent,
never receives the user's token, and nothing it was handed works after it is revoked. An
``--admin`` token opens the page with a session of its own, which ends with the token. An
``/mcp`` session is bound to the credential that created it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.browser.serve import STUB, Served, make_catalog, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "Evil Client", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def team(tmp_path: Path, canary: str) -> Iterator[tuple[Served, Any]]:
    """``serve`` with consent on, and a ``token(name, *flags)`` that runs ``mcp-setup token`` on its data dir."""
    catalog = make_catalog(tmp_path, canary)
    served = start_serve(tmp_path, catalog, MCP_SETUP_CONSENT="ask")

    def token(*args: str) -> str:
        env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
        done = subprocess.run(
            mcp_setup_argv("token", *args), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[0] if args[0] == "create" else done.stdout

    try:
        yield served, token
    finally:
        code = stop_serve(served)
        log = served.stderr()
        assert code == 0 and "Traceback" not in log, log
        assert canary not in log and served.token not in log


def rpc(http: httpx.Client, bearer: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = http.post("/rpc", json=body, headers={"Authorization": f"Bearer {bearer}"})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_member_token_on_the_page_gets_403_and_no_cookie(team) -> None:
    served, token = team
    alice = token("create", "alice")
    with served.client() as http:
        page = http.get("/", headers={"Authorization": f"Bearer {alice}"})
        assert page.status_code == 403 and "set-cookie" not in page.headers
        assert served.token not in page.text
        user = http.get("/", params={"t": served.token})  # the printed link still opens it
        assert user.status_code == 200 and user.headers["set-cookie"].startswith(f"mcp_setup_{served.port}=")


def test_a_member_token_cannot_hear_or_answer_a_consent_and_gets_no_link_to_one(team, canary: str) -> None:
    served, token = team
    alice = token("create", "alice")
    with served.websocket() as user_ws, served.client() as http:  # the user's page session
        asked = rpc(
            http, alice, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "k", "server": STUB}
        )
        prompt = asked["result"]
        assert served.token not in json.dumps(asked)  # the link holds a key for this prompt only
        key = prompt["url"].rsplit("?t=", 1)[1]
        entered = http.post(f"/secrets/{prompt['prompt_id']}", data={"t": key, "value": canary})
        assert entered.status_code == 200  # a member may enter a secret through its link
        tested = rpc(
            http,
            alice,
            "mcp_setup_test_connection",
            {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}},
        )
        error = tested["error"]["data"]
        assert error["code"] == "consent_required" and error["details"] == {"status": "pending"}
        assert "mcp-setup approve" in error["message"]
        consent_id = _next(user_ws, "consent_request")["consent_id"]  # the user's page is told
        assert consent_id not in json.dumps(tested)

        answer = http.post(
            f"/api/consents/{consent_id}",
            json={"approve": True, "accept_warnings": True},
            headers={"Authorization": f"Bearer {alice}", "Origin": served.origin},
        )
        assert answer.status_code == 403
        with pytest.raises(Exception):  # the handshake is refused: no consent event reaches a member
            served.websocket(Authorization=f"Bearer {alice}", **{"X-MCP-Setup-Token": ""}).close()
        # the secret link's key does not open the consent page either
        assert http.get(f"/secrets/consents/{consent_id}", params={"t": key}).status_code == 403
        still = rpc(
            http,
            alice,
            "mcp_setup_test_connection",
            {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}},
        )
        assert still["error"]["data"]["code"] == "consent_required"  # nobody approved it


def test_an_admin_token_opens_the_page_with_a_session_of_its_own_that_ends_when_it_is_revoked(team) -> None:
    served, token = team
    boss = token("create", "boss", "--admin")
    with served.client() as http:
        page = http.get("/", headers={"Authorization": f"Bearer {boss}"})
        assert page.status_code == 200
        cookie = page.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
        assert cookie != served.token and boss not in page.headers["set-cookie"]
    with served.client() as http:
        http.cookies.set(f"mcp_setup_{served.port}", cookie)
        body = {"jsonrpc": "2.0", "id": 1, "method": "servers.list", "params": {}}
        assert http.post("/rpc", json=body, headers={"Origin": served.origin}).status_code == 200
        token("revoke", "boss")
        assert http.get("/").status_code == 403
        assert http.post("/rpc", json=body, headers={"Origin": served.origin}).status_code == 403


def test_an_approval_on_the_web_is_audited_as_the_admin_token_or_the_user_with_the_launch_it_approved(
    team, canary: str, tmp_path: Path
) -> None:
    """An admin token's answer is recorded as ``token:NAME``, the page's as ``user:web``; each row
    names the launch approved (the consent's fingerprint) and what it granted (a folder, the
    network, the tools left out); the chain holds."""
    served, token = team
    folder = tmp_path / "shared-notes"
    folder.mkdir()
    alice, boss = token("create", "alice"), token("create", "boss", "--admin")
    with served.websocket() as user_ws, served.client() as http:
        asked = rpc(
            http, alice, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "k", "server": STUB}
        )
        prompt = asked["result"]
        key = prompt["url"].rsplit("?t=", 1)[1]
        assert http.post(f"/secrets/{prompt['prompt_id']}", data={"t": key, "value": canary}).status_code == 200
        args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
        # The test's launch, approved by the admin token (with a sandbox choice: what it granted).
        tested = rpc(http, alice, "mcp_setup_test_connection", args)
        assert tested["error"]["data"]["code"] == "consent_required", tested
        consent = _next(user_ws, "consent_request")["consent_id"]
        answer = {"approve": True, "accept_warnings": True, "sandbox": {"network": False, "extra_paths": [str(folder)]}}
        admin = {"Authorization": f"Bearer {boss}", "Origin": served.origin}
        assert http.post(f"/api/consents/{consent}", json=answer, headers=admin).status_code == 200
        assert "result" in rpc(http, alice, "mcp_setup_test_connection", args)  # it ran
        # One approval per install: the test's covers it; the person leaves a tool out on the card.
        installed = rpc(http, alice, "mcp_setup_install_and_connect", args)["result"]
        assert installed["status"] == "connected", installed
        left_out = [t["name"] for t in installed["tools"]][:1]
        assert left_out, installed
        pick = {"server_id": installed["server_id"], "tool": left_out[0], "shown": False}
        body = {"jsonrpc": "2.0", "id": 1, "method": "servers.tool_shown", "params": pick}
        refused = http.post("/rpc", json=body, headers={"Authorization": f"Bearer {alice}"}).json()
        assert "error" in refused, refused  # a client never chooses the person's tools
        picked = http.post("/rpc", json=body, headers=served.headers()).json()
        assert picked["result"]["left_out_by_user"] == left_out, picked
    env = served.env
    audit = subprocess.run(
        mcp_setup_argv("audit", "--json"), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
    )
    rows = [r for r in json.loads(audit.stdout)["audit"] if r["event"] == "consent_approved"]
    assert [r["actor"] for r in rows] == ["token:boss"], rows
    assert all("launch " in (r["detail"] or "") for r in rows), rows
    assert '"network":false' in rows[0]["detail"] and str(folder.resolve()) in rows[0]["detail"], rows
    hidden = [r for r in json.loads(audit.stdout)["audit"] if r["event"] == "tools_hidden"]
    assert [(r["actor"], r["detail"]) for r in hidden] == [("user:web", left_out[0])], hidden
    assert canary not in audit.stdout and boss not in audit.stdout
    verified = subprocess.run(
        mcp_setup_argv("audit", "--verify"), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
    )
    assert verified.returncode == 0 and "chain is whole" in verified.stdout, verified.stdout + verified.stderr


def _next(ws: Any, kind: str) -> dict[str, Any]:
    while True:
        event = json.loads(ws.recv(timeout=scaled(60)))
        if event.get("type") == kind:
            return event


def _mcp_install(served: Served, bearer: str, canary: str) -> tuple[str, str]:
    """Over ``/mcp`` with the SDK client: install the stub (consent off for this server); returns
    (the install's text, list_servers' text)."""

    async def talk() -> tuple[str, str]:
        with anyio.fail_after(scaled(90)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=scaled(60))
            async with (
                http,
                Client(streamable_http_client(f"{served.base}/mcp", http_client=http), mode="legacy") as client,
            ):
                asked = await client.call_tool(
                    "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "k", "server": STUB}
                )
                prompt = json.loads(asked.content[0].text)
                async with httpx2.AsyncClient(timeout=scaled(30)) as browser:
                    path = prompt["url"].split(str(served.port), 1)[1]
                    await browser.post(
                        f"{served.base}{path.split('?')[0]}", data={"t": path.rsplit("?t=", 1)[1], "value": canary}
                    )
                args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
                installed = await client.call_tool("mcp_setup_install_and_connect", args)
                listed = await client.call_tool("mcp_setup_list_servers", {})
                return installed.content[0].text, listed.content[0].text

    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(talk)


def test_an_install_over_mcp_is_audited_as_the_token_not_as_the_name_the_client_gives(
    tmp_path: Path, canary: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    served = start_serve(tmp_path, catalog)  # consent off: the install runs through
    try:
        env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
        made = subprocess.run(
            mcp_setup_argv("token", "create", "alice"),
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        alice = made.stdout.split()[0]
        installed, listed = _mcp_install(served, alice, canary)
        assert json.loads(installed)["status"] == "connected", installed
        (server,) = json.loads(listed)["servers"]
        assert server["installed_by"].startswith("token:alice"), server  # the credential, the client only beside it
        audit = subprocess.run(
            mcp_setup_argv("audit", "--json"), env=env, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
        )
        assert '"actor": "token:alice' in audit.stdout or "token:alice" in audit.stdout, audit.stdout + audit.stderr
    finally:
        stop_serve(served)


def test_an_mcp_session_driven_with_another_token_is_refused(team) -> None:
    served, token = team
    alice, bob = token("create", "alice"), token("create", "bob")
    with served.client() as http:
        opened = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {alice}"})
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        as_bob = http.post(
            "/mcp",
            json=listing,
            headers={
                **MCP_HEADERS,
                "Authorization": f"Bearer {bob}",
                "mcp-session-id": session,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert as_bob.status_code == 404 and "tools" not in as_bob.text
        as_user = http.post(
            "/mcp",
            json=listing,
            headers={
                **MCP_HEADERS,
                "Authorization": f"Bearer {served.token}",
                "mcp-session-id": session,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert as_user.status_code == 401 and "tools" not in as_user.text  # the page link's key never drives /mcp
        as_alice = http.post(
            "/mcp",
            json=listing,
            headers={
                **MCP_HEADERS,
                "Authorization": f"Bearer {alice}",
                "mcp-session-id": session,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert as_alice.status_code == 200 and "mcp_setup_search" in as_alice.text
        token("revoke", "alice")
        after = http.post(
            "/mcp",
            json=listing,
            headers={
                **MCP_HEADERS,
                "Authorization": f"Bearer {alice}",
                "mcp-session-id": session,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert after.status_code == 401  # a revoked token drives nothing it created


def test_no_approval_key_and_no_user_token_reaches_a_client_through_a_whole_setup(team, canary: str) -> None:
    """Canary for capabilities: a full setup by a member over /rpc and by a client of /mcp that
    shows URL elicitation; the user approves on their own channels. Nothing a client received
    holds the user's token, a consent link, a consent id or the secret."""
    served, token = team
    alice = token("create", "alice")
    received: list[str] = []
    with served.websocket() as user_ws, served.client() as http:

        def member(method: str, params: dict[str, Any]) -> dict[str, Any]:
            answer = rpc(http, alice, method, params)
            received.append(json.dumps(answer))
            return answer

        prompt = member("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "k", "server": STUB})[
            "result"
        ]
        key = prompt["url"].rsplit("?t=", 1)[1]
        assert http.post(f"/secrets/{prompt['prompt_id']}", data={"t": key, "value": canary}).status_code == 200
        args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
        assert member("mcp_setup_test_connection", args)["error"]["data"]["code"] == "consent_required"
        consent_id = _next(user_ws, "consent_request")["consent_id"]
        approved = http.post(
            f"/api/consents/{consent_id}", json={"approve": True, "accept_warnings": True}, headers=served.headers()
        )  # the user, with the page's credential
        assert approved.status_code == 200, approved.text
        assert member("mcp_setup_test_connection", args)["result"]["ok"] is True
        # One approval per install: the member's arguments leave no tool out.
        installed = member("mcp_setup_install_and_connect", {**args, "hidden_tools": ["echo"]})["result"]
        assert installed["status"] == "connected", installed
        assert "left_out_by_user" not in installed and [t["name"] for t in installed["tools"]] == ["echo", "whoami"]
        for text in received:
            assert served.token not in text and "/secrets/consents/" not in text
            assert consent_id not in text and canary not in text


def test_a_client_that_shows_url_elicitation_gets_the_consent_page_for_the_person_and_no_key_in_results(
    team, canary: str
) -> None:
    served, token = team
    alice = token("create", "alice")
    shown: list[str] = []

    async def person(context: Any, params: Any) -> Any:
        """The client shows the page to the person, who approves (or types the secret)."""
        import mcp_types as types

        url = params.url
        shown.append(url)
        path, key = url.split(str(served.port), 1)[1].split("?t=")
        async with httpx2.AsyncClient(timeout=scaled(30)) as browser:
            form = (
                {"t": key, "action": "approve", "accept_warnings": "yes"}
                if "/consents/" in path
                else {"t": key, "value": canary}
            )
            answered = await browser.post(f"{served.base}{path}", data=form, headers={"Origin": served.base})
            assert answered.status_code == 200, answered.text
        return types.ElicitResult(action="accept")

    async def talk() -> list[str]:
        texts: list[str] = []
        with anyio.fail_after(scaled(90)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice}"}, timeout=scaled(60))
            client_ctx = Client(
                streamable_http_client(f"{served.base}/mcp", http_client=http),
                mode="legacy",
                elicitation_callback=person,
            )
            async with http, client_ctx as client:
                asked = await client.call_tool(
                    "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "k", "server": STUB}
                )
                texts.append(asked.model_dump_json())
                ref = json.loads(asked.content[0].text)["ref"]
                tested = await client.call_tool(
                    "mcp_setup_test_connection", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
                )
                texts.append(tested.model_dump_json())
        return texts

    with anyio.from_thread.start_blocking_portal() as portal:
        texts = portal.call(talk)
    assert any("/secrets/consents/" in url for url in shown)  # the person saw the consent page
    assert json.loads(json.loads(texts[-1])["content"][0]["text"])["ok"] is True, texts[-1]
    for text in texts:
        assert "/secrets/consents/" not in text and served.token not in text and canary not in text
        for url in shown:
            assert url.rsplit("?t=", 1)[1] not in text


def test_the_guard_counts_per_token_so_a_new_mcp_session_does_not_start_from_zero(tmp_path: Path, canary: str) -> None:
    from tests.helpers.web_serve import install_stub

    catalog = make_catalog(tmp_path, canary)
    served = start_serve(tmp_path, catalog)  # consent off
    try:
        install_stub(served, canary)  # the canary is now a stored secret value: a guess of it is refused
        env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
        made = {
            name: subprocess.run(
                mcp_setup_argv("token", "create", name),
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=scaled(60),
            ).stdout.split()[0]
            for name in ("alice", "bob")
        }

        async def one_session(bearer: str, text: str) -> str:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=scaled(60))
            async with (
                http,
                Client(streamable_http_client(f"{served.base}/mcp", http_client=http), mode="legacy") as client,
            ):
                result = await client.call_tool("stub__echo", {"text": text})
                return result.content[0].text

        async def talk() -> tuple[list[str], str]:
            with anyio.fail_after(scaled(120)):
                answers = [await one_session(made["alice"], canary) for _ in range(5)]  # a new session each time
                return answers, await one_session(made["bob"], "hello")

        with anyio.from_thread.start_blocking_portal() as portal:
            answers, bob = portal.call(talk)
        assert "refused" in answers[0]
        assert any("blocked" in a for a in answers[1:4]), answers  # locked across sessions, within the limit
        assert "blocked" in answers[4]
        assert bob == "hello"  # another principal is not locked by alice's guesses
        assert all(canary not in a for a in answers)
    finally:
        stop_serve(served)


def test_a_member_token_cannot_write_the_machines_ai_client_files(team) -> None:
    """#25 item 1: clients.connect writes this computer's client configs: the person's own page only."""
    served, token = team
    alice = token("create", "alice")
    home = Path(served.env["HOME"])
    (home / ".config" / "Claude").mkdir(parents=True)
    with served.client() as http:
        refused = rpc(http, alice, "clients.connect", {"client": "claude-desktop", "apply": True})
        assert refused["error"]["data"]["code"] == "tool_not_allowed"
        assert not (home / ".config" / "Claude" / "claude_desktop_config.json").exists()
    shown = served.rpc("clients.connect", {"client": "claude-desktop"})["result"]  # the person's token: the diff
    assert shown["changed"] is True and '"mcp-setup"' in shown["diff"]


def test_a_member_token_cannot_update_a_server_or_replace_its_key_from_a_card(team) -> None:
    """#25 item 2: a card's Update and Replace run what the person approves: their page or an admin token."""
    served, token = team
    alice = token("create", "alice")
    with served.client() as http:
        for method, params in (
            ("servers.update", {"server_id": "srv_nothing"}),
            ("servers.rotate", {"server_id": "srv_nothing", "key": "STUB_API_KEY"}),
        ):
            refused = rpc(http, alice, method, params)
            assert refused["error"]["data"]["code"] == "tool_not_allowed", (method, refused)
            assert "Only the person at this computer" in refused["error"]["message"]
            own = served.rpc(method, params)  # the person's token gets past the gate to the lookup
            assert own["error"]["data"]["code"] in ("not_found", "invalid_input"), (method, own)
