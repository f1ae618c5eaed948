"""The guided driver, with a scripted ChatIO against the real core and the stub server (no pty)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import anyio
import pytest

from setup_agent.agent.drivers.guided import goal_query
from setup_agent.agent.harness import WITHHELD, AgentCancelled
from setup_agent.agent.spawn import spawn_subagent
from tests.test_agent_support import STUB, ScriptedIO, agent_runtime, choose, make_catalog
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio

ALPHA, BETA = "io.github.mcp-setup/stub-alpha", "io.github.mcp-setup/stub-beta"


@pytest.mark.parametrize(
    ("goal", "query"),
    [
        ("set up the Notion MCP server for me", "notion"),
        ("Please install GitHub", "github"),
        ("I want to add brave search mcp", "brave search"),
        ("can you set up the stub server?", "stub"),
        ("set up the server", ""),
    ],
)
def test_the_goal_is_read_without_filler_words(goal: str, query: str) -> None:
    assert goal_query(goal) == query


async def run(runtime, io, goal: str = "set up the stub server") -> dict:
    with anyio.fail_after(scaled(60)):
        return await spawn_subagent(
            "mcp_setup", {"goal": goal}, service=runtime.service, redactor=runtime.redactor, io=io
        )


def tool_calls(result: dict, name: str) -> list[dict]:
    return [m for m in result["transcript"] if m.get("role") == "tool" and m["name"] == name]


async def test_an_ambiguous_search_asks_the_user_to_choose_among_the_top_few(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary, names=(ALPHA, BETA))
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c.startswith(BETA))], secrets=[canary])
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        question, choices = io.questions[0]
        assert "Which one" in question
        assert choices is not None and len(choices) == 3 and choices[-1] == "None of these"
        assert [c.split(" ")[0] for c in choices[:2]] == [ALPHA, BETA]
        assert [m["arguments"]["qualified_name"] for m in tool_calls(result, "mcp_setup_get")] == [BETA]
        listed = await runtime.service.call("mcp_setup_list_servers", {})
        assert [(s["qualified_name"], s["status"], s["installed_by"]) for s in listed["servers"]] == [
            (BETA, "connected", "agent")
        ]
        assert {t["name"] for t in result["tools"]} >= {"echo", "whoami"}
        assert "echo" in result["summary"] and canary not in json.dumps(result)


async def test_none_of_these_then_enter_stops_without_installing(tmp_path: Path, canary: str, memory_keyring) -> None:
    catalog = make_catalog(tmp_path, canary, names=(ALPHA, BETA))
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c == "None of these"), ""])
        result = await run(runtime, io)
        assert result["status"] == "failed" and "no server was chosen" in result["summary"]
        assert "server_id" not in result


async def test_a_clear_name_match_is_taken_without_asking(tmp_path: Path, canary: str, memory_keyring) -> None:
    catalog = make_catalog(tmp_path, canary, names=(STUB, ALPHA))
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, secrets=[canary])
        result = await run(runtime, io, "Please install the stub MCP server for me")
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        assert io.questions == []
        assert [m["arguments"]["query"] for m in tool_calls(result, "mcp_setup_search")] == ["stub"]


async def test_a_wrong_secret_is_explained_and_only_that_key_is_asked_again(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(
            runtime, answers=[choose(lambda c: c == "Re-enter STUB_API_KEY")], secrets=["wrong-" + canary[::-1], canary]
        )
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        assert [p.key_name for p in io.prompts] == ["STUB_API_KEY", "STUB_API_KEY"]
        assert any("invalid API key for STUB_API_KEY" in text for text in io.said)
        assert io.questions[0][1] == ["Re-enter STUB_API_KEY", "Cancel"]  # one package: nothing else to try
        tests = tool_calls(result, "mcp_setup_test_connection")
        assert [t["result"].get("ok", True) for t in tests] == [False, True]
        refs = [t["arguments"]["env_refs"]["STUB_API_KEY"] for t in tests]
        assert refs[0] != refs[1] and all(r.startswith("secret://") for r in refs)
        assert canary not in json.dumps(result) and canary[::-1] not in json.dumps(result)


async def test_a_secret_pasted_into_a_chat_answer_is_withheld_and_asked_through_the_secret_prompt(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    # Not the stub value, nor a form of it (reversed, cased…): the redactor knows those once installed.
    pasted = "sk-proj-" + uuid.uuid4().hex
    workspace = {"name": "STUB_WORKSPACE", "description": "Your workspace name", "isRequired": True, "isSecret": False}
    catalog = make_catalog(tmp_path, canary, extra_env=[workspace])
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[f"my key is {pasted}"], secrets=["team-a", canary])
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        assert io.questions[0][0].startswith("STUB_WORKSPACE")
        assert any("looked like a secret" in text for text in io.said)
        assert [p.key_name for p in io.prompts] == ["STUB_WORKSPACE", "STUB_API_KEY"]
        asked = tool_calls(result, "ask_user")[0]
        assert asked["result"]["answer"] == WITHHELD and asked["result"]["error"]["code"] == "secret_in_chat"
        installed = tool_calls(result, "mcp_setup_install_and_connect")[0]["arguments"]
        assert set(installed["env_refs"]) == {"STUB_WORKSPACE", "STUB_API_KEY"} and installed["env"] == {}
        dumped = json.dumps(result)
        assert pasted not in dumped and canary not in dumped
        assert runtime.redactor.redact(pasted) == pasted  # withheld only for the run


async def test_a_missing_runtime_is_explained_with_what_to_install(tmp_path: Path, canary: str, memory_keyring) -> None:
    catalog = make_catalog(tmp_path, canary)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring, host_env={"PATH": str(empty)}) as runtime:
        io = ScriptedIO(runtime, secrets=[canary])
        result = await run(runtime, io)
        assert result["status"] == "failed"
        explained = [t for t in io.said if "python3" in t]
        assert explained and "Install Python 3" in explained[0], io.said
        assert "python3" in result["summary"] and "Nothing was installed" in result["summary"]
        assert io.questions == []  # nothing the user could pick would help
        assert (await runtime.service.call("mcp_setup_list_servers", {}))["servers"] == []


async def test_cancel_at_a_question_ends_the_run_as_cancelled(tmp_path: Path, canary: str, memory_keyring) -> None:
    catalog = make_catalog(tmp_path, canary, names=(ALPHA, BETA))
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[AgentCancelled("Ctrl-C")])
        result = await run(runtime, io)
        assert result["status"] == "cancelled" and "Cancelled" in result["summary"]
        assert tool_calls(result, "mcp_setup_get") == []


async def test_cancel_at_the_secret_prompt_cancels_the_prompt_and_the_run(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, secrets=[AgentCancelled("closed the dialog")])
        result = await run(runtime, io)
        assert result["status"] == "cancelled"
        assert runtime.broker.pending() == []
        assert tool_calls(result, "mcp_setup_test_connection") == []


async def test_choosing_cancel_after_a_failed_test_ends_the_run_as_cancelled(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c == "Cancel")], secrets=["wrong-value-1234"])
        result = await run(runtime, io)
        assert result["status"] == "cancelled"
        assert (await runtime.service.call("mcp_setup_list_servers", {}))["servers"] == []


async def test_two_unreachable_remotes_are_each_tried_once_then_the_run_stops_with_a_summary(
    tmp_path: Path, memory_keyring
) -> None:
    import socket

    from setup_agent.agent.drivers.recovery import pointed_key as _pointed_key

    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    doc = {
        "name": "io.github.acme/two-remotes",
        "description": "Two remotes",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": f"http://127.0.0.1:{p}/mcp"} for p in ports],
    }
    (catalog / "two.json").write_text(json.dumps(doc))
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c.startswith("Try the"))] * 5)
        result = await run(runtime, io, "set up two-remotes")
        assert result["status"] == "failed", result["summary"]
        tests = tool_calls(result, "mcp_setup_test_connection")
        assert len(tests) == 2  # each option once, never the same option with the same inputs again
        assert len(io.questions) == 1 and "every option failed" in result["summary"]
    # a timeout or an unreachable server is not fixed by typing the key again (#12 item 2)
    keys = [{"name": "API_KEY", "secret": True}]
    for code in ("timeout", "unreachable", "package_not_found"):
        assert _pointed_key({"code": code, "message": "x"}, keys, {"API_KEY": "secret://r"}) is None
    assert _pointed_key({"code": "rejected", "message": "x"}, keys, {"API_KEY": "secret://r"}) == "API_KEY"


async def test_an_optional_secret_is_offered_and_stored_when_the_user_says_yes(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    optional = "optional-" + canary[::-1]
    extra = [
        {
            "name": "STUB_EXTRA_TOKEN",
            "description": "A token for more requests.",
            "isRequired": False,
            "isSecret": True,
            "format": "string",
        }
    ]
    catalog = make_catalog(tmp_path, canary, extra_env=extra)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c == "Yes")], secrets=[canary, optional])
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        ((question, choices),) = io.questions
        assert "STUB_EXTRA_TOKEN" in question and "optional" in question and choices == ["No", "Yes"]
        assert runtime.store.values.env_values(result["server_id"])["STUB_EXTRA_TOKEN"].reveal() == optional
        assert optional not in json.dumps(result) and canary not in json.dumps(result)


async def test_an_optional_secret_declined_is_left_unset_and_said_so(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    extra = [
        {
            "name": "STUB_EXTRA_TOKEN",
            "description": "A token for more requests.",
            "isRequired": False,
            "isSecret": True,
            "format": "string",
        }
    ]
    catalog = make_catalog(tmp_path, canary, extra_env=extra)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c == "No")], secrets=[canary])
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        said = [m["arguments"]["text"] for m in tool_calls(result, "say")]
        assert "Optional settings left unset: STUB_EXTRA_TOKEN." in said
        assert "STUB_EXTRA_TOKEN" not in runtime.store.values.env_values(result["server_id"])


async def test_nothing_found_says_which_registry_could_not_be_searched(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    import socket

    from app.runtime import build_runtime
    from app.settings import Settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: the official registry is unreachable
    catalog = make_catalog(tmp_path, canary)
    settings = Settings(
        home=tmp_path / "home",
        registries="official,smithery,local",
        catalog_dir=catalog,
        official_registry_url=f"http://127.0.0.1:{port}",
    )
    runtime = build_runtime(settings, keyring_backend=memory_keyring)
    try:
        io = ScriptedIO(runtime, answers=[""])
        result = await run(runtime, io, "set up the Notion MCP server")
        said = [m["arguments"]["text"] for m in tool_calls(result, "say")]
        assert any(
            t.startswith("I found no MCP server matching “notion” in the registries that answered") and "official" in t
            for t in said
        ), said
        assert not any("smithery" in t.lower() for t in said), said  # no key: not searched, and not a failure
    finally:
        await runtime.aclose()
