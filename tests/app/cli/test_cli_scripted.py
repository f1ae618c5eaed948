"""#25 item 10: scripts can tell failure from cancel, and run ``add`` without a terminal.

``mcp-setup add`` as a real subprocess with piped or closed stdin: no match exits 3, a piped
key into a crashing server exits 1 (130 stays for a real Ctrl-C: tests/app/cli/test_cli_add_flow.py),
``--yes`` approves the consent it prints in full, and ``--secret KEY=-|@FILE`` hands the key
over with the value in no process's argv, no output, no log and no clear database byte.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.add_flow import make_catalog
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled


def env_for(tmp_path: Path, catalog: Path, **extra: str) -> dict[str, str]:
    return face_env(
        tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_CONSENT="ask", **extra
    )


def add(env: dict[str, str], *argv: str, stdin: str | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        mcp_setup_argv("add", *argv),
        env=env,
        cwd=REPO,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    return proc.returncode, proc.stdout + proc.stderr


def argv_of_every_process() -> list[bytes]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return out


def test_add_with_no_match_and_closed_stdin_exits_3_not_130(tmp_path: Path) -> None:
    empty = tmp_path / "empty-catalog"
    empty.mkdir()
    proc = subprocess.run(
        mcp_setup_argv("add", "notion"),
        env=env_for(tmp_path, empty),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "I found no MCP server matching “notion”" in out
    assert "Cancelled" not in out and "the input ended before a question was answered" in out


def test_a_piped_key_into_a_crashing_server_exits_1_not_130(tmp_path: Path, canary: str) -> None:
    env = env_for(tmp_path, make_catalog(tmp_path, canary, mode="crash"))
    code, out = add(env, "stub", "--yes", stdin=canary + "\n")
    assert code == 1, out
    assert "The connection test failed" in out and "Cancelled" not in out
    assert canary not in out


def test_yes_and_a_secret_from_a_file_install_with_the_value_in_no_argv_output_log_or_clear_byte(
    tmp_path: Path, canary: str
) -> None:
    env = env_for(tmp_path, make_catalog(tmp_path, canary))
    key_file = tmp_path / "key.txt"
    key_file.write_text(canary + "\n")
    seen_in_argv: list[bytes] = []
    proc = subprocess.Popen(
        mcp_setup_argv("add", "stub", "--yes", "--secret", f"STUB_API_KEY=@{key_file}"),
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while proc.poll() is None:  # every process on the machine, while the add runs (the stub's too)
            seen_in_argv += [a for a in argv_of_every_process() if canary.encode() in a]
            try:
                proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        proc.kill()
        proc.wait(timeout=scaled(30))
    assert proc.returncode == 0, out
    assert not seen_in_argv
    # the consent is printed in full, then approved by --yes
    assert "mcp-setup needs your approval to" in out and "Command line:" in out and "STUB_API_KEY: your secret" in out
    assert "Approved (--yes)." in out and "Allow this?" not in out
    # one approval per install: the test's covers it, and the install keeps every tool the test found
    assert out.count("Approved (--yes)") == 1 and "Untick which" not in out
    assert "STUB_API_KEY from --secret" in out
    assert canary not in out
    data = Path(env["MCP_SETUP_HOME"])
    for path in data.rglob("*"):
        if path.is_file() and path.name != "data.key":
            assert canary.encode() not in path.read_bytes(), path


def test_a_secret_from_stdin_is_used_once_and_the_rest_of_the_run_reads_no_more(tmp_path: Path, canary: str) -> None:
    env = env_for(tmp_path, make_catalog(tmp_path, canary))
    code, out = add(env, "stub", "--yes", "--secret", "STUB_API_KEY=-", stdin=canary + "\n")
    assert code == 0, out
    assert "Installed" in out and canary not in out


def test_a_secret_value_on_the_command_line_is_refused_without_echoing_it(tmp_path: Path, canary: str) -> None:
    env = env_for(tmp_path, make_catalog(tmp_path, canary))
    for arg, said in (
        (f"STUB_API_KEY={canary}", "never on the command line"),
        ("STUB_API_KEY=@/nonexistent/k", "cannot read"),
        ("A=-", "Only one --secret"),
    ):
        extra = ["--secret", "B=-"] if arg == "A=-" else []
        code, out = add(env, "stub", "--secret", arg, *extra)
        assert code == 2 and said in out, out
        assert canary not in out
    assert not (Path(env["MCP_SETUP_HOME"]) / "mcp-setup.db").exists()  # refused before anything ran
