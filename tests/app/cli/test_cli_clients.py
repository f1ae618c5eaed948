"""``client connect|disconnect`` on a real config file per client (other entries kept, backup,
idempotent, dry-run, malformed input untouched), ``run`` answering through the SDK client, and
``import`` moving a planted canary out of a Claude Desktop config into the vault."""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path

import anyio
import pexpect
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from app.cli.clients import launcher_command
from app.cli.main import main
from app.clients.files import CLIENTS
from tests.helpers.data_dir import STUB, DataDir, data  # noqa: F401 - the fixture
from tests.helpers.mcp_face import REPO, mcp_setup_argv, real_mcp_setup_argv
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex

OTHER_ENTRY = {"command": "other-server", "args": ["--flag"], "env": {"LEVEL": "2"}}


def write_config(client: str, path: Path) -> str:
    """An existing config with another server and unrelated settings."""
    if client == "codex":
        text = '# my codex settings\nmodel = "o3"\n\n[mcp_servers.other]\ncommand = "other-server"\nargs = ["--flag"]\n'
    else:
        text = json.dumps({"theme": "dark", CLIENTS[client].key: {"other": OTHER_ENTRY}}, indent=4) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def read_servers(client: str, path: Path) -> dict:
    if client == "codex":
        return tomllib.loads(path.read_text())["mcp_servers"]
    return json.loads(path.read_text())[CLIENTS[client].key]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("client", list(CLIENTS))
def test_connect_merges_one_entry_keeps_the_others_backs_up_and_is_idempotent_and_disconnect_undoes_it(
    client: str,
    data,
    capsys,
    tmp_path: Path,  # noqa: F811
) -> None:
    path = tmp_path / "client" / "config"
    original = write_config(client, path)
    code, out, _ = cli(capsys, "client", "connect", client, "--config", str(path), "--dry-run")
    assert code == 0 and "+" in out and path.read_text() == original  # dry-run: a diff, nothing written
    code, out, err = cli(capsys, "client", "connect", client, "--config", str(path))
    assert code == 0, err
    servers = read_servers(client, path)
    assert servers["other"]["command"] == "other-server" and servers["other"]["args"] == ["--flag"]
    entry = servers["mcp-setup"]
    assert [entry["command"], *entry["args"]] == [*launcher_command(), "mcp"]
    assert entry["env"]["MCP_SETUP_HOME"] == str(data.home)
    if client == "codex":
        assert path.read_text().startswith(original)  # text edit: every other line byte for byte
    else:
        assert json.loads(path.read_text())["theme"] == "dark"
    backups = list(path.parent.glob("config.bak-*"))
    assert len(backups) == 1 and backups[0].read_text() == original
    assert out == f"Updated {path} (the old file is {backups[0]}). Restart the client.\n"
    after = path.read_text()
    code, out, _ = cli(capsys, "client", "connect", client, "--config", str(path))
    assert code == 0 and "already up to date" in out and path.read_text() == after
    assert len(list(path.parent.glob("config.bak-*"))) == 1
    code, _, _ = cli(capsys, "client", "disconnect", client, "--config", str(path))
    assert code == 0 and set(read_servers(client, path)) == {"other"}


@pytest.mark.parametrize("client", ["claude-desktop", "vscode", "codex"])
def test_a_malformed_config_is_reported_with_its_path_and_line_and_left_untouched(
    client, data, capsys, tmp_path
) -> None:  # noqa: F811
    path = tmp_path / "config"
    bad = 'model = "o3"\n[mcp_servers.x\n' if client == "codex" else '{\n  "mcpServers": {\n    "x": {,\n  }\n}\n'
    path.write_text(bad)
    code, out, err = cli(capsys, "client", "connect", client, "--config", str(path))
    assert code == 1 and str(path) in err and ("line 2" in err or "line 3" in err), err
    assert path.read_text() == bad and not list(tmp_path.glob("config.bak-*"))
    # what to paste by hand, in the client's own format
    assert "add it by hand" in err
    # the entry itself, to go inside the client's servers object (not a second top-level object)
    pasted = tomllib.loads(out)["mcp_servers"] if client == "codex" else json.loads("{" + out + "}")
    assert f'"{CLIENTS[client].key}"' in err or client == "codex"
    assert [pasted["mcp-setup"]["command"], *pasted["mcp-setup"]["args"]] == [*launcher_command(), "mcp"]


def test_a_config_with_comments_is_edited_in_place_keeping_them_and_disconnect_restores_it(
    data,
    capsys,
    tmp_path,  # noqa: F811
) -> None:
    path = tmp_path / "settings.json"  # Zed writes its settings with // comments
    text = '// Zed settings\n{\n  "theme": "One Dark", // the theme\n}\n'
    path.write_text(text)
    code, out, err = cli(capsys, "client", "connect", "zed", "--config", str(path), "--dry-run")
    assert code == 0 and path.read_text() == text
    removed = [line for line in out.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == [] and '+  "context_servers": {' in out  # the diff: only what is added
    code, out, err = cli(capsys, "client", "connect", "zed", "--config", str(path))
    assert code == 0, err
    written = path.read_text()
    assert written.startswith('// Zed settings\n{\n  "theme": "One Dark", // the theme\n')
    assert '"theme": "One Dark", // the theme' in written and written.endswith("}\n")
    from app.clients.jsonc import loads

    entry = loads(written)["context_servers"]["mcp-setup"]
    assert entry["source"] == "custom" and [entry["command"], *entry["args"]] == [*launcher_command(), "mcp"]
    code, _, err = cli(capsys, "client", "disconnect", "zed", "--config", str(path))
    assert code == 0 and "context_servers" in path.read_text() and "mcp-setup" not in path.read_text(), err
    assert path.read_text().startswith('// Zed settings\n{\n  "theme": "One Dark", // the theme\n')


def test_a_new_config_file_is_created_with_only_our_entry(data, capsys, tmp_path) -> None:  # noqa: F811
    path = tmp_path / "fresh" / "mcp.json"
    code, out, _ = cli(capsys, "client", "connect", "cursor", "--config", str(path))
    assert code == 0 and list(json.loads(path.read_text())["mcpServers"]) == ["mcp-setup"]
    assert out == f"Updated {path}. Restart the client.\n"  # no old file, so no backup to name


def test_per_server_entries_run_each_server_and_hold_no_secret_value(data, capsys, canary, tmp_path) -> None:  # noqa: F811
    data.install(STUB, canary)
    path = tmp_path / "claude.json"
    code, _, _ = cli(capsys, "client", "connect", "claude-desktop", "--config", str(path), "--per-server")
    assert code == 0
    servers = read_servers("claude-desktop", path)
    assert servers["stub-search"]["args"][-2:] == ["run", "stub-search"]
    assert canary not in path.read_text()


@pytest.mark.anyio
async def test_run_starts_the_installed_server_with_its_secret_in_its_environment_only(data, canary) -> None:  # noqa: F811
    data.install(STUB, canary)
    got = await answers(mcp_setup_argv("run", "stub-search"), data.env())
    assert "echo" in got and any("through run" in t for t in got)


async def answers(command: list[str], env: dict[str, str], tool: str = "echo") -> list[str]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(REPO))
    with anyio.fail_after(scaled(60)):
        async with Client(stdio_client(params)) as client:
            listed = await client.list_tools()
            result = await client.call_tool(tool, {"text": "through run"})
            return [t.name for t in listed.tools] + [result.content[0].text]  # type: ignore[union-attr]


def _import(path: Path, env: dict[str, str], *extra: str) -> tuple[int | None, str]:
    argv = mcp_setup_argv("import", "claude-desktop", "--config", str(path), *extra)
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(60))
    # what was found is said before anything is asked (#25 item 11)
    child.expect(r"2 server entries with plain-text keys:|1 server entry with plain-text keys:")
    child.expect(
        r"stub: STUB_API_KEY \(its name says it is a secret\), STUB_EXPECTED_SHA256 \(its value looks like a key"
    )
    said = child.before + child.after
    child.expect(r"Move stub's STUB_API_KEY into mcp-setup's vault\? \[y/N\]: ")  # visible: the question is no secret
    child.sendline("y")
    # a 64-hex digest looks like a token by its value (#24 item 9): asked too
    child.expect(r"Move stub's STUB_EXPECTED_SHA256 into mcp-setup's vault\? \[y/N\]: ")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, said + child.before


def _planted(tmp_path: Path, canary: str, **more: dict) -> tuple[Path, str]:
    path = tmp_path / "claude_desktop_config.json"
    entry = {
        "command": "python3",
        "args": [str(SERVER_PY)],
        "env": {"STUB_API_KEY": canary, "STUB_EXPECTED_SHA256": sha256_hex(canary)},
    }
    original = json.dumps({"mcpServers": {"stub": entry, "other": OTHER_ENTRY, **more}}, indent=2)
    path.write_text(original)
    return path, original


def test_import_moves_a_planted_key_into_the_vault_and_the_gateway_entry_gives_each_tool_one_name(
    data, canary, tmp_path
) -> None:  # noqa: F811
    path, original = _planted(tmp_path, canary)
    env = data.env()
    code, out = _import(path, env)
    assert code == 0, out
    assert "tested (" in out and canary not in out
    assert " INFO " not in out  # a command for a person: no log lines unless --verbose
    assert "now reaches them through its mcp-setup entry (stub__…)" in out
    servers = json.loads(path.read_text())["mcpServers"]
    assert set(servers) == {"mcp-setup", "other"}  # the old entry went: its tools come through the gateway
    assert servers["other"] == OTHER_ENTRY and servers["mcp-setup"]["args"][-1:] == ["mcp"]
    assert canary not in path.read_text()
    backups = list(tmp_path.glob("claude_desktop_config.json.bak-*"))
    assert len(backups) == 1 and backups[0].read_text() == original  # the backup is the user's old file
    assert stat.S_IMODE(backups[0].stat().st_mode) == 0o600  # #24 item 9
    assert "Still in plain text:" in out and f"{backups[0]}: the old file's copy" in out
    # the canary is in no file of the data dir outside the encrypted store
    for f in data.home.rglob("*"):
        if f.is_file():
            assert canary.encode() not in f.read_bytes(), f
    gateway = servers["mcp-setup"]
    got = anyio.run(answers, [gateway["command"], *gateway["args"]], {**env, **gateway["env"]}, "stub__echo")
    names = got[:-1]
    assert names.count("stub__echo") == 1 and "echo" not in names  # one name per tool
    assert "through run" in got[-1]


def test_import_per_server_keeps_one_run_entry_each_and_no_gateway_entry(data, canary, tmp_path) -> None:  # noqa: F811
    launcher = real_mcp_setup_argv()  # what the `import` subprocess calls itself
    gateway = {"command": str(Path(launcher[0]).resolve()), "args": [*launcher[1:], "mcp"]}
    path, _ = _planted(tmp_path, canary, **{"mcp-setup": gateway})
    code, out = _import(path, data.env(), "--per-server")
    assert code == 0, out
    servers = json.loads(path.read_text())["mcpServers"]
    assert set(servers) == {"stub", "other"} and servers["stub"]["args"][-2:] == ["run", "stub"]
    assert "now runs each of them with `mcp-setup run`" in out


def test_import_with_no_config_file_says_where_it_looked(data, capsys, tmp_path) -> None:  # noqa: F811
    missing = tmp_path / "nowhere" / "mcp.json"
    code, out, _ = cli(capsys, "import", "cursor", "--config", str(missing))
    assert code == 0 and f"{missing}: not there, so nothing to import (cursor keeps its MCP servers in that file" in out


def test_connect_warns_when_claude_code_would_refuse_a_per_server_tool_name_and_not_for_the_gateway(
    data,
    capsys,
    canary,
    tmp_path,  # noqa: F811
) -> None:
    long_tool = "search_everything_in_the_workspace_with_filters_and_paging"  # 58: fine alone, not under a prefix
    with data.store() as store:
        store.servers.install(
            qualified_name="io.x/long-names",
            source="local",
            version="1",
            package_type="stdio",
            launch_spec={"command": "true"},
            installed_by="agent",
            tools_hash="x",
            env={},
            tools=[{"name": long_tool, "description": "Search."}],
        )
    path = tmp_path / "claude.json"
    code, _, err = cli(capsys, "client", "connect", "claude-code", "--config", str(path), "--dry-run", "--per-server")
    assert code == 0 and "refuses tool names this long" in err and long_tool in err
    # Through the gateway the name is budgeted to 48: mcp__mcp-setup__<name> fits Claude Code's 64.
    code, _, err = cli(capsys, "client", "connect", "claude-code", "--config", str(path), "--dry-run")
    assert code == 0 and "refuses" not in err
