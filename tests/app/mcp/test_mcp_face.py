"""The stdio MCP face's conventions: the smoke test, client provenance, prompt resources."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import anyio
import pytest

from app.mcp.face import PROMPT_URI_PREFIX, provenance_label
from tests.helpers.mcp_face import REPO, Recorder, face_env, mcp_setup_argv, mcp_setup_client
from tests.helpers.timeouts import scaled

SMOKE_INPUT = (
    "\n".join(
        [
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "smoke-test", "version": "1.0"},
                    },
                }
            ),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ]
    )
    + "\n"
)


def test_the_smoke_test_prints_exactly_two_compact_json_lines(tmp_path: Path) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
    proc = subprocess.run(
        mcp_setup_argv("mcp"), input=SMOKE_INPUT, capture_output=True, text=True, env=env, cwd=REPO, timeout=scaled(60)
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout + proc.stderr
    first, second = (json.loads(line) for line in lines)
    for line in lines:
        assert line == json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False)
    assert first["id"] == 1 and first["result"]["protocolVersion"] == "2025-06-18"
    caps = first["result"]["capabilities"]
    assert "tools" in caps
    # Installed servers' prompts and resources pass through (#29): their lists change with installs.
    assert caps["resources"] == {"subscribe": True, "listChanged": True}  # subscriptions pass through too
    assert caps["prompts"] == {"listChanged": True} and "completions" in caps and "logging" in caps
    assert second["id"] == 2
    names = {t["name"] for t in second["result"]["tools"]}
    assert names == {
        "mcp_setup_search",
        "mcp_setup_get",
        "mcp_setup_request_secret",
        "mcp_setup_test_connection",
        "mcp_setup_install_and_connect",
        "mcp_setup_list_servers",
        "mcp_setup_remove",
        "mcp_setup_authorize",
        "mcp_setup_find_tools",  # the gateway's pair (#29 item 9), not the sub-agent's
        "mcp_setup_call_tool",
    }
    assert proc.returncode == 0


def test_the_smoke_test_prints_the_same_lines_when_stdin_and_stdout_are_files(tmp_path: Path) -> None:
    """On pipes the face reads stdin and writes stdout on its event loop; on files (or a tty)
    the SDK's own stdio reader and writer do: both must put the same bytes on the wire."""
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
    piped = subprocess.run(
        mcp_setup_argv("mcp"), input=SMOKE_INPUT, capture_output=True, text=True, env=env, cwd=REPO, timeout=scaled(60)
    )
    (tmp_path / "in.jsonl").write_text(SMOKE_INPUT)
    with (tmp_path / "in.jsonl").open("rb") as stdin, (tmp_path / "out.jsonl").open("wb") as stdout:
        from_files = subprocess.run(
            mcp_setup_argv("mcp"),
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
            timeout=scaled(60),
        )
    written = (tmp_path / "out.jsonl").read_text()
    assert piped.returncode == 0 and from_files.returncode == 0, from_files.stderr
    assert len(piped.stdout.splitlines()) == 2 and written == piped.stdout


@pytest.mark.parametrize(
    ("client_name", "label"),
    [
        ("Claude Desktop", "mcp:claude-desktop"),
        ("  Cursor  ", "mcp:cursor"),
        ("Visual Studio Code", "mcp:visual-studio-code"),
        ("VS_Code--Insiders!!", "mcp:vs-code-insiders"),
        ("Zed 0.150 (preview)", "mcp:zed-0-150-preview"),
        ("Café Client", "mcp:caf-client"),
        ("---", "mcp"),
        ("", "mcp"),
        ("   ", "mcp"),
        ("日本語", "mcp"),
        (None, "mcp"),
    ],
)
def test_client_names_become_provenance_labels(client_name: str | None, label: str) -> None:
    assert provenance_label(client_name) == label


def _agent_ids_on_disk() -> set[str]:
    ids = set()
    for path in (REPO / "agents").glob("*.toml"):
        ids.add(tomllib.loads(path.read_text())["id"])
    return ids


@pytest.mark.anyio
async def test_every_agent_prompt_is_a_markdown_resource_and_there_are_no_templates(tmp_path: Path) -> None:
    agent_ids = _agent_ids_on_disk()
    assert "mcp_setup" in agent_ids
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(
            tmp_path, tmp_path / "err.log", Recorder(), env=face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
        ) as client:
            listed = await client.list_resources()
            uris = {str(r.uri): r for r in listed.resources}
            for agent_id in agent_ids:
                uri = f"{PROMPT_URI_PREFIX}{agent_id}"
                assert uri in uris, f"agent {agent_id} has no prompt resource"
                assert uris[uri].mime_type == "text/markdown"
                read = await client.read_resource(uri)
                assert read.contents[0].mime_type == "text/markdown"
                assert read.contents[0].text.strip()  # type: ignore[union-attr]
            templates = await client.list_resource_templates()
            assert templates.resource_templates == []


@pytest.mark.anyio
async def test_an_unknown_tool_is_a_protocol_error_and_bad_arguments_a_tool_error(tmp_path: Path) -> None:
    from mcp import MCPError

    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(
            tmp_path, tmp_path / "err.log", Recorder(), env=face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
        ) as client:
            with pytest.raises(MCPError):
                await client.call_tool("mcp_setup_nope", {})
            result = await client.call_tool("mcp_setup_search", {"page_size": 1000})
            assert result.is_error
            assert result.structured_content["error"]["code"] == "invalid_input"  # type: ignore[index]


def test_a_bad_setting_is_named_by_its_variable_and_nothing_starts(tmp_path: Path) -> None:
    env = face_env(tmp_path, MCP_SETUP_PROBE_TIMEOUT_SECONDS="-3")
    proc = subprocess.run(
        mcp_setup_argv("mcp"), input="", capture_output=True, text=True, env=env, cwd=REPO, timeout=scaled(60)
    )
    assert proc.returncode == 2
    assert "MCP_SETUP_PROBE_TIMEOUT_SECONDS" in proc.stderr and "greater than 0" in proc.stderr
    assert proc.stdout == ""


def test_help_lists_the_commands_with_examples(tmp_path: Path) -> None:
    proc = subprocess.run(mcp_setup_argv("--help"), capture_output=True, text=True, cwd=REPO, timeout=scaled(60))
    assert proc.returncode == 0
    for word in ("serve", "mcp", "agent", "examples:"):
        assert word in proc.stdout


def test_every_request_line_gets_an_answer_even_one_the_sdk_cannot_read(tmp_path: Path, canary: str) -> None:
    # #24 item 10: nested past pydantic's depth, a lone surrogate, a truncated line, not an object
    init, initialized, listing = SMOKE_INPUT.splitlines()
    deep: object = canary
    for _ in range(250):
        deep = {"a": deep}
    lines = [
        init,
        initialized,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "mcp_setup_search", "arguments": deep},
            }
        ),
        '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "x", "arguments": {"q": "\\ud800'
        + canary
        + '"}}}',
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "' + canary,
        "[1, 2]",
        '{"jsonrpc": "2.0", "id": 7}',
        '{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\\udfff"}}',
        listing,
    ]
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
    proc = subprocess.run(
        mcp_setup_argv("mcp"),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=scaled(60),
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    codes = {a.get("id"): (a.get("error") or {}).get("code") for a in answers if a.get("id") is not None}
    assert codes == {1: None, 3: -32602, 4: -32602, 7: -32600, 2: None}, proc.stdout
    unnamed = sorted(a["error"]["code"] for a in answers if a.get("id") is None)
    assert unnamed == [-32700, -32600], proc.stdout  # the truncated line and the array
    assert canary not in proc.stdout and canary not in proc.stderr
    assert proc.stderr.count("a request line could not be read") == 6, (
        proc.stderr
    )  # one line each, the notification too
    assert proc.returncode == 0
