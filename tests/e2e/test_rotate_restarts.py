"""A key replaced while the server runs in ``mcp-setup serve`` restarts it with the new key.

``serve`` (a subprocess) runs the stub server with its key; ``mcp-setup rotate`` in another
process replaces the key. Canary: the old value leaves every running process's environment (the
stub child ends), the next call through ``serve``'s ``/mcp`` reaches a new process started with
the new value (the stub's ``key_hash`` tool says which key it was started with), and neither
value is in any answer.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.browser.serve import Served, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, mcp_setup_argv
from tests.helpers.member_keys import member_catalog
from tests.helpers.processes import wait_gone
from tests.helpers.timeouts import scaled

STUB = "io.github.mcp-setup/stub"
KEY_HASH = re.compile(r"sha256=([0-9a-f]{64}) run=([0-9a-f]+)")


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def started_with(value: str) -> list[int]:
    """The live processes whose environment holds ``STUB_API_KEY=value``."""
    needle = b"\0STUB_API_KEY=" + value.encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = b"\0" + (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ:
            found.append(int(entry.name))
    return found


def key_hash(served: Served, token: str) -> tuple[str, str, str]:
    """One ``stub__key_hash`` call over ``/mcp``: (sha256 of the key the stub runs with, its run id, the answer)."""

    async def talk() -> dict[str, Any]:
        with anyio.fail_after(scaled(90)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=scaled(60))
            transport = streamable_http_client(f"{served.base}/mcp", http_client=http)
            async with http, Client(transport, mode="legacy") as client:
                result = await client.call_tool("stub__key_hash", {})
                return result.model_dump(mode="json", by_alias=True)

    with anyio.from_thread.start_blocking_portal() as portal:
        answer = portal.call(talk)
    assert not answer.get("isError"), answer
    match = KEY_HASH.search(answer["content"][0]["text"])
    assert match, answer
    return match.group(1), match.group(2), repr(answer)


def install(served: Served, value: str) -> None:
    asked = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key", "server": STUB})
    prompt = asked["result"]
    with served.client() as http:
        answered = http.post(f"/api/secrets/{prompt['prompt_id']}", json={"value": value}, headers=served.headers())
    assert answered.status_code == 200
    installed = served.rpc(
        "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
    )
    assert installed["result"]["status"] == "connected", installed


def test_a_key_replaced_with_rotate_restarts_the_server_running_in_serve_with_the_new_key(
    tmp_path: Path, canary: str
) -> None:
    old, new = canary, "rotated-" + canary[::-1]
    served = start_serve(tmp_path, member_catalog(tmp_path))
    try:
        install(served, old)
        token = served.client_token()
        before, first_run, said_before = key_hash(served, token)
        assert before == sha(old)
        running_old = started_with(old)
        assert running_old, "the stub should run with the old key in its environment"

        rotated = subprocess.run(
            mcp_setup_argv("rotate", "stub", "STUB_API_KEY"),
            input=new + "\n",
            env=served.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(90),
        )
        assert rotated.returncode == 0, rotated.stderr
        assert "restarted with it" in rotated.stdout, rotated.stdout

        assert wait_gone(running_old, timeout=scaled(30)) == []  # serve ended the process with the old key
        after, second_run, said_after = key_hash(served, token)
        assert after == sha(new) and second_run != first_run  # a new process, started with the new key
        assert started_with(old) == [] and started_with(new)
        for text in (said_before, said_after, rotated.stdout, rotated.stderr):
            assert old not in text and new not in text
    finally:
        stop_serve(served)
    assert old not in served.stderr() and new not in served.stderr()
