"""Done when (#28, OAuth sign-ins): two real ``serve`` replicas on one PostgreSQL behind Debian's
nginx (round-robin). A sign-in started on replica A (``mcp_setup_authorize`` over ``/rpc``) sends
the browser back to ``http://team.example:PORT/oauth/callback``; the balancer hands that redirect
to replica B, which redeems the code itself (once: A, still there, does not) and answers the
usual page; the ref installs on B and the tool answers. The same redirect again is refused. A
second test kills A before the redirect comes back: B finishes the sign-in all the same. The
code, the state, the PKCE verifier, the client secret and the tokens are in no table in clear,
no replica's or nginx's log and no answer."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from setup_agent.store.database import Store
from tests.fakes.oauth_server import OAuthPair, remote_server_json, serve_oauth_pair
from tests.helpers.oauth_runtime import NAME
from tests.helpers.team_balancer import Client, nginx_balancer
from tests.helpers.team_cells import every_cell
from tests.helpers.team_replicas import Team, pytestmark, team  # noqa: F401 - the fixture and the nginx skip
from tests.helpers.timeouts import scaled


def browser_until_redirect(url: str) -> str:
    """The user's browser: open the sign-in link, press Authorize; the redirect's address."""
    with httpx.Client(timeout=scaled(20), trust_env=False) as http:
        page = http.get(url, follow_redirects=True)
        tx = re.search(r'name=tx value="([^"]+)"', page.text)
        assert tx, page.text
        return http.post(str(page.url), data={"tx": tx.group(1)}).headers["location"]


def wait_signed_in(client: Client, args: dict[str, Any], replica: str) -> dict[str, Any]:
    """Test the connection until the sign-in is done (A finishes it after B got the redirect)."""
    deadline, pause = time.monotonic() + scaled(30), threading.Event()
    while True:
        client.steer(replica)
        tested = client.rpc("test", "mcp_setup_test_connection", args)
        if "result" in tested or tested["error"]["data"]["code"] != "secret_pending":
            return tested
        assert time.monotonic() < deadline, "the sign-in did not finish"
        pause.wait(0.2)


def planted_by(pair: OAuthPair, redirect: Any) -> list[str]:
    """What must not leak: the code, the state, every verifier sent, the tokens, the client secrets."""
    query = parse_qs(redirect.query)
    verifiers = [f["code_verifier"] for f in pair.provider.token_forms if "code_verifier" in f]
    secrets = [c.client_secret for c in pair.provider.clients.values() if c.client_secret]
    assert verifiers and secrets and pair.provider.issued_access
    return [
        query["code"][0],
        query["state"][0],
        *verifiers,
        *secrets,
        *pair.provider.issued_access,
        *pair.provider.issued_refresh,
    ]


def assert_nothing_leaked(replicas: Team, client: Client, planted: list[str], state: str, nginx_log: str) -> None:
    logs = replicas.logs()
    assert "Traceback" not in logs
    with Store(replicas.database_url, replicas.vault) as store:
        cells = every_cell(store)
    for value in planted:
        assert value not in cells and value not in logs and value not in nginx_log
        if value != state:  # the state is in the sign-in link itself (the answer to authorize)
            assert not [text for text in client.answers if value in text]  # B's page does not echo the code


def test_a_sign_in_started_on_one_replica_finishes_when_nginx_hands_its_redirect_to_the_other(team: Team) -> None:
    team.env["MCP_SETUP_CONSENT"] = "never-ask"
    with serve_oauth_pair() as pair:
        pair.provider.confidential = True  # a client secret, for the canary
        catalog = Path(team.env["MCP_SETUP_CATALOG_DIR"])
        (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
        member = team.cli("token", "create", "alice")
        a, b = team.start()
        with nginx_balancer(team.port) as nginx:
            client = Client(team.port, member=member, admin=member)
            try:
                client.steer(a)
                started = client.rpc("sign in", "mcp_setup_authorize", {"qualified_name": NAME})
                assert started["result"]["status"] == "pending", started
                assert client.last_replica() == a
                ref = started["result"]["ref"]
                redirect = urlsplit(browser_until_redirect(started["result"]["url"]))
                assert (
                    redirect.netloc == client.host and redirect.path == "/oauth/callback"
                )  # the balancer, not A's loopback
                client.steer(b)
                back = client._record("redirect", client.http.get(f"{redirect.path}?{redirect.query}"))
                assert back.status_code == 200 and "Signed in" in back.text, back.text
                assert client.last_replica() == b

                tested = wait_signed_in(client, {"qualified_name": NAME, "oauth_ref": ref}, b)
                assert {t["name"] for t in tested["result"]["tools"]} == {"echo", "whoami"}, tested

                client.steer(b)
                replay = client._record("replay", client.http.get(f"{redirect.path}?{redirect.query}"))
                assert replay.status_code == 400 and "Signed in" not in replay.text

                client.steer(b)
                installed = client.rpc(
                    "install", "mcp_setup_install_and_connect", {"qualified_name": NAME, "oauth_ref": ref}
                )
                assert installed["result"]["status"] == "connected", installed
            finally:
                client.close()
            nginx_log = nginx.log_text()
        assert [f["grant_type"] for f in pair.provider.token_forms] == ["authorization_code"]  # B only: A did not again
        planted = planted_by(pair, redirect)
    assert_nothing_leaked(team, client, planted, parse_qs(redirect.query)["state"][0], nginx_log)


def test_a_sign_in_whose_replica_is_killed_before_the_redirect_is_finished_by_the_other(team: Team) -> None:
    team.env["MCP_SETUP_CONSENT"] = "never-ask"
    with serve_oauth_pair() as pair:
        pair.provider.confidential = True
        catalog = Path(team.env["MCP_SETUP_CATALOG_DIR"])
        (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
        member = team.cli("token", "create", "alice")
        a, b = team.start()
        with nginx_balancer(team.port) as nginx:
            client = Client(team.port, member=member, admin=member)
            try:
                client.steer(a)
                started = client.rpc("sign in", "mcp_setup_authorize", {"qualified_name": NAME})
                assert started["result"]["status"] == "pending" and client.last_replica() == a, started
                team.replicas[a].proc.kill()  # A dies with the sign-in in progress: only its row is left
                team.replicas[a].proc.wait(scaled(10))
                redirect = urlsplit(browser_until_redirect(started["result"]["url"]))
                back = client._record("redirect", client.http.get(f"{redirect.path}?{redirect.query}"))
                assert back.status_code == 200 and "Signed in" in back.text, back.text
                args = {"qualified_name": NAME, "oauth_ref": started["result"]["ref"]}
                tested = client.rpc("test", "mcp_setup_test_connection", args)
                assert {t["name"] for t in tested["result"]["tools"]} == {"echo", "whoami"}, tested
                installed = client.rpc("install", "mcp_setup_install_and_connect", args)
                assert installed["result"]["status"] == "connected", installed
                listed = client.mcp("list", "tools/list", {})
                whoami = next(t["name"] for t in listed["result"]["tools"] if t["name"].endswith("__whoami"))
                called = client.mcp("call the installed tool", "tools/call", {"name": whoami, "arguments": {}})
                assert called["result"]["content"][0]["text"] == "ok", called
            finally:
                client.close()
            after_kill = {r for step, r in client.trail[client.trail.index(("sign in", a)) + 1 :]}
            assert after_kill == {b}
            nginx_log = nginx.log_text()
        assert [f["grant_type"] for f in pair.provider.token_forms] == ["authorization_code"]
        planted = planted_by(pair, redirect)
    assert_nothing_leaked(team, client, planted, parse_qs(redirect.query)["state"][0], nginx_log)
