"""#25 item 9: the read-only commands (``list``, ``show``, ``logs``, ``--help``) read the store
without loading the MCP SDK, the web stack, the runtime, SQLAlchemy or the vault.

Each command runs in its own Python process (a real ``main(argv)``), which then writes the
names of the modules it imported; the time it takes is measured in bench/ (bench_cli_list.py),
never asserted here.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import pytest

from app.cli.readonly import LightSettings
from app.cli.server_view import server_json
from app.settings import Settings
from setup_agent.gateway.server_logs import log_path
from setup_agent.store.audit import LinkContent, row_digest
from setup_agent.store.engine import HEAD_REVISION
from setup_agent.store.records import newest_migration, read_sqlite_servers
from tests.helpers.data_dir import OTHER, STUB, DataDir
from tests.helpers.mcp_face import REPO
from tests.helpers.timeouts import scaled

#: Never loaded by a read-only command (the stdio face's tools/list avoids the same ones).
HEAVY = (
    "mcp",
    "mcp.client",
    "sqlalchemy",
    "alembic",
    "app.runtime",
    "app.web",
    "app.mcp",
    "starlette",
    "uvicorn",
    "setup_agent.gateway.live",
    "setup_agent.gateway.connections",
    "cryptography",
    "keyring",
)
#: Not loaded by ``list``, ``logs`` and ``--help`` either (``show`` needs the launch spec's model).
LIGHT_ONLY = ("pydantic", "pydantic_settings", "httpx", "asyncio", "registry_clients", "importlib.metadata")

#: The audit's columns a link covers, in the digest's order, then the link's own two.
CHAINED = (
    "id",
    "at",
    "event",
    "server_id",
    "qualified_name",
    "actor",
    "old_hash",
    "new_hash",
    "detail",
    "prev_hash",
    "row_hash",
)

RUN = """
import json, sys
from app.cli.main import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def run(data: DataDir, tmp_path: Path, *argv: str) -> tuple[int, list[str], str, str]:
    out_file = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(out_file), *argv],
        cwd=REPO,
        env=data.env(),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    got = json.loads(out_file.read_text())
    return got["code"], got["modules"], proc.stdout, proc.stderr


@pytest.fixture
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path)


def test_list_show_logs_and_help_answer_without_the_sdk_the_web_stack_the_runtime_or_sqlalchemy(
    data: DataDir, tmp_path: Path, canary: str
) -> None:
    sid = data.install(STUB, canary)
    data.install(OTHER, "other-value-123")
    logs = data.home / "logs"
    logs.mkdir(exist_ok=True)
    log_path(logs, sid).write_text("stub: listening on stdio\n")
    for argv, expect in (
        (["list"], "stub-search"),
        (["list", "--json"], STUB),
        (["show", "stub-search"], "tool echo"),
        (["logs", "stub-search"], "stub: listening on stdio"),
        (["--help"], "usage: mcp-setup"),
        (["show", "stub-serch"], ""),  # a typo: exit 3 with the close name, still read-only
    ):
        code, modules, out, err = run(data, tmp_path, *argv)
        assert code == (3 if argv[-1] == "stub-serch" else 0), (argv, err)
        assert expect in out, (argv, out, err)
        assert canary not in out + err
        loaded = set(modules)
        assert not loaded & set(HEAVY), (argv, sorted(loaded & set(HEAVY)))
        if argv[0] != "show":
            assert not loaded & set(LIGHT_ONLY), (argv, sorted(loaded & set(LIGHT_ONLY)))
    assert "Did you mean stub-search?" in run(data, tmp_path, "show", "stub-serch")[3]


def test_the_fast_list_says_what_the_store_says_for_every_state(data: DataDir, tmp_path: Path, canary: str) -> None:
    first = data.install(STUB, canary)
    second = data.install(OTHER, "other-value-123")
    with data.store() as store:
        store.servers.set_enabled(second, False, actor="test")
        store.pins.set_tools(first, [{"name": "echo", "description": "Echo text"}])
        store.pins.set_tools(first, [{"name": "echo", "description": "Echo text"}, {"name": "new", "description": "x"}])
        store.servers.set_needs_sign_in(second, True)
        expected = [server_json(s) for s in store.servers.list()]
        records = store.servers.list()
    assert read_sqlite_servers(data.home / "mcp-setup.db") == records  # every field, as the store hands it out
    code, _, out, err = run(data, tmp_path, "list", "--json")
    assert code == 0 and json.loads(out)["servers"] == expected, err
    assert {s["status"] for s in expected} == {"tools_changed", "disabled"}
    code, _, out, _ = run(data, tmp_path, "list")
    assert "TOOLS CHANGED" in out and "DISABLED" in out and "mcp-setup tools-review stub-search" in out
    assert list(asdict(records[0])["env_keys"]) == [
        {"key": "STUB_API_KEY", "secret": True},
        {"key": "STUB_REGION", "secret": False},
    ]


def test_audit_answers_without_sqlalchemy_and_says_what_the_store_says(
    data: DataDir, tmp_path: Path, canary: str
) -> None:
    """#25 item 9: ``audit`` (and ``--json``, ``--limit``) reads a SQLite data dir with the standard
    library; its rows and counts are the store's, field for field."""
    first = data.install(STUB, canary)
    data.install(OTHER, "other-value-123")
    with data.store() as store:
        store.servers.set_enabled(first, False, actor="test")
        expected = {"audit": [r.public() for r in store.audit.entries()], "counts": store.audit.counts()}
        last_two = [r.public() for r in store.audit.entries(limit=2)]
    assert len(expected["audit"]) >= 3 and expected["counts"]["total"] == len(expected["audit"])
    code, modules, out, err = run(data, tmp_path, "audit", "--json")
    assert code == 0 and json.loads(out) == expected, err
    assert not set(modules) & set(HEAVY + LIGHT_ONLY), sorted(set(modules) & set(HEAVY + LIGHT_ONLY))
    code, _, out, _ = run(data, tmp_path, "audit", "--json", "--limit", "2")
    assert code == 0 and json.loads(out)["audit"] == last_two
    code, modules, out, _ = run(data, tmp_path, "audit")
    assert code == 0 and "\tdisabled\t" in out and "by test" in out and canary not in out
    assert "sqlalchemy" not in modules
    code, modules, out, _ = run(data, tmp_path, "audit", "--verify")  # the chain check is the store's
    assert code == 0 and "chain is whole" in out and "sqlalchemy" in modules


def test_a_chain_recomputed_without_the_data_key_is_read_alike_by_both_readers_and_named_by_verify(
    data: DataDir, tmp_path: Path
) -> None:
    """The fast ``audit`` and the store read the same rewritten rows; ``audit --verify`` (the
    store, with the data key) names the first row whose link was made without the key."""
    first = data.install(STUB, "value-1")
    with data.store() as store:
        store.servers.set_enabled(first, False, actor="test")
        store.servers.set_enabled(first, True, actor="test")
    db = data.home / "mcp-setup.db"
    with sqlite3.connect(db) as conn:  # triggers dropped, row 2 rewritten, the chain recomputed unkeyed
        conn.execute("DROP TRIGGER mcp_audit_no_update")
        conn.execute("UPDATE mcp_audit SET actor = 'someone else' WHERE id = 2")
        rows = conn.execute(f"SELECT {', '.join(CHAINED)} FROM mcp_audit ORDER BY id").fetchall()
        prev = rows[0][-1]
        for row in rows[1:]:
            fields = dict(zip(CHAINED[:-2], row[:-2], strict=True))
            fields["at"] = datetime.fromisoformat(fields["at"])
            digest = row_digest(LinkContent(prev, **fields))
            conn.execute("UPDATE mcp_audit SET prev_hash = ?, row_hash = ? WHERE id = ?", (prev, digest, row[0]))
            prev = digest
    conn.close()
    with data.store() as store:
        expected = {"audit": [r.public() for r in store.audit.entries()], "counts": store.audit.counts()}
        second = store.audit.entries()[1]
    code, modules, out, err = run(data, tmp_path, "audit", "--json")
    assert code == 0 and json.loads(out) == expected and "sqlalchemy" not in modules, err
    code, _, out, _ = run(data, tmp_path, "audit", "--verify")
    assert code == 1 and f"broken at row 2 ({second.at:%Y-%m-%dT%H:%M:%S.%f}Z, {second.event}):" in out, out
    code, _, out, _ = run(data, tmp_path, "audit", "--verify", "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["first_broken"]["id"] == 2 and report["keyed_from"] == 1


def test_tools_answers_without_the_sdk_or_sqlalchemy_and_lists_what_the_store_holds(
    data: DataDir, tmp_path: Path, canary: str
) -> None:
    """#25 item 9: ``mcp-setup tools`` reads a SQLite data dir with the standard library; its
    registry is the one built on the real store, tool for tool."""
    import anyio

    from app.cli.tools import _read, _registry

    first = data.install(STUB, canary)
    data.install(OTHER, "other-value-123")
    with data.store() as store:
        store.servers.set_enabled(first, False, actor="test")
        tools, diagnostics = anyio.run(_read, _registry(Settings(home=data.home), store))
    code, modules, out, err = run(data, tmp_path, "tools", "--json")
    assert code == 0, err
    assert json.loads(out) == {"tools": tools, "diagnostics": diagnostics}
    assert {t["name"] for t in tools} >= {"mcp_setup_search", "stub-search__echo"} and canary not in out + err
    assert not set(modules) & set(HEAVY), sorted(set(modules) & set(HEAVY))
    code, _, out, _ = run(data, tmp_path, "tools")
    assert code == 0 and "stub-search__echo" in out and "not checked" in out


def test_a_data_dir_not_migrated_to_the_newest_revision_is_read_through_the_store(
    data: DataDir, tmp_path: Path
) -> None:
    assert newest_migration() == HEAD_REVISION  # the fast reader's idea of "migrated" is the store's
    data.install(STUB, "value-1")
    db = data.home / "mcp-setup.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE mcp_setup_alembic_version SET version_num = '0006_principals'")
    conn.close()
    assert read_sqlite_servers(db) is None
    _, modules, _, _ = run(data, tmp_path, "list")  # the store's own migration decides (here it finds 0007's tables)
    assert "sqlalchemy" in modules


def test_no_data_dir_yet_lists_nothing_and_creates_nothing(data: DataDir, tmp_path: Path) -> None:
    code, modules, out, _ = run(data, tmp_path, "list")
    assert code == 0 and "No servers installed yet" in out
    assert not data.home.exists() and "sqlalchemy" not in modules


def test_the_light_settings_read_home_database_url_and_sandbox_as_settings_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in (
        {},
        {"MCP_SETUP_HOME": str(tmp_path / "h")},
        {"mcp_setup_home": str(tmp_path / "lower")},
        {"MCP_SETUP_DATABASE_URL": "postgresql://u@h/db", "MCP_SETUP_SANDBOX": "off"},
        {"MCP_SETUP_DATA_KEY_FILE": str(tmp_path / "team.key")},
    ):
        names = ("MCP_SETUP_HOME", "MCP_SETUP_DATABASE_URL", "MCP_SETUP_SANDBOX", "mcp_setup_home")
        for name in (*names, "MCP_SETUP_DATA_KEY_FILE"):
            monkeypatch.delenv(name, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        light, real = LightSettings(dict(__import__("os").environ)), Settings()
        assert (light.home, light.database_url, light.sandbox) == (real.home, real.database_url, real.sandbox), env
        assert light.data_key_file == real.data_key_file, env  # the data folder's check reads it
        assert light.port == real.port  # any other setting: the real one


def test_client_list_shows_the_clients_found_whether_connected_the_mcp_address_and_the_tool_names(
    data: DataDir, tmp_path: Path, canary: str
) -> None:
    """#25 item 1, in the terminal: what the page's "Use it in your AI client" shows."""
    data.install(STUB, canary)
    env = data.env()
    home = Path(env["HOME"])
    (home / ".config" / "Claude").mkdir(parents=True)
    (home / ".cursor").mkdir()
    connect = subprocess.run(
        [sys.executable, "-m", "app.cli", "client", "connect", "claude-desktop"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert connect.returncode == 0, connect.stderr
    code, modules, out, err = run(data, tmp_path, "client", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert any(line.startswith("claude-desktop") and " connected " in f"{line} " for line in lines), out
    assert any(line.startswith("cursor") and "not connected" in line for line in lines), out
    assert "Not found on this computer: " in out and "vscode" in out
    assert "http://127.0.0.1:8765/mcp" in out and "mcp-setup token create NAME" in out
    assert "stub-search__echo" in out and canary not in out + err
    assert not set(modules) & set(HEAVY), sorted(set(modules) & set(HEAVY))
    code, _, out, _ = run(data, tmp_path, "client", "list", "--json")
    listed = json.loads(out)
    desktop = next(c for c in listed["clients"] if c["client"] == "claude-desktop")
    assert (
        desktop["found"] and desktop["connected"] and desktop["up_to_date"] and listed["tools"] == ["stub-search__echo"]
    )
