"""``mcp-setup agent "GOAL"`` in a real pty (pexpect): hidden secret prompt, numbered choices, exit codes."""

from __future__ import annotations

import io
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pexpect
import pytest
from keyring.backends import fail

from app.runtime import build_runtime, openai_options
from app.settings import Settings
from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.test_agent_support import STUB, make_catalog
from tests.timeouts import scaled

HIDDEN = r"STUB_API_KEY \(hidden\): "


def spawn(
    tmp_path: Path, catalog: Path, goal: str = "set up the stub server"
) -> tuple[pexpect.spawn, io.StringIO, dict]:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    argv = mcp_setup_argv("agent", goal)
    child = pexpect.spawn(
        argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30), dimensions=(50, 200)
    )
    out = io.StringIO()
    child.logfile_read = out
    return child, out, env


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


async def installed_servers(data_dir: Path, catalog: Path) -> list[dict]:
    """What a second process sees: the store, and whether the server connects from it."""
    settings = Settings(home=data_dir, registries="local", catalog_dir=catalog)
    runtime = build_runtime(settings, keyring_backend=fail.Keyring())
    try:
        with anyio.fail_after(scaled(30)):
            await runtime.start()
            return (await runtime.service.call("mcp_setup_list_servers", {"wait_seconds": 20}))["servers"]
    finally:
        await runtime.aclose()


def test_the_terminal_agent_recovers_from_a_wrong_secret_and_installs_the_stub(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    wrong = "wrong-" + canary[::-1]
    child.expect(HIDDEN)
    child.sendline(wrong)
    child.expect("invalid API key for STUB_API_KEY")
    child.expect(r"1\. Re-enter STUB_API_KEY\s+2\. Cancel\s+Choose 1-2: ")
    child.sendline("1")
    child.expect(HIDDEN)  # that one key again, nothing else
    child.sendline(canary)
    child.expect(r"Tools now available: echo, whoami")
    assert finish(child) == 0
    text = out.getvalue()
    assert canary not in text and wrong not in text
    assert text.count("(hidden): ") == 2
    assert "Installed io.github.mcp-setup/stub (srv_" in text

    servers = anyio.run(installed_servers, Path(env["MCP_SETUP_HOME"]), catalog)
    assert [(s["qualified_name"], s["status"], s["installed_by"]) for s in servers] == [(STUB, "connected", "agent")]
    assert set(servers[0]["tools"]) >= {"echo", "whoami"}  # an agent's list: the tools' names


def test_ctrl_c_at_the_hidden_prompt_cancels_with_exit_code_130(tmp_path: Path, canary: str) -> None:
    catalog = make_catalog(tmp_path, canary)
    child, out, env = spawn(tmp_path, catalog)
    child.expect(HIDDEN)
    child.sendcontrol("c")
    child.expect("Cancelled")
    assert finish(child) == 130
    assert anyio.run(installed_servers, Path(env["MCP_SETUP_HOME"]), catalog) == []


def test_end_of_input_at_a_question_fails_with_exit_code_1_not_130(tmp_path: Path, canary: str) -> None:
    """#25 item 10: no one cancelled (130 is Ctrl-C's): the input ended, so the run failed."""
    catalog = make_catalog(tmp_path, canary, names=(STUB + "-a", STUB + "-b"))
    child, out, _ = spawn(tmp_path, catalog)
    child.expect(r"3\. None of these\s+Choose 1-3: ")
    child.sendeof()
    child.expect("the input ended before a question was answered")
    assert finish(child) == 1


def test_openai_options_come_from_the_settings_or_the_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SETUP_OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("MCP_SETUP_OPENAI_MODEL", "m")
    settings = Settings()
    assert openai_options(
        settings, keyring_get=lambda s, u: "from-keyring" if (s, u) == ("mcp-setup", "openai-api-key") else None
    ) == {
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "api_key": "from-keyring",
    }
    monkeypatch.setenv("MCP_SETUP_OPENAI_API_KEY", "k")
    assert openai_options(Settings(), keyring_get=lambda s, u: "no")["api_key"] == "k"
    monkeypatch.delenv("MCP_SETUP_OPENAI_API_KEY")

    def broken(service: str, user: str) -> str:
        raise RuntimeError("no keyring")

    assert "api_key" not in openai_options(Settings(), keyring_get=broken)


def test_the_terminal_agent_drives_an_openai_compatible_model_with_the_secret_at_the_hidden_prompt(
    tmp_path: Path, canary: str
) -> None:
    from tests.fakes.openai_server import FakeOpenAI, final, tool_call

    def with_ref(name: str):
        def step(body: dict) -> dict:
            import json

            results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
            ref = next(r["ref"] for r in reversed(results) if "ref" in r)
            return tool_call(name, {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}})

        return step

    script = [
        tool_call("mcp_setup_search", {"query": "stub"}),
        tool_call("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub key", "server": STUB}),
        with_ref("mcp_setup_test_connection"),
        with_ref("mcp_setup_install_and_connect"),
        final("All set: the stub server's tools are ready."),
    ]
    catalog = make_catalog(tmp_path, canary)
    api_key = "sk-terminal-" + canary[:8] + "x" * 12
    with FakeOpenAI(script) as fake:
        env = face_env(
            tmp_path,
            MCP_SETUP_REGISTRIES="local",
            MCP_SETUP_CATALOG_DIR=str(catalog),
            MCP_SETUP_OPENAI_BASE_URL=fake.base_url,
            MCP_SETUP_OPENAI_MODEL="fake-model",
            MCP_SETUP_OPENAI_API_KEY=api_key,
        )
        argv = mcp_setup_argv("agent", "set up the stub server", "--driver", "openai", "--verbose")
        child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30))
        out = io.StringIO()
        child.logfile_read = out
        child.expect(HIDDEN)
        child.sendline(canary)
        child.expect("All set: the stub server's tools are ready.")
        assert finish(child) == 0
    assert fake.step_errors == [] and len(fake.bodies) == len(script)
    assert all(canary not in raw for raw in fake.raw)
    assert set(fake.auth) == {f"Bearer {api_key}"}
    text = out.getvalue()
    assert canary not in text and api_key not in text  # --verbose logs included


def test_the_terminal_agent_sets_up_a_server_found_in_the_fake_official_registry(tmp_path: Path, canary: str) -> None:
    import json

    from tests.fakes.file_server import serve_file
    from tests.fakes.official_registry import FakeOfficialRegistry

    catalog = make_catalog(tmp_path, canary)
    entry = json.loads((catalog / "stub0.json").read_text())
    bundle = Path(urlsplit(entry["packages"][0]["identifier"]).path)
    with serve_file(bundle) as bundle_url:
        entry["packages"][0]["identifier"] = bundle_url  # a remote registry may not name a file:// bundle
        with FakeOfficialRegistry([entry]) as registry:
            env = face_env(tmp_path, MCP_SETUP_REGISTRIES="official", MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url)
            argv = mcp_setup_argv("agent", "set up the stub server")
            child = pexpect.spawn(
                argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(30), dimensions=(50, 200)
            )
            out = io.StringIO()
            child.logfile_read = out
            child.expect(HIDDEN)
            child.sendline("wrong-" + canary[::-1])
            child.expect("invalid API key for STUB_API_KEY")
            child.expect(r"1\. Re-enter STUB_API_KEY\s+2\. Cancel\s+Choose 1-2: ")
            child.sendline("1")
            child.expect(HIDDEN)
            child.sendline(canary)
            child.expect(r"Tools now available: echo, whoami")
            assert finish(child) == 0
            assert any("/v0.1/servers" in r.path for r in registry.requests)
    assert canary not in out.getvalue()
