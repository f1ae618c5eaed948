"""The guided agent run meets a remote that signs in with OAuth: it calls ``mcp_setup_authorize``,
the user signs in (on the fake authorization server, over HTTP), and the run tests and installs
with the ``oauth_ref``. Once through a face that shows the sign-in box and waits
(``present_authorization``), once through the harness's fallback (the link said in the chat)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.agent.spawn import spawn_subagent
from tests.fakes.oauth_server import OAuthPair, approve_over_http, remote_server_json, serve_oauth_pair
from tests.helpers.agent import ScriptedIO, agent_runtime
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME = "io.test/notes"


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


def notes_catalog(root: Path, pair: OAuthPair) -> Path:
    catalog = root / "catalog"
    catalog.mkdir()
    (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
    return catalog


class SignInIO(ScriptedIO):
    """A face with a sign-in box: the 'user' presses Authorize on the link it shows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sign_ins: list[dict[str, Any]] = []
        self.approvals: list[asyncio.Task[int]] = []

    async def present_authorization(self, info: dict[str, Any]) -> dict[str, Any]:
        self.sign_ins.append(info)
        self.approvals.append(asyncio.create_task(approve_over_http(info["url"])))
        return {"status": "shown"}


class LinkInChatIO(ScriptedIO):
    """A face without a sign-in box: the harness says the link; the 'user' opens it from the chat."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.approvals: list[asyncio.Task[int]] = []

    async def say(self, text: str) -> None:
        await super().say(text)
        link = re.search(r"Open this link to sign in: (\S+)", text)
        if link:
            self.approvals.append(asyncio.create_task(approve_over_http(link.group(1))))


def tool_calls(result: dict, name: str) -> list[dict]:
    return [m for m in result["transcript"] if m.get("role") == "tool" and m["name"] == name]


async def run(runtime: Any, io: Any) -> dict:
    with anyio.fail_after(scaled(90)):
        return await spawn_subagent(
            "mcp_setup", {"goal": "set up the notes server"}, service=runtime.service, redactor=runtime.redactor, io=io
        )


async def test_a_guided_run_that_meets_oauth_required_signs_in_then_installs_with_the_ref(
    tmp_path: Path, pair: OAuthPair, memory_keyring
) -> None:
    async with agent_runtime(tmp_path / "home", notes_catalog(tmp_path, pair), memory_keyring) as runtime:
        runtime.sign_ins.timeout = scaled(30)
        io = SignInIO(runtime)
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected, io.said)
        (shown,) = io.sign_ins  # the box: host and scopes
        assert shown["server"] == NAME and shown["scopes"] == ["notes:read"]
        assert [await t for t in io.approvals] == [200]
        tests = tool_calls(result, "mcp_setup_test_connection")
        assert [t["result"].get("ok", True) for t in tests] == [False, True]
        assert tests[0]["result"]["error"]["code"] == "oauth_required"
        (authorized,) = tool_calls(result, "mcp_setup_authorize")
        ref = authorized["result"]["ref"]
        assert authorized["result"]["status"] == "authorized" and ref.startswith("secret://")
        assert tests[1]["arguments"]["oauth_ref"] == ref
        (installed,) = tool_calls(result, "mcp_setup_install_and_connect")
        assert installed["arguments"]["oauth_ref"] == ref
        assert {t["name"] for t in result["tools"]} == {"echo", "whoami"}
        answer = await runtime.connections.call_tool(result["server_id"], "whoami")
        assert answer["content"][0]["text"] == "ok"
        tokens = pair.provider.issued_access + pair.provider.issued_refresh
        assert tokens and not any(t in json.dumps([result, io.said, io.events]) for t in tokens)


async def test_a_face_without_a_sign_in_box_gets_the_link_in_the_chat_and_the_run_still_installs(
    tmp_path: Path, pair: OAuthPair, memory_keyring
) -> None:
    async with agent_runtime(tmp_path / "home", notes_catalog(tmp_path, pair), memory_keyring) as runtime:
        runtime.sign_ins.timeout = scaled(30)
        io = LinkInChatIO(runtime)
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected, io.said)
        assert [await t for t in io.approvals] == [200]
        said = "\n".join(io.said)
        assert f"Sign in to {NAME} at 127.0.0.1:" in said and "notes:read" in said


async def test_a_declined_sign_in_is_explained_and_cancel_ends_the_run(
    tmp_path: Path, pair: OAuthPair, memory_keyring
) -> None:
    class DecliningIO(ScriptedIO):
        async def present_authorization(self, info: dict[str, Any]) -> dict[str, Any]:
            from setup_agent.errors import OAuthDenied

            raise OAuthDenied(f"The user declined to sign in to {info['server']}.")

    async with agent_runtime(tmp_path / "home", notes_catalog(tmp_path, pair), memory_keyring) as runtime:
        io = DecliningIO(runtime, answers=["Cancel"])
        result = await run(runtime, io)
        assert result["status"] == "cancelled", result["summary"]
        assert any("Signing in to io.test/notes failed" in t and "declined" in t for t in io.said)
        assert io.questions[-1][1] == ["Try again", "Cancel"]
        assert tool_calls(result, "mcp_setup_install_and_connect") == []
