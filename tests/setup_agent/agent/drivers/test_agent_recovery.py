"""#25 items 4 and 5: what the guided assistant offers after a failed test, and what it says
about settings; npm's "no such package/version" in its own words (setup_agent/launch/repairs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from setup_agent.launch import LaunchSpec
from setup_agent.launch.repairs import diagnose
from tests.helpers.add_flow import make_catalog as make_mode_catalog
from tests.helpers.agent import ScriptedIO, agent_runtime, choose, make_catalog
from tests.helpers.guided import run

pytestmark = pytest.mark.anyio


def tool_calls(result: dict, name: str) -> list[dict]:
    return [e for e in result["transcript"] if e.get("role") == "tool" and e.get("name") == name]


async def test_after_a_crash_try_again_and_show_the_log_are_offered_not_re_enter_the_key(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_mode_catalog(tmp_path, canary, mode="crash")
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(
            runtime,
            answers=[
                choose(lambda c: c == "Show the log"),
                choose(lambda c: c == "Try again"),
                choose(lambda c: c == "Cancel"),
            ],
            secrets=[canary],
        )
        result = await run(runtime, io, "set up io.github.mcp-setup/stub")
        assert result["status"] == "cancelled", (result["summary"], io.unexpected)
        first, after_log, second = (choices for _, choices in io.questions)
        assert first == ["Try again", "Show the log", "Cancel"]  # a crash that names no key: not the key's fault
        assert after_log == ["Try again", "Cancel"]  # the log was shown once
        log = next(t for t in io.said if t.startswith("The server's last output (secrets hidden):"))
        assert "simulated crash" in log and canary not in log
        assert second == first  # tried again: the same crash, the same offer
        assert len(tool_calls(result, "mcp_setup_test_connection")) == 2
        assert [p.key_name for p in io.prompts] == ["STUB_API_KEY"]  # asked once: the retry reuses it
        assert canary not in json.dumps(result)


async def test_a_refused_key_is_still_offered_again_and_no_try_again(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    catalog = make_catalog(tmp_path, canary)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[choose(lambda c: c == "Cancel")], secrets=["wrong-" + canary[::-1]])
        result = await run(runtime, io)
        assert io.questions[0][1] == ["Re-enter STUB_API_KEY", "Cancel"]
        assert result["status"] == "cancelled"


async def test_a_required_setting_with_a_default_is_not_said_to_be_left_unset(
    tmp_path: Path, canary: str, memory_keyring
) -> None:
    extra = [
        {"name": "STUB_REGION", "description": "Region.", "isRequired": True, "default": "eu"},
        {"name": "STUB_COLOUR", "description": "Colour.", "isRequired": False, "default": "blue"},
        {"name": "STUB_EXTRA", "description": "Extra.", "isRequired": False},
    ]
    catalog = make_catalog(tmp_path, canary, extra_env=extra)
    async with agent_runtime(tmp_path / "home", catalog, memory_keyring) as runtime:
        io = ScriptedIO(runtime, answers=[""] * 3, secrets=[canary])  # Enter: the default
        result = await run(runtime, io)
        assert result["status"] == "installed", (result["summary"], io.unexpected)
        said = [t for t in io.said if t.startswith("Optional settings left unset")]
        assert said == ["Optional settings left unset: STUB_EXTRA."], io.said


@pytest.mark.parametrize(
    ("tail", "words"),
    [
        (
            "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fserver-nope - Not found\n"
            "npm error 404  '@acme/server-nope@1.0.0' is not in this registry.",
            "npm has no package @acme/server-nope",
        ),
        (
            "npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/left-padx - Not found",
            "npm has no package left-padx",
        ),
        (
            "npm error code ETARGET\nnpm error notarget No matching version found for @acme/server@9.9.9.\n",
            "npm has no version 9.9.9 of @acme/server",
        ),
    ],
)
def test_npm_without_the_package_or_version_is_said_in_those_words(tail: str, words: str) -> None:
    spec = LaunchSpec(command="npx", args=["-y", "@acme/server-nope@1.0.0"])
    found = diagnose(spec, tail)
    assert (found.part, found.reason) == ("package", words)
