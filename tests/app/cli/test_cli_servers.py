"""The plain CLI on a real data dir with stub servers: list/show (--json shapes), enable/disable
seen by the store, remove, logs (redacted rolling file written by the connection manager),
search, doctor, rotate (hidden prompt in a pty), exit codes."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path

import anyio
import pexpect
import pytest

from setup_agent.gateway.connections import ConnectionManager
from setup_agent.gateway.server_logs import log_path
from setup_agent.secrets.redact import Redactor
from tests.helpers.data_dir import (
    OTHER,
    STUB,
    DataDir,
    cli,
    data,  # noqa: F401 - fixtures and marks the tests here use
    stub_spec,
)
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled


def test_list_and_show_print_every_installed_server_and_json_has_the_documented_shape(data, capsys, canary) -> None:
    sid = data.install(STUB, canary)
    data.install(OTHER, "other-value-123")
    code, out, _ = cli(capsys, "list")
    assert code == 0 and "stub-search" in out and STUB in out and OTHER in out and "enabled" in out
    code, out, _ = cli(capsys, "list", "--json")
    listed = json.loads(out)["servers"]
    assert code == 0 and [s["qualified_name"] for s in listed] == [STUB, OTHER]
    assert set(listed[0]) >= {
        "server_id",
        "qualified_name",
        "slug",
        "title",
        "enabled",
        "version",
        "package_type",
        "env_keys",
        "tools",
        "installed_at",
        "installed_by",
    }
    assert listed[0]["env_keys"] == [{"key": "STUB_API_KEY", "secret": True}, {"key": "STUB_REGION", "secret": False}]
    for key in (sid, STUB, "stub-search"):  # NAME: id, qualified name or slug
        code, out, _ = cli(capsys, "show", key, "--json")
        assert code == 0 and json.loads(out)["server_id"] == sid
    code, out, _ = cli(capsys, "show", "stub-search")
    assert code == 0 and "STUB_API_KEY (secret" in out and "tool echo" in out
    assert canary not in out


def test_an_unknown_name_exits_3_with_one_line_and_no_traceback(data, capsys) -> None:
    for argv in (["show", "nope"], ["enable", "nope"], ["remove", "nope"], ["logs", "nope"]):
        code, out, err = cli(capsys, *argv)
        assert code == 3, argv
        assert "No installed server is named 'nope'" in err and "Traceback" not in err


def test_show_or_logs_without_a_name_lists_the_servers_to_choose_from(data, capsys, canary) -> None:
    data.install(STUB, canary)
    for command in ("show", "logs"):
        code, out, err = cli(capsys, command)
        assert code == 2 and f"mcp-setup {command} NAME" in err and "stub-search" in out and canary not in out


def test_a_name_that_is_part_of_an_installed_one_is_suggested(data, capsys, canary) -> None:
    data.install(STUB, canary)  # slug stub-search
    code, _, err = cli(capsys, "show", "search")
    assert code == 3 and "Did you mean stub-search?" in err


def test_a_typo_in_a_name_is_answered_with_the_close_one(data, capsys, canary) -> None:
    """#25 item 12: `show stub-serch` suggests stub-search."""
    data.install(STUB, canary)
    code, _, err = cli(capsys, "show", "stub-serch")
    assert code == 3 and "Did you mean stub-search?" in err


def test_disable_and_enable_change_the_store_every_face_watches(data, capsys, canary) -> None:
    sid = data.install(STUB, canary)
    with data.store() as store:
        before = store.database.change_counter()
    code, out, _ = cli(capsys, "disable", "stub-search")
    assert code == 0 and "disabled" in out
    assert "running mcp-setup sessions (your AI clients, the web page) see it at once" in out and "faces" not in out
    with data.store() as store:
        assert store.servers.get(sid).enabled is False and store.database.change_counter() > before
        assert not any(t for t in store.servers.catalog().tools())
    code, _, _ = cli(capsys, "enable", STUB)
    with data.store() as store:
        assert store.servers.get(sid).enabled is True
        assert [t.name for t in store.servers.catalog().tools()] == ["stub-search__echo"]


def test_disabling_twice_writes_one_audit_row_and_changes_nothing_the_second_time(data, capsys, canary) -> None:
    sid = data.install(STUB, canary)
    assert cli(capsys, "disable", "stub-search")[0] == 0
    with data.store() as store:
        counter = store.database.change_counter()
    assert cli(capsys, "disable", "stub-search")[0] == 0
    with data.store() as store:
        assert [r.event for r in store.audit.entries(server_id=sid)].count("disabled") == 1
        assert store.database.change_counter() == counter and store.servers.get(sid).enabled is False


def test_enable_keep_running_is_shown_audited_and_undone_by_stop_when_idle(data, capsys, canary) -> None:
    sid = data.install(STUB, canary)
    code, out, _ = cli(capsys, "show", "stub-search")
    assert code == 0 and "when idle: it stops after 15 minutes unused and starts again on its next call" in out
    code, out, _ = cli(capsys, "enable", "stub-search", "--keep-running")
    assert code == 0 and "stub-search: it keeps running when idle (you chose so;" in out
    code, out, _ = cli(capsys, "show", "stub-search", "--json")
    assert json.loads(out)["when_idle"].startswith("it keeps running when idle")
    assert cli(capsys, "enable", "stub-search", "--keep-running")[0] == 0  # again: nothing changes
    assert cli(capsys, "enable", "stub-search", "--stop-when-idle")[0] == 0
    with data.store() as store:
        events = [(r.event, r.actor) for r in store.audit.entries(server_id=sid)]
        assert events.count(("keep_running", "cli")) == 1 and events.count(("stop_when_idle", "cli")) == 1
        assert store.servers.get(sid).launch_spec.get("keep_running") is False
    with pytest.raises(SystemExit) as stopped:
        cli(capsys, "enable", "stub-search", "--keep-running", "--stop-when-idle")
    assert stopped.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_enable_and_disable_with_tool_turn_one_tool_back_on_or_leave_it_out(data, capsys, canary) -> None:
    """#29 item 10: the command a left-out tool's refusal names."""
    from setup_agent.store import read_sqlite_catalog

    with data.store() as store:
        sid = store.servers.install(
            qualified_name=STUB,
            source="local",
            version="1.0.0",
            package_type="stdio",
            launch_spec=stub_spec(canary),
            installed_by="agent",
            tools_hash="x",
            env={"STUB_API_KEY": (canary, True)},
            hidden_tools=["whoami"],
            tools=[{"name": "echo", "description": "Echo text"}, {"name": "whoami", "description": "Who"}],
        ).server_id

    def listed() -> set[str]:
        early = read_sqlite_catalog(data.home / "mcp-setup.db")
        return {t.name for t in early.tools()} if early is not None else set()

    assert listed() == {"stub-search__echo"}  # left out in the install's own transaction
    code, out, _ = cli(capsys, "list")
    assert "(stdio, 1 tools; installed by an agent)" in out and "you left out 1 of its tools (whoami)" in out
    assert "mcp-setup enable stub-search --tool TOOL" in out
    code, out, _ = cli(capsys, "show", "stub-search")
    assert "tool whoami (left out by you): Who" in out and "tool echo: Echo text" in out
    code, out, _ = cli(capsys, "show", "stub-search", "--json")
    shown = json.loads(out)
    assert shown["left_out_by_user"] == ["whoami"] and [t["name"] for t in shown["tools"]] == ["echo"]
    code, out, _ = cli(capsys, "client", "list", "--json")  # what a client gets: not the left-out tool
    assert code == 0 and json.loads(out)["tools"] == ["stub-search__echo"]
    code, out, _ = cli(capsys, "enable", "stub-search", "--tool", "whoami")
    assert code == 0 and "whoami: back on" in out and listed() == {"stub-search__echo", "stub-search__whoami"}
    code, out, _ = cli(capsys, "disable", "stub-search", "--tool", "echo")
    assert code == 0 and "left out" in out and listed() == {"stub-search__whoami"}
    code, _, err = cli(capsys, "enable", "stub-search", "--tool", "nope")
    assert code == 1 and "no tool named 'nope'" in err and "echo, whoami" in err
    with data.store() as store:
        assert store.servers.get(sid).enabled is True  # the server itself stays as it was
        assert [e.actor for e in store.audit.entries(server_id=sid) if e.event == "tools_hidden"] == [
            "agent",
            "user:terminal",
            "user:terminal",
        ]


def test_remove_deletes_the_rows_the_install_dir_and_the_log(data, capsys, canary) -> None:
    sid = data.install(STUB, canary)
    (data.home / "servers" / sid).mkdir(parents=True)
    (data.home / "logs").mkdir(parents=True)
    log_path(data.home / "logs", sid).write_text("stub: hello\n")
    code, out, err = cli(capsys, "remove", "stub-search")
    assert code == 0, err
    assert "Removed" in out
    with data.store() as store:
        assert store.servers.list() == [] and store.values.secret_values() == []
    assert not (data.home / "servers" / sid).exists() and not log_path(data.home / "logs", sid).exists()


@pytest.mark.anyio
async def test_logs_print_the_servers_stderr_redacted_from_the_file_the_connection_manager_writes(
    data, capsys, canary
) -> None:
    sid = data.install(STUB, canary, mode="echo_env")  # the stub prints its env, the key included
    with data.store() as store:
        manager = ConnectionManager(
            store,
            Redactor(),
            install_root=data.home / "servers",
            logs_dir=data.home / "logs",
            backoff=(),
            connect_timeout=scaled(20),
        )
        try:
            with anyio.fail_after(scaled(30)):
                status = await manager.connect(store.servers.get(sid))
            assert status.status == "connected"
        finally:
            await manager.aclose()
    text = log_path(data.home / "logs", sid).read_text()
    assert "STUB_API_KEY" in text and "[secret:STUB_API_KEY]" in text and canary not in text
    code, out, _ = cli(capsys, "logs", "stub-search", "--lines", "500")
    assert code == 0 and "[secret:STUB_API_KEY]" in out and canary not in out


def test_search_lists_local_catalog_entries_and_json_has_servers(data, capsys) -> None:
    from tests.stub_server.bundle import stub_server_json

    (data.catalog / "stub.json").write_text(json.dumps(stub_server_json("file:///nonexistent/stub.mcpb", "0" * 64)))
    code, out, _ = cli(capsys, "search", "stub")
    assert code == 0 and "io.github.mcp-setup/stub" in out and "installed as" not in out
    code, out, _ = cli(capsys, "search", "stub", "--json")
    assert code == 0 and json.loads(out)["servers"][0]["qualified_name"] == "io.github.mcp-setup/stub"


def test_search_says_did_you_mean_with_the_command_to_search_for_it(data, capsys) -> None:
    doc = {"name": "io.example.search/playwright", "description": "Automate a browser.", "version": "1.0.0"}
    (data.catalog / "playwright.json").write_text(json.dumps(doc))
    code, out, _ = cli(capsys, "search", "playwrite")  # three edits: only offered
    assert code == 0 and 'Nothing found. Did you mean "playwright"? `mcp-setup search playwright`' in out
    assert "io.example.search/playwright" not in out
    code, out, _ = cli(capsys, "search", "playwrigth")  # one swap: searched in its place, and said
    assert code == 0 and out.startswith('Did you mean "playwright"?\n') and "io.example.search/playwright" in out
    code, out, _ = cli(capsys, "search", "playwrite", "--json")
    assert code == 0 and json.loads(out)["did_you_mean"] == ["playwright"]


def test_search_marks_a_server_that_is_already_installed(data, capsys, canary) -> None:
    from tests.stub_server.bundle import stub_server_json

    (data.catalog / "stub.json").write_text(
        json.dumps(stub_server_json("file:///nonexistent/stub.mcpb", "0" * 64, name=STUB))
    )
    data.install(STUB, canary)
    code, out, _ = cli(capsys, "search", "stub")
    assert code == 0 and f"{STUB}  (local)  [installed as stub-search]" in out


def test_doctor_reports_each_check_and_exits_1_with_a_fix_when_a_server_fails(data, capsys, canary) -> None:
    data.install(STUB, canary)
    code, out, err = cli(capsys, "doctor", "--json")
    report = json.loads(out)
    names = {c["name"]: c for c in report["checks"]}
    assert code == 0 and report["ok"], [c for c in report["checks"] if not c["ok"]]
    assert {"data dir", "database", "data key", "registry local", "server stub-search", "runtime npx"} <= set(names)
    assert names["server stub-search"]["detail"].startswith("answered with")
    data.install(OTHER, "a-wrong-value-1234", expected="the-right-value-1234")  # the stub rejects it
    code, out, _ = cli(capsys, "doctor")
    assert code == 1 and "BAD server other" in out and "fix: `mcp-setup logs other`" in out
    assert canary not in out + err and "a-wrong-value-1234" not in out + err


def rotate(data: DataDir, value: str) -> tuple[int, str]:
    argv = mcp_setup_argv("rotate", "stub-search", "STUB_API_KEY")
    child = pexpect.spawn(argv[0], argv[1:], env=data.env(), cwd=str(REPO), encoding="utf-8", timeout=scaled(60))
    child.expect("New value of STUB_API_KEY \\(hidden\\): ")
    child.sendline(value)
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, child.before


def test_a_value_piped_into_rotate_is_taken_without_a_python_warning(data, canary) -> None:
    import subprocess

    right = canary + "-piped"
    sid = data.install(STUB, canary, expected=right)
    proc = subprocess.run(
        mcp_setup_argv("rotate", "stub-search", "STUB_API_KEY"),
        input=right + "\n",
        text=True,
        capture_output=True,
        env=data.env(),
        cwd=REPO,
        timeout=scaled(60),
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "GetPassWarning" not in proc.stderr and "getpass" not in proc.stderr and right not in proc.stdout + proc.stderr
    )
    with data.store() as store:
        assert store.values.env_values(sid)["STUB_API_KEY"].reveal() == right


def test_rotate_stores_a_new_value_only_when_the_server_answers_with_it(data, canary) -> None:
    right = canary + "-new"
    sid = data.install(STUB, canary, expected=right)
    code, out = rotate(data, "a-wrong-value-5678")
    assert code == 1 and "old value of STUB_API_KEY stays" in out and "a-wrong-value-5678" not in out
    with data.store() as store:
        assert store.values.env_values(sid)["STUB_API_KEY"].reveal() == canary
    code, out = rotate(data, right)
    assert code == 0, out
    assert "answered with" in out and right not in out
    with data.store() as store:
        assert store.values.env_values(sid)["STUB_API_KEY"].reveal() == right


def test_add_runs_the_guided_setup_with_a_hidden_prompt_and_then_list_shows_the_server(
    tmp_path: Path, canary: str
) -> None:
    from tests.helpers.agent import STUB as CATALOG_STUB
    from tests.helpers.agent import make_catalog

    catalog = make_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    argv = mcp_setup_argv("add", CATALOG_STUB)
    child = pexpect.spawn(
        argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(60), dimensions=(50, 200)
    )
    child.expect(r"STUB_API_KEY \(hidden\): ")
    child.sendline(canary)
    child.expect("Tools now available")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert canary not in child.before
    servers = _run_json(env, "list", "--json")["servers"]
    # the person typed the command: the install is theirs, `by cli` (as its removal and disable say)
    assert [(s["qualified_name"], s["installed_by"]) for s in servers] == [(CATALOG_STUB, "cli")]
    audit = _run_json(env, "audit", "--json")["audit"]
    assert [(r["event"], r["actor"]) for r in audit if r["event"] == "installed"] == [("installed", "cli")]
    assert canary not in json.dumps(servers) + json.dumps(audit)


def _run_json(env: dict, *argv: str) -> dict:
    text = pexpect.run(" ".join(mcp_setup_argv(*argv)), env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(60))
    return json.loads(text[text.index("{") :])


def test_search_with_every_registry_failing_names_them_and_where_the_local_catalog_is(
    data, capsys, monkeypatch
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MCP_SETUP_REGISTRIES", "official,local")
    monkeypatch.setenv("MCP_SETUP_OFFICIAL_REGISTRY_URL", f"http://127.0.0.1:{port}")
    code, out, err = cli(capsys, "search", "weather")
    assert code == 0
    assert err.count("registry official could not be searched") == 1 and "127.0.0.1" in err
    assert "Some registries could not be reached" in out and "Try other words" not in out
    assert str(data.catalog) in out and "server.json" in out


def test_list_and_show_say_clearly_which_server_is_disabled_and_which_has_changed_tools(data, capsys, canary) -> None:
    changed = data.install(STUB, canary)
    off = data.install(OTHER, "other-value-123")
    with data.store() as store:  # the server now offers one tool more than the user approved
        store.pins.set_tools(
            changed, [{"name": "echo", "description": "Echo text"}, {"name": "exfiltrate\x1b[2J", "description": "x"}]
        )
        store.servers.set_enabled(off, False, actor="cli")
    code, out, _ = cli(capsys, "list")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith(" ")}
    assert "TOOLS CHANGED" in rows["stub-search"] and "DISABLED" in rows["other"]
    assert "stub-search: its tools changed since you approved them (1 added (exfiltrate\\x1b[2J))" in out
    assert "`mcp-setup tools-review stub-search`" in out and "\x1b" not in out  # the new name is escaped
    assert "other: disabled: its tools are not offered to agents; `mcp-setup enable other`" in out
    code, out, _ = cli(capsys, "list", "--json")
    listed = {s["slug"]: s for s in json.loads(out)["servers"]}
    assert listed["stub-search"]["status"] == "tools_changed"
    assert listed["stub-search"]["tools_change"]["state"] == "changed"
    assert listed["stub-search"]["tools"] == ["echo"]  # only the approved tools
    assert listed["other"]["status"] == "disabled" and "tools_change" not in listed["other"]
    code, out, _ = cli(capsys, "show", "stub-search")
    assert code == 0 and "TOOLS CHANGED;" in out and "Its tools changed since you approved them" in out
    code, out, _ = cli(capsys, "show", "other")
    assert code == 0 and "DISABLED;" in out and "Disabled: its tools are not offered to agents" in out
    code, out, _ = cli(capsys, "show", "other", "--json")
    assert json.loads(out)["status"] == "disabled"
    assert canary not in out


def _read_until(proc: subprocess.Popen[bytes], wanted: str, seen: list[str], timeout: float = scaled(30.0)) -> None:
    """Read the child's stdout (bounded) until a line holds ``wanted``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while not any(wanted in line for line in seen):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line with {wanted!r} within {timeout}s; saw {seen!r}"
            if not sel.select(remaining):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"logs --follow exited ({proc.poll()}) before printing {wanted!r}; saw {seen!r}"
            buf += chunk
            *lines, buf = buf.split(b"\n")
            seen.extend(line.decode(errors="replace") for line in lines)


def test_logs_follow_prints_the_recent_lines_then_each_new_one_until_interrupted(data, canary) -> None:
    sid = data.install(STUB, canary)
    log = log_path(data.home / "logs", sid)
    log.parent.mkdir(parents=True)
    log.write_text("stub: started pid 1\n")
    proc = subprocess.Popen(
        mcp_setup_argv("logs", "stub-search", "--follow"),
        env=data.env(),
        cwd=str(REPO),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    seen: list[str] = []
    try:
        _read_until(proc, "stub: started pid 1", seen)
        with log.open("a") as f:
            f.write("stub: a line written while following\n")
        _read_until(proc, "stub: a line written while following", seen)
        assert proc.poll() is None  # still following
        proc.send_signal(signal.SIGINT)
        code = proc.wait(scaled(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(scaled(10))
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert seen.count("stub: started pid 1") == 1  # the old line once, not again when the file grows


def test_commands_for_people_print_no_info_log_lines_unless_verbose(data, canary) -> None:
    import subprocess

    data.install(STUB, canary)
    for argv in (["list"], ["show", "stub-search"], ["doctor"]):
        done = subprocess.run(
            mcp_setup_argv(*argv), env=data.env(), cwd=str(REPO), capture_output=True, text=True, timeout=scaled(60)
        )
        assert done.returncode == 0, done.stderr
        assert " INFO " not in done.stdout + done.stderr, (argv, done.stderr)
    code, out = rotate(data, canary)
    assert code == 0 and " INFO " not in out, out
    verbose = subprocess.run(
        mcp_setup_argv("doctor", "--verbose"),
        env=data.env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert " DEBUG " in verbose.stderr or " INFO " in verbose.stderr  # asked for: the log is there


@pytest.mark.parametrize(
    ("label", "words"),
    [
        ("cli", "installed by you, in the terminal"),
        ("ui", "installed by you, in this page"),
        ("agent", "installed by an agent"),
        ("import:claude-desktop", "imported from Claude Desktop"),
        ("mcp:claude-code", "installed by Claude Code"),
        ("mcp:vscode", "installed by VS Code"),
        ("mcp:some-new-client", "installed by some new client"),
        ("mcp", "installed by an AI client"),
        ("token:alice via cursor", "installed by the token alice (Cursor)"),
        ("client:stdio via claude-desktop", "installed by an AI client (Claude Desktop)"),
    ],
)
def test_who_installed_a_server_is_said_in_words_and_json_keeps_the_stored_label(
    data, capsys, label: str, words: str
) -> None:
    from app.clients import installed_by_words

    assert installed_by_words(label) == words
    with data.store() as store:
        store.servers.install(
            qualified_name=STUB,
            source="local",
            version="1.0.0",
            package_type="stdio",
            launch_spec=stub_spec("value-1234"),
            installed_by=label,
            tools_hash="x",
            env={"STUB_API_KEY": ("value-1234", True)},
        )
    code, out, _ = cli(capsys, "list")
    assert code == 0 and f"; {words})" in out and f"by {label}" not in out, out
    code, out, _ = cli(capsys, "show", "stub-search")
    assert code == 0 and f"  {words[0].upper()}{words[1:]} on " in out, out
    assert f"by {label}" not in out
    code, out, _ = cli(capsys, "show", "stub-search", "--json")
    assert json.loads(out)["installed_by"] == label
