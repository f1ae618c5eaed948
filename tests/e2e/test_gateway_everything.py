"""The real ``@modelcontextprotocol/server-everything`` (npx, which needs the npm registry or its
cache) behind ``mcp-setup mcp``, with the SDK's client: what passes through (#29).

Its sampling, elicitation and roots requests and its log messages reach the client whose call
caused them (requests are refused cleanly for a client that declared none). Progress of its long-running tool reaches the client (direct and through the find/call pair),
the install's stages arrive as progress, the install result says the pair works at once, a
client that never re-lists finds and calls a new tool, every gateway name fits Claude Code's
budget, a ``resource_link`` a tool returned is read through the gateway, and its prompts,
completions, resources and templates pass through. Its first download, into a cold npm cache,
runs in the sandbox with npm's registry as its only destination, and the server runs sandboxed
from the read-only view of what it fetched.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from setup_agent.store.catalog import gateway_name
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.mcp_face import Recorder, call, face_env, mcp_setup_client
from tests.helpers.registry_entries import everything_entry
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
# 49 characters as <slug>__<tool>: shortened (stably) to fit 48.
LONG = gateway_name("server-everything", "trigger-long-running-operation")


class Progress:
    """The progress notifications one call heard."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


class Logs:
    """The log messages (``notifications/message``) a client heard."""

    def __init__(self) -> None:
        self.seen: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.seen.append(params)


async def sampled(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    asked = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"sampled: {asked}"), model="test-model"
    )


async def elicited(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})


async def rooted(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # still the 2025-11-25 way
async def test_sampling_elicitation_roots_and_logs_of_the_real_server_everything_reach_the_client_whose_call_caused_them(
    tmp_path: Path,
) -> None:
    assert shutil.which("npx"), "npx is needed for this test (Debian: apt-get install nodejs npm)"
    entry = everything_entry()
    logs = Logs()
    with FakeOfficialRegistry([entry]) as registry:
        env = face_env(
            tmp_path,
            MCP_SETUP_REGISTRIES="official",
            MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
            MCP_SETUP_PROBE_TIMEOUT_SECONDS="240",
        )
        with anyio.fail_after(scaled(300)):
            async with mcp_setup_client(
                tmp_path,
                tmp_path / "err.log",
                Recorder(),
                env=env,
                sampling_callback=sampled,
                elicitation_callback=elicited,
                list_roots_callback=rooted,
                logging_callback=logs,
            ) as client:
                installed = await call(client, "mcp_setup_install_and_connect", {"qualified_name": entry["name"]})
                assert installed["status"] == "connected", json.dumps(installed)[:2000]
                # Its first download (a cold npm cache) ran sandboxed, to npm's registry only.
                said = (tmp_path / "err.log").read_text(errors="replace")
                assert "download of a npm package sandboxed (bwrap-netns), to registry.npmjs.org:443 only" in said
                names = {t.name for t in (await client.list_tools()).tools}
                # The gateway declared what it relays: the server shows the tools that need it.
                sample, elicit, roots = (
                    f"server-everything__{n}"
                    for n in ("trigger-sampling-request", "trigger-elicitation-request", "get-roots-list")
                )
                assert {sample, elicit, roots} <= names, sorted(names)
                sampled_answer = await client.call_tool(sample, {"prompt": "hello there", "maxTokens": 5})
                assert "sampled: " in sampled_answer.content[0].text and "hello there" in sampled_answer.content[0].text
                elicited_answer = await client.call_tool(elicit, {})
                assert "Ada Lovelace" in str(elicited_answer.content), elicited_answer.content
                rooted_answer = await client.call_tool(roots, {})
                assert "file:///work/project" in str(rooted_answer.content), rooted_answer.content

                # Its log messages reach the client whose call is in flight; setLevel is forwarded.
                await client.set_logging_level("debug")
                await client.call_tool("server-everything__toggle-simulated-logging", {})
                await client.call_tool(LONG, {"duration": 6.5, "steps": 2})  # the server logs every 5 s
                assert logs.seen, "no log message of the server reached the client"

            # A client that declared none of it: the same calls are refused cleanly, nothing hangs.
            async with mcp_setup_client(tmp_path, tmp_path / "err.log", Recorder(), env=env) as bare:
                refused = await bare.call_tool(sample, {"prompt": "hello", "maxTokens": 5})
                assert refused.is_error or "no client that can answer" in str(refused.content), refused


async def test_progress_the_find_call_pair_short_names_and_a_resource_link_read_with_the_real_server_everything(
    tmp_path: Path,
) -> None:
    assert shutil.which("npx"), "npx is needed for this test (Debian: apt-get install nodejs npm)"
    assert LONG == "server-everything__trigger-long-running_cf3699b8"
    entry = everything_entry()
    with FakeOfficialRegistry([entry]) as registry:
        env = face_env(
            tmp_path,
            MCP_SETUP_REGISTRIES="official",
            MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
            MCP_SETUP_PROBE_TIMEOUT_SECONDS="240",
        )
        with anyio.fail_after(scaled(300)):
            async with mcp_setup_client(tmp_path, tmp_path / "err.log", Recorder(), env=env) as client:
                before = {t.name for t in (await client.list_tools()).tools}  # listed once, never again below
                stages = Progress()
                answer = await client.call_tool(
                    "mcp_setup_install_and_connect", {"qualified_name": entry["name"]}, progress_callback=stages
                )
                installed = json.loads(answer.content[0].text)
                assert installed["status"] == "connected", json.dumps(installed)[:2000]
                assert "mcp_setup_call_tool" in installed["use_now"]
                messages = [m or "" for _, _, m in stages.seen]
                assert any("connected" in m for m in messages), messages
                assert [p for p, _, _ in stages.seen] == sorted(p for p, _, _ in stages.seen)

                # A client that never re-lists: the pair finds and calls the new tool.
                found = await call(client, "mcp_setup_find_tools", {"query": "long running operation", "limit": 3})
                assert found["tools"][0]["name"] == LONG
                via_pair = Progress()
                done = await client.call_tool(
                    "mcp_setup_call_tool",
                    {"name": LONG, "arguments": {"duration": 0.6, "steps": 3}},
                    progress_callback=via_pair,
                )
                assert "completed" in done.content[0].text and not done.is_error
                assert [(p, t) for p, t, _ in via_pair.seen] == [(1, 3), (2, 3), (3, 3)]

                # A client that re-lists: every name fits 64 - len("mcp__mcp-setup__"), progress arrives.
                names = {t.name for t in (await client.list_tools()).tools}
                assert LONG in names and LONG not in before
                assert all(NAME_RULE.match(n) for n in names), sorted(n for n in names if not NAME_RULE.match(n))
                direct = Progress()
                await client.call_tool(LONG, {"duration": 0.6, "steps": 3}, progress_callback=direct)
                assert [(p, t) for p, t, _ in direct.seen] == [(1, 3), (2, 3), (3, 3)]

                # A resource_link a gateway tool returned is read through the gateway, from its server.
                links = await client.call_tool("server-everything__get-resource-links", {"count": 2})
                linked = [c for c in links.content if c.type == "resource_link"]
                assert len(linked) == 2
                read = await client.read_resource(str(linked[0].uri))
                assert [str(c.uri) for c in read.contents] == [str(linked[0].uri)]
                assert getattr(read.contents[0], "text", None) or getattr(read.contents[0], "blob", None)
                with pytest.raises(MCPError):  # the one server with resources answers: it has none such
                    await client.read_resource("demo://resource/never-linked")

                # Its prompts are listed (namespaced) and got, completed at the server; its
                # resources and templates are listed and read from it (#29 item 4).
                prompts = {p.name for p in (await client.list_prompts()).prompts}
                assert {"server-everything__simple-prompt", "server-everything__args-prompt"} <= prompts, prompts
                simple = await client.get_prompt("server-everything__simple-prompt", {})
                assert "simple prompt" in simple.messages[0].content.text  # type: ignore[union-attr]
                argued = await client.get_prompt("server-everything__args-prompt", {"city": "Lyon"})
                assert "Lyon" in argued.messages[0].content.text  # type: ignore[union-attr]
                done = await client.complete(
                    types.PromptReference(type="ref/prompt", name="server-everything__completable-prompt"),
                    {"name": "department", "value": "Eng"},
                )
                assert done.completion.values == ["Engineering"]
                templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
                assert "demo://resource/dynamic/text/{resourceId}" in templates, templates
                dynamic = await client.read_resource("demo://resource/dynamic/text/3")
                assert str(dynamic.contents[0].uri) == "demo://resource/dynamic/text/3"
                assert (await client.list_resources()).resources
