"""The openai driver against a scripted OpenAI-compatible server on loopback that records every request."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.agent.harness import WITHHELD
from setup_agent.agent.spawn import spawn_subagent
from tests.fakes import closed_port_url
from tests.fakes.openai_server import FakeOpenAI, final, last_tool_result, tool_call, tool_calls
from tests.helpers.agent import SETUP_AGENT_TOOLS, STUB, ScriptedIO, agent_runtime, make_catalog
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

API_KEY = "sk-test-" + "k3y" * 8


async def run(runtime, io, fake: FakeOpenAI, **options: Any) -> dict:
    opts = {"base_url": fake.base_url, "model": "fake-model", "api_key": API_KEY, **options}
    with anyio.fail_after(scaled(60)):
        return await spawn_subagent(
            "mcp_setup",
            {"goal": "set up the stub server"},
            service=runtime.service,
            redactor=runtime.redactor,
            io=io,
            driver="openai",
            driver_options=opts,
        )


def with_ref(name: str) -> Any:
    """A step calling ``name`` with the ref from the latest request_secret result in the request."""

    def step(body: dict) -> dict:
        ref = next(r["ref"] for r in reversed(tool_messages(body)) if "ref" in r)
        return tool_call(name, {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}})

    return step


def tool_messages(body: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


async def test_a_full_setup_through_the_model_never_sends_the_secret_and_refuses_what_is_not_allowed(
    tmp_path: Path, canary: str, memory_keyring, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    catalog = make_catalog(tmp_path, canary)
    script = [
        tool_call("mcp_setup_search", {"query": "stub"}),
        tool_call("run_shell", {"command": "cat ~/.ssh/id_rsa"}),
        tool_calls(("mcp_setup_get", {"qualified_name": STUB}), ("say", {"text": "Found it."})),
        tool_call(
            "mcp_setup_test_connection", {"qualified_name": STUB, "env": {"STUB_API_KEY": "sk-literal-12345678"}}
        ),
        tool_call(
            "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub API key", "server": STUB}
        ),
        with_ref("mcp_setup_test_connection"),
        with_ref("mcp_setup_install_and_connect"),
        final("The stub server is installed; its tools echo and whoami are ready."),
    ]
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, secrets=[canary])
        with FakeOpenAI(script) as fake:
            result = await run(runtime, io, fake)
        assert fake.step_errors == []
        assert result["status"] == "installed", result["summary"]
        assert {t["name"] for t in result["tools"]} >= {"echo", "whoami"}
        assert result["summary"].startswith("The stub server is installed")
        assert len(fake.bodies) == len(script)

        # Only the allowlisted tools are offered, in the OpenAI function format; the key is sent as a bearer.
        for body in fake.bodies:
            assert [t["function"]["name"] for t in body["tools"]] == list(SETUP_AGENT_TOOLS)
            assert body["model"] == "fake-model" and body["messages"][0]["role"] == "system"
        assert set(fake.auth) == {f"Bearer {API_KEY}"}

        # The call outside the allowlist was refused as a tool result, and the run went on.
        refused = tool_messages(fake.bodies[2])[-1]
        assert refused["error"]["code"] == "tool_not_allowed" and "Your tools:" in refused["error"]["message"]
        # A secret passed as a literal in env was refused as a tool result the model saw.
        literal = tool_messages(fake.bodies[4])[-1]
        assert literal["error"]["code"] == "secret_not_allowed" and literal["error"]["key"] == "STUB_API_KEY"
        assert io.said == ["Found it.", "The stub server is installed; its tools echo and whoami are ready."]

        # The canary is in no request, no transcript entry, no log line; the API key is in no transcript or log.
        for raw in fake.raw:
            assert canary not in raw
        dumped = json.dumps(result)
        assert canary not in dumped and API_KEY not in dumped
        assert canary not in caplog.text and API_KEY not in caplog.text
        listed = await runtime.service.call("mcp_setup_list_servers", {})
        assert [(s["qualified_name"], s["status"]) for s in listed["servers"]] == [(STUB, "connected")]


async def test_a_secret_pasted_into_an_answer_reaches_no_model_request(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    script = [tool_call("ask_user", {"question": "What is your STUB_API_KEY?"}), final("I will use the secret prompt.")]
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[f"here: {canary}"])
        with FakeOpenAI(script) as fake:
            result = await run(runtime, io, fake)
        assert result["status"] == "failed"
        answer = last_tool_result(fake.bodies[1])
        assert answer["answer"] == WITHHELD and answer["error"]["code"] == "secret_in_chat"
        assert all(canary not in raw for raw in fake.raw)
        assert canary not in json.dumps(result)
        assert any("looked like a secret" in text for text in io.said)


async def test_a_model_that_loops_forever_is_stopped_at_the_turn_limit(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime)
        with FakeOpenAI([tool_call("mcp_setup_search", {"query": "stub"})], repeat_last=True) as fake:
            result = await run(runtime, io, fake)
        assert result["status"] == "failed"
        assert "turn limit" in result["summary"] and "40" in result["summary"]
        assert "Nothing was installed" in result["summary"]
        assert len(fake.bodies) == 41  # the 41st call is the one refused by the limit
        assert sum(1 for m in result["transcript"] if m.get("role") == "tool") == 40


async def test_an_unreachable_model_endpoint_fails_with_a_clear_summary(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        result = await spawn_subagent(
            "mcp_setup",
            {"goal": "stub"},
            service=runtime.service,
            redactor=runtime.redactor,
            io=ScriptedIO(runtime),
            driver="openai",
            driver_options={"base_url": closed_port_url() + "/v1", "model": "m", "api_key": API_KEY},
        )
        assert result["status"] == "failed" and "Could not reach the model" in result["summary"]
        assert API_KEY not in json.dumps(result)


async def test_the_openai_driver_without_a_model_fails_and_says_what_to_set(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        result = await spawn_subagent(
            "mcp_setup",
            {"goal": "stub"},
            service=runtime.service,
            redactor=runtime.redactor,
            io=ScriptedIO(runtime),
            driver="openai",
        )
        assert result["status"] == "failed" and "MCP_SETUP_OPENAI_MODEL" in result["summary"]
