"""Done when (#28, part A): two ``serve`` replicas (real subprocesses) on one throwaway PostgreSQL,
behind Debian's nginx on loopback with round-robin upstreams (no stickiness), run a whole setup
with each step on the other replica than the step before: request a secret, answer it (the
one-time page), test, retry the test before the user answered (one consent is listed, not two),
consent, install, call the installed tool, remove. A second test kills one replica in the middle
of a setup and the other finishes it. Which replica answered is read from the
``X-MCP-Setup-Replica`` header. The planted value is in no table in clear, no log of either
replica or of nginx, and no answer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from setup_agent.store.database import Store
from tests.browser.serve import STUB
from tests.helpers.team_balancer import (
    PUBLIC_HOST,
    REPLICA_HOSTS,
    Client,
    nginx_balancer,
)
from tests.helpers.team_cells import every_cell
from tests.helpers.team_replicas import Team, answer_on_the_page, pytestmark, team  # noqa: F401 - fixtures and marks the tests here use
from tests.helpers.timeouts import scaled


def gateway_tools(client: Client, step: str, replica: str) -> list[str]:
    client.steer(replica)
    listed = client.mcp(step, "tools/list", {})
    assert client.last_replica() == replica
    return [t["name"] for t in listed["result"]["tools"]]


def until(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"


def test_two_replicas_behind_round_robin_nginx_run_a_whole_setup_each_step_on_the_other_replica_and_leak_nothing(
    team: Team, canary: str
) -> None:
    member = team.cli("token", "create", "alice")
    admin = team.cli("token", "create", "boss", "--admin")  # the user's channel: approves, enters secrets
    a, b = team.start()
    with nginx_balancer(team.port) as nginx:
        client = Client(team.port, member=member, admin=admin)
        try:
            client.steer(a)
            asked = client.rpc(
                "request the secret",
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "Your stub key", "server": STUB},
            )
            assert "result" in asked, asked
            ref = asked["result"]["ref"]

            answer_on_the_page(client, asked["result"]["url"], canary, b)
            client.steer(a)  # a second answer, on the replica that asked: refused, the value echoed nowhere
            again = client.post_as_user(
                "answer again", f"/api/secrets/{asked['result']['prompt_id']}", {"value": canary}
            )
            assert again.status_code in (404, 409), again.text

            client.steer(a)
            args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
            waiting = client.rpc("test (consent asked)", "mcp_setup_test_connection", args)
            assert waiting["error"]["data"]["code"] == "consent_required", waiting
            client.steer(b)  # the agent retries on the other replica before the user answered
            retried = client.rpc("retry (consent asked)", "mcp_setup_test_connection", args)
            assert retried["error"]["data"]["code"] == "consent_required", retried
            assert len(team.pending_consents()) == 1, team.pending_consents()  # b waits on a's: one box

            client.steer(b)  # answered on the replica that did not open it: a's call and b's go on
            approved = client.post_as_user(
                "approve", f"/api/consents/{team.pending_consent()}", {"approve": True, "accept_warnings": True}
            )
            assert approved.status_code == 200, approved.text
            assert team.pending_consents() == []  # nothing left listed until a deadline

            client.steer(a)
            tested = client.rpc("test", "mcp_setup_test_connection", args)
            assert "result" in tested, tested

            client.steer(b)
            installed = client.rpc("install", "mcp_setup_install_and_connect", args)
            assert installed["result"]["status"] == "connected", installed
            server_id = installed["result"]["server_id"]

            until(lambda: any(n.endswith("__echo") for n in gateway_tools(client, "list on the other", a)), scaled(30))
            echo = next(n for n in gateway_tools(client, "list on the other", a) if n.endswith("__echo"))
            client.steer(a)
            called = client.mcp("call the installed tool", "tools/call", {"name": echo, "arguments": {"text": "hi"}})
            assert called["result"]["content"][0]["text"] == "hi", called
            assert client.last_replica() == a

            client.steer(b)
            removed = client.rpc("remove", "servers.remove", {"server_id": server_id})
            assert removed["result"]["removed"] is True, removed
            until(
                lambda: not any(n.endswith("__echo") for n in gateway_tools(client, "gone on the other", a)), scaled(30)
            )
        finally:
            client.close()
        steps = [(step, r) for step, r in client.trail if step != "healthz"]
        wanted = {
            "request the secret": a,
            "open the secret page": b,
            "answer the secret": b,
            "test (consent asked)": a,
            "retry (consent asked)": b,
            "approve": b,
            "test": a,
            "install": b,
            "call the installed tool": a,
            "remove": b,
        }
        for step, replica in wanted.items():
            assert (step, replica) in steps, (step, steps)
        nginx_log = nginx.log_text()
    assert f"{REPLICA_HOSTS[0]}:{team.port}" in nginx_log and f"{REPLICA_HOSTS[1]}:{team.port}" in nginx_log
    logs = team.logs()
    assert canary not in logs and "Traceback" not in logs
    assert canary not in nginx_log
    assert not [text for text in client.answers if canary in text]
    with Store(team.database_url, team.vault) as store:
        assert canary not in every_cell(store)


def test_a_replica_killed_in_the_middle_of_a_setup_leaves_the_other_to_finish_it(team: Team, canary: str) -> None:
    member = team.cli("token", "create", "alice")
    admin = team.cli("token", "create", "boss", "--admin")
    a, b = team.start()
    with nginx_balancer(team.port):
        client = Client(team.port, member=member, admin=admin)
        try:
            client.steer(a)
            asked = client.rpc(
                "request the secret",
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "Your stub key", "server": STUB},
            )
            assert client.last_replica() == a and "result" in asked, asked
            team.replicas[a].proc.kill()  # in the middle: the prompt is open, nothing answered yet
            team.replicas[a].proc.wait(scaled(10))

            answered = client.post_as_user("answer", f"/api/secrets/{asked['result']['prompt_id']}", {"value": canary})
            assert answered.status_code == 200, answered.text
            args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": asked["result"]["ref"]}}
            waiting = client.rpc("test (consent asked)", "mcp_setup_test_connection", args)
            assert waiting["error"]["data"]["code"] == "consent_required", waiting
            approved = client.post_as_user(
                "approve", f"/api/consents/{team.pending_consent()}", {"approve": True, "accept_warnings": True}
            )
            assert approved.status_code == 200, approved.text
            installed = client.rpc("install", "mcp_setup_install_and_connect", args)
            assert installed["result"]["status"] == "connected", installed
            echo = next(n for n in gateway_tools(client, "list", b) if n.endswith("__echo"))
            called = client.mcp("call the installed tool", "tools/call", {"name": echo, "arguments": {"text": "hi"}})
            assert called["result"]["content"][0]["text"] == "hi", called
        finally:
            client.close()
        after_kill = [r for step, r in client.trail[client.trail.index(("request the secret", a)) + 1 :]]
        assert set(after_kill) == {b}
    assert canary not in team.logs()
    assert not [text for text in client.answers if canary in text]
    with Store(team.database_url, team.vault) as store:
        assert canary not in every_cell(store)


def test_tls_ended_at_nginx_with_plain_http_to_the_replicas_hands_out_https_links_that_work_through_it(
    team: Team, tmp_path: Path, canary: str
) -> None:
    """docs/team.md "Replicas behind a load balancer": nginx ends TLS, the replicas speak plain HTTP behind it, and
    ``MCP_SETUP_PUBLIC_URL`` (set at start, never taken from a request header) makes every link
    they hand out name the balancer's https address."""
    from tests.helpers.team_gateway import self_signed

    cert, key = self_signed(tmp_path, PUBLIC_HOST)
    team.env["MCP_SETUP_PUBLIC_URL"] = f"https://{PUBLIC_HOST}:{team.port}"
    member = team.cli("token", "create", "alice")
    admin = team.cli("token", "create", "boss", "--admin")
    a, b = team.start()
    with nginx_balancer(team.port, tls=(cert, key)) as nginx:
        client = Client(team.port, member=member, admin=admin, tls_cert=cert)
        try:
            hello = client.mcp(
                "initialize",
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            )
            assert hello["result"]["serverInfo"]["name"], hello
            client.steer(a)
            asked = client.rpc(
                "request the secret",
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "Your stub key", "server": STUB},
            )
            url = asked["result"]["url"]
            assert url.startswith(f"https://{PUBLIC_HOST}:{team.port}/"), url
            answer_on_the_page(client, url, canary, b)  # through the TLS balancer, on the other replica
            forged = client.http.post(
                "/rpc",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "mcp_setup_request_secret",
                    "params": {"key_name": "K", "prompt": "p", "server": STUB},
                },
                headers={**client.member, "X-Forwarded-Proto": "http", "X-Forwarded-Host": "evil.example"},
            )
            assert forged.json()["result"]["url"].startswith(f"https://{PUBLIC_HOST}:{team.port}/")
        finally:
            client.close()
        nginx_log = nginx.log_text()
    assert f"{REPLICA_HOSTS[0]}:{team.port}" in nginx_log and f"{REPLICA_HOSTS[1]}:{team.port}" in nginx_log
    assert canary not in team.logs() + nginx_log
