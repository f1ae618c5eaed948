"""A shared key replaced while members' own sessions run restarts them too, on every replica.

Two ``serve`` replicas (real subprocesses) on one throwaway PostgreSQL behind nginx; two stub
bundles, each with STUB_API_KEY kept per member and a shared STUB_TEAM_KEY, whose ``key_hash``
tool says the sha256 of both keys it was started with and its own run id. Alice's own sessions of
both servers run on both replicas; ``mcp-setup rotate`` in another process replaces the first
server's shared key. Canary: no process keeps the old value in its environment (both replicas
ended their sessions of that server, the member's and the shared one, without a call), Alice's
next call on each replica reaches a new process started with her own key and the new shared one,
the other server's sessions of hers run on untouched, and neither value is in any answer or log.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.member_keys import KEY_HASHES, pending_link, sha, shared_key_catalog
from tests.helpers.processes import wait_gone
from tests.helpers.team_balancer import Client, nginx_balancer, nginx_binary
from tests.helpers.team_replicas import Team, answer_on_the_page
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.skipif(
    nginx_binary() is None and os.environ.get("CI") != "true",
    reason="nginx is not installed (scripts/test.sh installs it)",
)

FIRST, OTHER = "io.github.mcp-setup/stub", "io.github.mcp-setup/other"
TEAM_KEY = "STUB_TEAM_KEY"


@pytest.fixture
def team(tmp_path: Path, postgres_url: str, canary: str) -> Iterator[Team]:
    team = Team(tmp_path, postgres_url, canary)
    team.env["MCP_SETUP_CATALOG_DIR"] = str(shared_key_catalog(tmp_path / "catalog", (FIRST, OTHER), TEAM_KEY))
    team.env["MCP_SETUP_CONSENT"] = "never-ask"
    try:
        yield team
    finally:
        team.stop()


def started_with(name: str, value: str) -> list[int]:
    """The live processes whose environment holds ``name=value``."""
    needle = b"\0" + name.encode() + b"=" + value.encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in b"\0" + (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def key_hashes(client: Client, tool: str, replica: str) -> tuple[str, str, str]:
    """Alice's call of ``tool`` on ``replica``: (her key's sha256, the process's run id, the shared key's sha256)."""
    client.steer(replica)
    result = client.mcp(f"call {tool}", "tools/call", {"name": tool, "arguments": {}})["result"]
    assert client.last_replica() == replica, client.trail[-1]
    assert not result.get("isError"), result
    match = KEY_HASHES.search(result["content"][0]["text"])
    assert match, result
    return match.group(1), match.group(2), match.group(3)


def install(admin: Client, name: str, values: dict[str, str], replica: str) -> None:
    """The admin's install of ``name`` with ``values``, STUB_API_KEY kept per member."""
    refs = {}
    for key, value in values.items():
        admin.steer(replica)
        asked = admin.rpc(f"ask {key}", "mcp_setup_request_secret", {"key_name": key, "prompt": key, "server": name})
        answer_on_the_page(admin, asked["result"]["url"], value, replica)
        refs[key] = asked["result"]["ref"]
    admin.steer(replica)
    installed = admin.rpc(
        f"install {name}",
        "mcp_setup_install_and_connect",
        {"qualified_name": name, "env_refs": refs, "per_member": ["STUB_API_KEY"]},
    )
    assert installed["result"]["status"] == "connected", installed


def test_a_shared_key_replaced_with_rotate_restarts_every_members_session_of_that_server_on_both_replicas_only(
    team: Team, canary: str
) -> None:
    alice_token = team.cli("token", "create", "alice")
    admin_token = team.cli("token", "create", "boss", "--admin")
    mine, old, new, others = (f"{canary}-{n}" for n in ("alice", "team-old", "team-new", "other-team"))
    a, b = team.start()
    rotated: subprocess.CompletedProcess[str] | None = None
    with nginx_balancer(team.port):
        admin = Client(team.port, member=admin_token, admin=admin_token)
        alice = Client(team.port, member=alice_token, admin=admin_token)
        try:
            install(admin, FIRST, {"STUB_API_KEY": f"{canary}-admin", TEAM_KEY: old}, a)
            install(admin, OTHER, {"STUB_API_KEY": f"{canary}-admin-other", TEAM_KEY: others}, b)
            for tool in ("stub__key_hash", "other__key_hash"):  # alice enters her own key for each server
                alice.steer(a)
                asked = alice.mcp(f"first {tool}", "tools/call", {"name": tool, "arguments": {}})["result"]
                answer_on_the_page(alice, pending_link(asked), mine, b)
            before: dict[tuple[str, str], tuple[str, str, str]] = {}
            for replica in (a, b):
                before[("stub", replica)] = key_hashes(alice, "stub__key_hash", replica)
                before[("other", replica)] = key_hashes(alice, "other__key_hash", replica)
                assert before[("stub", replica)][0] == sha(mine) and before[("stub", replica)][2] == sha(old)
                assert before[("other", replica)][2] == sha(others)
            running_old = started_with(TEAM_KEY, old)
            assert len(running_old) >= 2, "alice's sessions on both replicas (and the shared ones) hold the old key"

            rotated = subprocess.run(  # on the first replica's machine (its data dir holds the bundle)
                mcp_setup_argv("rotate", "stub", TEAM_KEY),
                input=new + "\n",
                env=face_env(team.root / "replica-0", **team.env),
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=scaled(90),
            )
            assert rotated.returncode == 0, rotated.stderr

            # Ended by each replica's sync, before any call: no process holds the old key.
            assert wait_gone(running_old, timeout=scaled(30)) == []
            assert started_with(TEAM_KEY, old) == []
            for replica in (a, b):
                own, run, shared = key_hashes(alice, "stub__key_hash", replica)
                assert (own, shared) == (sha(mine), sha(new)) and run != before[("stub", replica)][1]
                assert key_hashes(alice, "other__key_hash", replica) == before[("other", replica)]  # untouched
            assert started_with(TEAM_KEY, new)
        finally:
            admin.close()
            alice.close()
    logs = team.logs()
    said = [*admin.answers, *alice.answers, *((rotated.stdout, rotated.stderr) if rotated is not None else ())]
    for value in (old, new, mine):
        assert value not in logs and all(value not in text for text in said)
