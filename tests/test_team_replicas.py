"""Done when (#28, part A): two ``serve`` replicas (real subprocesses) on one throwaway PostgreSQL,
behind Debian's nginx on loopback with round-robin upstreams (no stickiness), run a whole setup
with each step on the other replica than the step before: request a secret, answer it (the
one-time page), test, retry the test before the user answered (one consent is listed, not two),
consent, install, call the installed tool, remove. A second test kills one replica in the middle
of a setup and the other finishes it. Which replica answered is read from the
``X-MCP-Setup-Replica`` header. The planted value is in no table in clear, no log of either
replica or of nginx, and no answer."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from setup_agent.secrets.vault import Vault
from setup_agent.store import PendingApprovals, owner_alive
from setup_agent.store.database import Store
from tests.browser.serve import STUB, Served, make_catalog, stop_serve
from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.team_balancer import PUBLIC_HOST, REPLICA_HOSTS, Client, free_common_port, nginx_balancer, nginx_binary
from tests.test_team_gateway import start
from tests.test_team_shared_state import every_cell
from tests.timeouts import scaled

pytestmark = pytest.mark.skipif(
    nginx_binary() is None and os.environ.get("CI") != "true",
    reason="nginx is not installed (scripts/test.sh installs it)",
)


class Team:
    def __init__(self, root: Path, database_url: str, canary: str) -> None:
        self.root = root
        self.vault = Vault.in_memory()
        key = root / "team.key"
        self.vault.export_key(key)
        self.env = {
            "MCP_SETUP_DATABASE_URL": database_url,
            "MCP_SETUP_DATA_KEY_FILE": str(key),
            "MCP_SETUP_PUBLIC_HOST": PUBLIC_HOST,
            "MCP_SETUP_CATALOG_DIR": str(make_catalog(root, canary)),
            "MCP_SETUP_CONSENT": "ask",
        }
        self.database_url = database_url
        self.port = free_common_port()
        self.replicas: dict[str, Served] = {}

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            mcp_setup_argv(*args),
            env=face_env(self.root / "admin", **self.env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[0]

    def start(self) -> list[str]:
        """Both replicas; returns their ids in the order of REPLICA_HOSTS."""
        ids = []
        for n, host in enumerate(REPLICA_HOSTS):
            root = self.root / f"replica-{n}"
            root.mkdir()
            served, _scheme = start(root, "--host", host, "--port", str(self.port), **self.env)
            answer = httpx.get(f"http://{host}:{self.port}/healthz", trust_env=False, timeout=scaled(30))
            assert answer.status_code == 200 and answer.json()["ok"] is True
            ready = httpx.get(f"http://{host}:{self.port}/readyz", trust_env=False, timeout=scaled(30))
            assert ready.status_code == 200, ready.text
            self.replicas[answer.json()["replica"]] = served
            ids.append(answer.json()["replica"])
        return ids

    def stop(self) -> None:
        for served in self.replicas.values():
            stop_serve(served, signal.SIGTERM)

    def pending_consents(self) -> list[str]:
        """What the user sees waiting (as `mcp-setup approve` lists it): the consents' ids."""
        with Store(self.database_url, self.vault) as store:
            items = PendingApprovals(store, owner="test:0").pending()
        return [i.item_id for i in items if i.kind == "consent" and owner_alive(i.owner)]

    def pending_consent(self) -> str:
        items = self.pending_consents()
        assert items, "no consent waits for the user"
        return items[-1]

    def logs(self) -> str:
        return "\n".join(s.stderr() for s in self.replicas.values())


@pytest.fixture
def team(tmp_path: Path, postgres_url: str, canary: str) -> Iterator[Team]:
    team = Team(tmp_path, postgres_url, canary)
    try:
        yield team
    finally:
        team.stop()


def answer_on_the_page(client: Client, url: str, value: str, replica: str) -> None:
    """The user opens the one-time link (issued by another replica) and types the value there."""
    link = urlsplit(url)
    assert link.netloc == client.host  # the link leads to the balancer, not to a replica
    key = re.search(r"t=([^&]+)", link.query)
    assert key is not None
    client.steer(replica)
    page = client._record("open the secret page", client.http.get(f"{link.path}?{link.query}"))
    assert page.status_code == 200 and "<form" in page.text, page.text[:300]
    assert client.last_replica() == replica
    client.steer(replica)
    saved = client.http.post(
        link.path,
        data={"t": key.group(1), "value": value, "action": "submit"},
        headers={"Origin": f"{client.scheme}://{client.host}"},
    )
    client._record("answer the secret", saved)
    assert saved.status_code == 200 and "saved" in saved.text, saved.text[:300]


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
    from tests.test_team_gateway import self_signed

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
