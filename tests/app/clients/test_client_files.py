"""Client config files are written safely (#24 items 7-9): through a symlink to its target, never
through a planted temp link, the backup 0600, and secrets found by name and value."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from app.clients.files import ClientConfig, secret_reason

OTHER = {"command": "node", "args": ["other.js"]}


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _edit(path: Path) -> None:
    config = ClientConfig("cursor", path)
    config.set_entries({"mcp-setup": {"command": "mcp-setup", "args": ["mcp"]}}).write()


def test_a_symlinked_config_is_written_through_to_its_target_and_the_link_stays(tmp_path: Path) -> None:
    dotfiles, home = tmp_path / "dotfiles", tmp_path / "home" / ".cursor"
    dotfiles.mkdir()
    home.mkdir(parents=True)
    target = dotfiles / "mcp.json"
    target.write_text(json.dumps({"mcpServers": {"other": {**OTHER, "env": {"API_KEY": "plain-secret-1"}}}}))
    os.chmod(target, 0o640)
    link = home / "mcp.json"
    link.symlink_to(target)
    config = ClientConfig("cursor", link)
    edit = config.set_entries({"other": OTHER})
    assert edit.target() == target.resolve()
    backup = edit.write()
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "plain-secret-1" not in target.read_text() and json.loads(target.read_text())["mcpServers"]["other"] == OTHER
    assert _mode(target) == 0o640  # the real target's mode
    assert backup is not None and backup.parent == target.resolve().parent and _mode(backup) == 0o600
    assert "plain-secret-1" in backup.read_text()
    assert sorted(p.name for p in home.iterdir()) == ["mcp.json"]  # nothing left beside the link


def test_a_temp_link_planted_in_a_world_writable_dir_is_never_followed(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.chmod(victim, 0o600)
    config_path = shared / "mcp.json"
    config_path.write_text(json.dumps({"mcpServers": {"other": OTHER}}))
    os.chmod(config_path, 0o644)
    for name in ("mcp.json.mcp-setup-tmp", ".mcp.json.mcp-setup-tmp"):
        (shared / name).symlink_to(victim)
    _edit(config_path)
    assert victim.read_text() == "precious" and _mode(victim) == 0o600
    assert _mode(config_path) == 0o644 and "mcp-setup" in json.loads(config_path.read_text())["mcpServers"]
    assert not config_path.is_symlink()


def test_the_backup_is_readable_by_the_user_only_whatever_the_original_mode(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"other": OTHER}}))
    os.chmod(path, 0o644)
    _edit(path)
    (backup,) = tmp_path.glob("mcp.json.bak-*")
    assert _mode(backup) == 0o600 and _mode(path) == 0o644


@pytest.mark.parametrize(
    ("key", "value", "secret"),
    [
        ("MY_DB_PASS", "hunter2", True),  # short, and a name the old pattern missed
        ("PGPWD", "x1", True),
        ("CLIENT_SECRET", "abc", True),
        ("SLACK_TOKEN", "t", True),
        ("OPENAI_KEY", "k", True),
        ("AWS_CREDENTIALS", "c", True),
        ("X_AUTH", "v", True),
        ("GH_PAT", "v", True),
        ("SOMETHING", "ghp_" + "a1B2" * 8, True),  # a known prefix
        ("SOMETHING", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", True),  # a JWT
        ("SOMETHING", "Zx8q2LmP0vR7tY4wK9sB3nD6fH1jG5cQ", True),  # high entropy
        ("PATH", "/usr/bin:/bin", False),
        ("REGION", "eu-west-1", False),
        ("DEBUG", "1", False),
        ("LOG_LEVEL", "info", False),
        ("API_KEY", "${API_KEY}", False),  # a template, not a value
        ("API_KEY", "", False),
    ],
)
def test_secrets_are_found_by_name_and_by_value(key: str, value: str, secret: bool) -> None:
    assert (secret_reason(key, value) is not None) is secret


CLAUDE_DESKTOP = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "/Users/me/Downloads"]
    },
    "notion":{"command":"npx","args":["-y","@notionhq/notion-mcp-server"],"env":{"NOTION_TOKEN":"${NOTION}"}},
    "météo": {
      "command": "uvx",
      "args": [
        "weather-mcp"
      ]
    }
  },
  "globalShortcut": "Ctrl+Space"
}
"""

VSCODE = """// Servers for VS Code's agent mode
{
\t"servers": {
\t\t// GitHub's remote server
\t\t"github": {
\t\t\t"type": "http",
\t\t\t"url": "https://api.githubcopilot.com/mcp/", // signs in with the editor
\t\t},
\t\t/* the local files,
\t\t   read only */
\t\t"fs": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
\t},
\t"inputs": [],
}
"""

GATEWAY = {"command": "/opt/mcp-setup/bin/mcp-setup", "args": ["mcp"], "env": {"MCP_SETUP_HOME": "/home/me/.mcp"}}


def _only_added(diff: str) -> list[str]:
    """The diff's changed lines, asserting none was removed or changed."""
    lines = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert [line for line in lines if line.startswith("-")] == [], diff
    return [line[1:] for line in lines]


@pytest.mark.parametrize(
    ("client", "text", "entry"),
    [("claude-desktop", CLAUDE_DESKTOP, GATEWAY), ("vscode", VSCODE, {"type": "stdio", **GATEWAY})],
    ids=["claude-desktop", "vscode-jsonc"],
)
def test_connecting_adds_one_entry_and_every_other_byte_stays_and_disconnect_gives_the_file_back(
    tmp_path: Path, client: str, text: str, entry: dict
) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    before = ClientConfig(client, path).servers()
    edit = ClientConfig(client, path).set_entries({"mcp-setup": entry})
    added = "".join(line + "\n" for line in _only_added(edit.diff()))
    assert added.splitlines()[0].strip() == '"mcp-setup": {' and '"/opt/mcp-setup/bin/mcp-setup"' in added
    edit.write()
    after = path.read_text()
    assert after.count(added) == 1 and after.replace(added, "") == text  # every other byte, comments included
    assert ClientConfig(client, path).servers() == {**before, "mcp-setup": entry}
    ClientConfig(client, path).set_entries({}, remove=("mcp-setup",)).write()
    assert path.read_text() == text


def test_an_older_entry_of_ours_is_replaced_in_its_place_and_nothing_else_moves(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    old = {**GATEWAY, "env": {"MCP_SETUP_HOME": "/old/place"}}
    entry = '    "mcp-setup": {\n      "command": "/opt/mcp-setup/bin/mcp-setup",\n      "args": ["mcp"],\n'
    entry += '      "env": {\n        "MCP_SETUP_HOME": "/old/place"\n      }\n    },\n'
    path.write_text(CLAUDE_DESKTOP.replace('  "mcpServers": {\n', '  "mcpServers": {\n' + entry, 1))
    assert ClientConfig("claude-desktop", path).servers()["mcp-setup"] == old
    edit = ClientConfig("claude-desktop", path).set_entries({"mcp-setup": GATEWAY})
    changed = [line for line in edit.diff().splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert (
        '-        "MCP_SETUP_HOME": "/old/place"' in changed and '+        "MCP_SETUP_HOME": "/home/me/.mcp"' in changed
    )
    assert all(line[1:] + "\n" in entry for line in changed if line.startswith("-"))  # only our entry's lines go
    head, tail = '{\n  "mcpServers": {\n    "mcp-setup": ', '    "filesystem": {'
    assert (
        edit.after.startswith(head)
        and edit.after[edit.after.index(tail) :] == CLAUDE_DESKTOP[CLAUDE_DESKTOP.index(tail) :]
    )
    assert ClientConfig("claude-desktop", path).servers()["mcp-setup"] == old  # nothing written yet


def test_a_jsonc_file_with_an_error_is_reported_at_its_line_and_left_untouched(tmp_path: Path) -> None:
    from app.clients.files import ConfigError

    path = tmp_path / "mcp.json"
    broken = VSCODE.replace('"inputs": [],', '"inputs": [,')
    path.write_text(broken)
    with pytest.raises(ConfigError, match=r"line 13 column 13: not valid JSON"):
        ClientConfig("vscode", path).set_entries({"mcp-setup": GATEWAY})
    assert path.read_text() == broken
