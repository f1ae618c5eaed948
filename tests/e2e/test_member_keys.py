"""Each member's own keys (#28 item 3), with real processes: ``mcp-setup serve`` on SQLite and on
PostgreSQL, two named tokens, the CLI in another process, the stub bundle reporting the sha256 of
the key it was started with (and its pid) through its ``key_hash`` tool.

An admin installs the stub once with STUB_API_KEY marked per member; each member's first call is
a pending tool error with a one-time secret link, their value goes in on the page, and from then
on their calls run in a process of their own with their own value. Revoking one member's token
ends their process, deletes their values, and a new token of that name is asked again.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import MetaData, create_engine, select

from setup_agent.secrets.vault import Vault
from tests.browser.serve import STUB, Served, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.member_keys import KEY_HASH, member_catalog, pending_link, sha
from tests.helpers.processes import process_alive, processes_mentioning, wait_gone
from tests.helpers.timeouts import scaled


def call_as(
    served: Served,
    token: str,
    tool: str = "stub__key_hash",
    arguments: dict[str, Any] | None = None,
    **client_args: Any,
) -> dict[str, Any]:
    """One ``tools/call`` over ``/mcp`` with the SDK's client under ``token``: the result as JSON."""

    async def talk() -> dict[str, Any]:
        with anyio.fail_after(scaled(90)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(60))
            transport = streamable_http_client(f"{served.base}/mcp", http_client=http)
            async with http, Client(transport, mode="legacy", **client_args) as client:
                result = await client.call_tool(tool, arguments or {})
                return result.model_dump(mode="json", by_alias=True)

    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(talk)


def enter_on_page(served: Served, url: str, value: str) -> None:
    """What the member does with the link: open the one-time page, type the value, submit."""
    parts = urlsplit(url)
    assert parts.netloc == f"127.0.0.1:{served.port}" and parts.path.startswith("/secrets/")
    key = parse_qs(parts.query)["t"][0]
    with httpx.Client(base_url=served.base, timeout=scaled(30), trust_env=False) as http:
        assert http.get(parts.path, params={"t": key}).status_code == 200
        answered = http.post(parts.path, data={"t": key, "value": value, "action": "submit"})
    assert answered.status_code == 200, answered.text


def key_hash(result: dict[str, Any]) -> tuple[str, str]:
    """(sha256 of the key the stub was started with, the id of that stub process)."""
    assert not result.get("isError"), result
    match = KEY_HASH.search(result["content"][0]["text"])
    assert match, result
    return match.group(1), match.group(2)


def database_dump(served: Served, database_url: str | None) -> str:
    """Every column of every row of every table, as text (SQLite: also the file's bytes)."""
    home = Path(served.env["MCP_SETUP_HOME"])
    url = database_url or f"sqlite:///{home / 'mcp-setup.db'}"
    engine = create_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            rows = [repr(tuple(r)) for table in meta.sorted_tables for r in conn.execute(select(table))]
    finally:
        engine.dispose()
    raw = b"".join(p.read_bytes() for p in home.glob("mcp-setup.db*")) if database_url is None else b""
    return "\n".join(rows) + raw.decode("latin-1")


def test_each_member_calls_with_their_own_key_in_a_process_of_their_own_and_a_revoked_member_is_done(
    tmp_path: Path, database_url: str | None, canary: str
) -> None:
    data_key = tmp_path / "team.key"
    Vault.in_memory().export_key(data_key)
    env = {
        "MCP_SETUP_DATA_KEY_FILE": str(data_key),
        **({"MCP_SETUP_DATABASE_URL": database_url} if database_url else {}),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:  # the admin's terminal: another process
        done = subprocess.run(
            mcp_setup_argv(*args),
            env=face_env(tmp_path, **env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, done.stderr
        return done

    alice, bob = (cli("token", "create", name).stdout.split()[0] for name in ("alice", "bob"))
    mine = cli("token", "create", "my-laptop", "--client").stdout.split()[0]  # the user's own AI client
    shared, alice_value, bob_value = f"{canary}-shared", f"{canary}-alice", f"{canary}-bob"
    served = start_serve(tmp_path, member_catalog(tmp_path), **env)
    results: list[dict[str, Any]] = []
    try:
        # The admin installs the server once, their own key the shared one, STUB_API_KEY per member.
        asked = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key", "server": STUB})
        prompt = asked["result"]
        with served.client() as http:
            assert (
                http.post(
                    f"/api/secrets/{prompt['prompt_id']}", json={"value": shared}, headers=served.headers()
                ).status_code
                == 200
            )
        installed = served.rpc(
            "mcp_setup_install_and_connect",
            {
                "qualified_name": STUB,
                "env_refs": {"STUB_API_KEY": prompt["ref"]},
                "per_member": ["STUB_API_KEY"],
            },
        )["result"]
        assert installed["status"] == "connected", installed
        shown = cli("settings", "stub", "--json")
        assert json.loads(shown.stdout)["settings"][0]["per_member"] is True

        # Each member's first call asks them (a secret link); their value goes in on the page. The
        # user's page (its websocket) is not asked: the prompt is the member's alone.
        page = served.websocket()
        for token, value in ((alice, alice_value), (bob, bob_value)):
            first = call_as(served, token)
            results.append(first)
            enter_on_page(served, pending_link(first), value)
        alice_answer, bob_answer, user_answer = (call_as(served, t) for t in (alice, bob, mine))
        results += [alice_answer, bob_answer, user_answer]
        (alice_hash, alice_run), (bob_hash, bob_run), (user_hash, user_run) = map(
            key_hash, (alice_answer, bob_answer, user_answer)
        )
        assert (alice_hash, bob_hash, user_hash) == (sha(alice_value), sha(bob_value), sha(shared))
        assert len({alice_run, bob_run, user_run}) == 3  # one process per (server, member), and the shared one
        assert key_hash(call_as(served, alice))[1] == alice_run  # their session stays theirs
        members = Path(served.env["MCP_SETUP_HOME"]) / "members"
        alice_procs, bob_procs = (
            processes_mentioning(str(members / "alice")),
            processes_mentioning(str(members / "bob")),
        )
        assert alice_procs and bob_procs  # each in a working dir of their own

        # A member's value sent by another member is refused (the guard knows every member's value).
        refused = call_as(served, bob, "stub__echo", {"text": alice_value})
        results.append(refused)
        assert refused["isError"] is True and alice_value not in json.dumps(refused)

        # Revoked in another process: alice's process ends, her values go, bob's and the user's stay.
        cli("token", "revoke", "alice")
        assert wait_gone(alice_procs, timeout=scaled(30)) == []
        assert all(process_alive(pid) for pid in bob_procs)
        with pytest.raises(Exception):
            call_as(served, alice)  # the token itself is refused at once
        again = cli("token", "create", "alice").stdout.split()[0]  # a new token of that name starts afresh
        results.append(asked_again := call_as(served, again))
        pending_link(asked_again)  # nothing of the old alice's is used
        assert key_hash(call_as(served, bob)) == (sha(bob_value), bob_run)
        assert key_hash(call_as(served, mine)) == (sha(shared), user_run)

        frames = []
        with contextlib.suppress(TimeoutError):
            while True:
                frames.append(page.recv(timeout=0))  # what the user's page got meanwhile
        page.close()
        assert not any('"secret_request"' in f for f in frames)
        results += frames
        audit = cli("audit", "--json").stdout
        assert "token:alice" in audit and "token:bob" in audit and "member_value_removed" in audit
        dump = database_dump(served, database_url)
    finally:
        code = stop_serve(served)
    log = served.stderr()
    assert code == 0 and "Traceback" not in log, log
    for value in (alice_value, bob_value, shared):
        assert value not in log and value not in audit and value not in dump
        assert all(value not in json.dumps(r) for r in results)
    assert sha(alice_value) not in json.dumps([r for r in results if r is not alice_answer])  # only alice saw hers
    logs = Path(served.env["MCP_SETUP_HOME"]) / "logs"
    for path in logs.rglob("*"):
        if path.is_file():
            assert all(v not in path.read_text(errors="replace") for v in (alice_value, bob_value, shared))
    assert not (Path(served.env["MCP_SETUP_HOME"]) / "members" / "alice").exists()  # what her server kept is gone


def install_per_member(served: Served, shared: str) -> str:
    """The admin's install: their own key the shared value, STUB_API_KEY per member; the server id."""
    prompt = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key", "server": STUB})[
        "result"
    ]
    with served.client() as http:
        assert (
            http.post(
                f"/api/secrets/{prompt['prompt_id']}", json={"value": shared}, headers=served.headers()
            ).status_code
            == 200
        )
    installed = served.rpc(
        "mcp_setup_install_and_connect",
        {
            "qualified_name": STUB,
            "env_refs": {"STUB_API_KEY": prompt["ref"]},
            "per_member": ["STUB_API_KEY"],
        },
    )["result"]
    assert installed["status"] == "connected", installed
    return installed["server_id"]


class Member:
    """A member's client that takes URL elicitation: it opens the page and enters its value."""

    def __init__(self, served: Served, value: str) -> None:
        self.served, self.value, self.urls = served, value, []

    async def __call__(self, context: Any, params: Any) -> Any:
        import mcp_types as types

        self.urls.append(params.url)
        await anyio.to_thread.run_sync(enter_on_page, self.served, params.url, self.value)
        return types.ElicitResult(action="accept")


def test_a_member_is_asked_within_the_call_by_url_elicitation_and_rotates_and_removes_their_own_value(
    tmp_path: Path, database_url: str | None, canary: str
) -> None:
    data_key = tmp_path / "team.key"
    Vault.in_memory().export_key(data_key)
    env = {
        "MCP_SETUP_DATA_KEY_FILE": str(data_key),
        **({"MCP_SETUP_DATABASE_URL": database_url} if database_url else {}),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            mcp_setup_argv(*args),
            env=face_env(tmp_path, **env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, done.stderr
        return done

    alice = cli("token", "create", "alice").stdout.split()[0]
    shared, first, second = f"{canary}-shared", f"{canary}-first", f"{canary}-second"
    served = start_serve(tmp_path, member_catalog(tmp_path), **env)
    results: list[Any] = []
    try:
        server_id = install_per_member(served, shared)
        member = Member(served, first)
        answered = call_as(served, alice, elicitation_callback=member)  # asked in the call, answered, called
        results.append(answered)
        first_hash, first_run = key_hash(answered)
        assert first_hash == sha(first) and len(member.urls) == 1 and "/secrets/" in member.urls[0]
        assert "/consents/" not in member.urls[0]

        with httpx.Client(base_url=served.base, timeout=scaled(30), trust_env=False) as http:

            def rpc(method: str, params: dict[str, Any], token: str = alice) -> dict[str, Any]:
                body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                return http.post("/rpc", json=body, headers={"Authorization": f"Bearer {token}"}).json()

            mine = rpc("my_keys.list", {})["result"]["servers"]
            assert mine == [
                {
                    "server_id": server_id,
                    "qualified_name": STUB,
                    "per_member": ["STUB_API_KEY"],
                    "have": ["STUB_API_KEY"],
                }
            ]
            page_user = http.post(
                "/rpc",
                json={"jsonrpc": "2.0", "id": 1, "method": "my_keys.list", "params": {}},
                headers=served.headers(),
            ).json()
            assert page_user["error"]["data"]["code"] == "invalid_input"  # a member's own, not the user's

            rotation = rpc("my_keys.set", {"server_id": server_id, "key_name": "STUB_API_KEY"})["result"]
            results.append(rotation)
            enter_on_page(served, rotation["url"], second)
            rotated = call_as(served, alice)
            results.append(rotated)
            assert key_hash(rotated)[0] == sha(second) and key_hash(rotated)[1] != first_run  # restarted with it

            assert rpc("my_keys.remove", {"server_id": server_id, "key_name": "STUB_API_KEY"})["result"] == {
                "removed": 1
            }
            results.append(asked := call_as(served, alice))
            pending_link(asked)  # removed: asked again, nothing of before is used

        # The admin makes the key shared again: the member's calls take the shared session.
        cli("settings", "stub", "--shared", "STUB_API_KEY")
        assert key_hash(call_as(served, alice))[0] == sha(shared)
        audit = cli("audit", "--json").stdout
        assert "member_value_rotated" in audit and "member_value_removed" in audit and "member_keys" in audit
    finally:
        code = stop_serve(served)
    log = served.stderr()
    assert code == 0 and "Traceback" not in log, log
    for value in (first, second, shared):
        assert value not in log and value not in audit and all(value not in json.dumps(r) for r in results)
