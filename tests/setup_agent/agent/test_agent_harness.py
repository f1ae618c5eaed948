"""The harness: archetypes, the allowlist, limits, secret-looking answers, the result shape."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import anyio
import pytest

from setup_agent.agent.archetypes import load_archetypes
from setup_agent.agent.harness import WITHHELD, AgentSession, looks_like_secret, scrub_secrets
from setup_agent.agent.spawn import spawn_subagent
from setup_agent.secrets.redact import Redactor
from tests.helpers.agent import SETUP_AGENT_TOOLS, ScriptedIO, agent_runtime, make_catalog
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


def test_the_shipped_archetype_allows_only_the_six_setup_tools_and_the_chat_primitives() -> None:
    registry = load_archetypes()
    assert registry.errors == {}
    agent = registry.get("mcp_setup")
    assert agent.tools == SETUP_AGENT_TOOLS
    assert agent.driver == "guided" and agent.max_turns > 0 and agent.max_seconds > 0
    assert "mcp_setup_request_secret" in agent.prompt and "never" in agent.prompt.lower()


def test_a_broken_archetype_file_is_named_and_the_others_still_load(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("You help.")
    (tmp_path / "good.toml").write_text('id = "good"\ndescription = "d"\nprompt = "good.md"\ntools = ["say"]\n')
    (tmp_path / "broken.toml").write_text('id = "broken"\ndescription = \n')
    (tmp_path / "noprompt.toml").write_text('id = "np"\ndescription = "d"\nprompt = "missing.md"\ntools = []\n')
    registry = load_archetypes(tmp_path)
    assert list(registry.agents) == ["good"]
    assert set(registry.errors) == {"broken.toml", "noprompt.toml"}
    assert registry.errors["broken.toml"].startswith("broken.toml: ")
    assert "missing.md" in registry.errors["noprompt.toml"]
    with pytest.raises(KeyError, match="known: good"):
        registry.get("broken")


@pytest.mark.parametrize(
    "text",
    [
        "sk-proj-abcdefghijklmnop1234",
        "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "secret_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdef",
        "ntn_123456789012AbCdEfGhIjKlMnOpQrStUvWxYz",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "my key is Zq8vR2mK9xL4pW7nB3cT6yH1",
        "postgres://admin:hunter2hunter2@db.example.com/app",
    ],
)
def test_secret_looking_answers_are_recognized(text: str) -> None:
    assert looks_like_secret(text)


@pytest.mark.parametrize(
    "text",
    [
        "1",
        "yes",
        "us-east-1",
        "io.github.mcp-setup/stub-beta (local): Stub server",
        "my-workspace",
        "https://example.com/a/b/c/d/e/f",
        "/home/me/projects/mcp-servers-2024",
        "Notion workspace for the marketing team",
        "",
    ],
)
def test_ordinary_answers_are_not_mistaken_for_secrets(text: str) -> None:
    assert not looks_like_secret(text)


def test_a_value_the_redactor_knows_counts_as_a_secret_and_scrub_replaces_only_the_tokens() -> None:
    redactor = Redactor()
    redactor.register("short-pw", "[secret:PW]")
    assert looks_like_secret("it is short-pw", redactor)
    text, found = scrub_secrets("set up notion with ntn_123456789012AbCdEfGhIjKl please")
    assert text == f"set up notion with {WITHHELD} please" and found == ["ntn_123456789012AbCdEfGhIjKl"]


async def test_a_tool_outside_the_allowlist_is_refused_as_a_result_and_counts_as_a_turn(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        agent = load_archetypes().get("mcp_setup")
        session = AgentSession(
            agent, "stub", service=runtime.service, redactor=runtime.redactor, io=ScriptedIO(runtime)
        )
        for name in ("mcp_setup_remove", "read_file", "mcp_setup_list_servers"):
            refused = await session.call(name, {"server_id": "x"})
            assert refused["ok"] is False and refused["error"]["code"] == "tool_not_allowed"
        bad = await session.call("mcp_setup_search", "not an object")
        assert bad["error"]["code"] == "invalid_input"
        found = await session.call("mcp_setup_search", {"query": "stub"})
        assert [s["qualified_name"] for s in found["servers"]] == ["io.github.mcp-setup/stub"]
        assert session.turns == 5
        assert [m["name"] for m in session.transcript if m["role"] == "tool"] == [
            "mcp_setup_remove",
            "read_file",
            "mcp_setup_list_servers",
            "mcp_setup_search",
            "mcp_setup_search",
        ]


async def test_the_time_limit_stops_the_run_as_failed(tmp_path: Path, canary: str, memory_keyring) -> None:
    catalog = make_catalog(tmp_path, canary)
    ticks = itertools.count(0, 1000)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        with anyio.fail_after(scaled(30)):
            result = await spawn_subagent(
                "mcp_setup",
                {"goal": "stub"},
                service=runtime.service,
                redactor=runtime.redactor,
                io=ScriptedIO(runtime),
                clock=lambda: next(ticks),
            )
        assert result["status"] == "failed"
        assert "time limit" in result["summary"] and "Nothing was installed" in result["summary"]


async def test_a_secret_in_the_goal_is_left_out_of_the_transcript(tmp_path: Path, canary: str, memory_keyring) -> None:
    catalog = make_catalog(tmp_path, canary)
    goal = f"set up the stub server with key secret_{canary}"
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, secrets=[canary])
        with anyio.fail_after(scaled(60)):
            result = await spawn_subagent(
                "mcp_setup", {"goal": goal}, service=runtime.service, redactor=runtime.redactor, io=io
            )
        assert result["status"] == "installed", result["summary"]
        assert result["transcript"][0] == {"role": "user", "content": f"set up the stub server with key {WITHHELD}"}
        assert canary not in json.dumps(result)
        assert any("looks like a secret" in text for text in io.said)


async def test_spawn_subagent_returns_the_result_shape_and_rejects_unknown_agents(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        kwargs = {"service": runtime.service, "redactor": runtime.redactor, "io": ScriptedIO(runtime, secrets=[canary])}
        with pytest.raises(KeyError, match="No agent archetype"):
            await spawn_subagent("nope", {"goal": "stub"}, **kwargs)
        with pytest.raises(KeyError, match="No agent driver"):
            await spawn_subagent("mcp_setup", {"goal": "stub"}, driver="nope", **kwargs)
        with pytest.raises(ValueError, match="goal"):
            await spawn_subagent("mcp_setup", {}, **kwargs)
        with anyio.fail_after(scaled(60)):
            result = await spawn_subagent("mcp_setup", {"goal": "stub"}, **kwargs)
        assert set(result) == {"status", "server_id", "tools", "summary", "transcript"}
        assert result["status"] == "installed" and result["server_id"].startswith("srv_")
        assert json.loads(json.dumps(result)) == result  # plain JSON, ready for a JSON-RPC response
        assert result["transcript"][-1]["role"] == "result"
