"""A data folder that cannot be used is one sentence in every command: the path, the cause, the
fix, a non-zero exit, no traceback. A damaged database, a read-only disk (a real read-only bind
mount made by bubblewrap: the tests run as root, which chmod does not stop), a folder that cannot
be created, no permission (the command run as another user), a key file that cannot be read.
``doctor`` lists each problem it finds instead of stopping at the first."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from app.cli.data_dir import KEY_FILE_NAME
from setup_agent.errors import CommandNotFound, DataDirUnusable, StoreError
from setup_agent.secrets.vault import KEY_FILE_NAME as VAULT_KEY_FILE_NAME
from setup_agent.translation import data_dir_error
from tests.helpers.data_dir import STUB, DataDir
from tests.helpers.mcp_face import REPO, mcp_setup_argv, real_mcp_setup_argv
from tests.helpers.timeouts import scaled

#: What a person runs first: each must say what is wrong with the folder.
COMMANDS: list[tuple[str, ...]] = [
    ("list",),
    ("show", "stub-search"),
    ("doctor",),
    ("add", "stub"),
    ("serve", "--no-browser", "--port", "0"),
]
IDS = [c[0] for c in COMMANDS]


def run(env: dict[str, str], argv: Sequence[str], wrap: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``mcp-setup ARGV``; ``wrap``: the command that starts it (another user, a read-only mount),
    which then starts the real program itself (tests/helpers/prefork.py)."""
    return subprocess.run(
        [*wrap, *real_mcp_setup_argv(*argv)] if wrap else mcp_setup_argv(*argv),
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


def assert_said(done: subprocess.CompletedProcess[str], command: str, *words: str) -> None:
    """One sentence naming the path (doctor: among its checks), exit 1, no traceback, nothing else done."""
    out = done.stdout + done.stderr
    assert done.returncode == 1, (command, out)
    assert "Traceback" not in out and "running at" not in out and "No servers installed" not in out, out
    if command == "doctor":
        assert "BAD" in done.stdout and all(w in done.stdout for w in words), done.stdout
        assert "problem(s) found" in done.stdout and done.stderr == "", out
        return
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("mcp-setup: ") and all(w in line for w in words), line
    assert line.endswith(".") and done.stdout == "", out


@pytest.fixture
def data(tmp_path: Path) -> DataDir:
    d = DataDir(tmp_path)
    d.install(STUB, "value-1234-abcd")
    return d


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
def test_a_file_that_is_not_a_database_is_named_with_the_fix(data: DataDir, argv: tuple[str, ...]) -> None:
    db = data.home / "mcp-setup.db"
    db.write_bytes(b"this is not what mcp-setup wrote\n" * 100)
    done = run(data.env(), argv)
    assert_said(done, argv[0], str(db), "is not a database (damaged?)", "Move it aside", "MCP_SETUP_HOME")


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
def test_a_database_damaged_past_its_header_is_named_with_the_fix(data: DataDir, argv: tuple[str, ...]) -> None:
    db = data.home / "mcp-setup.db"
    damaged = bytearray(db.read_bytes())
    damaged[4096:] = b"\x5a" * (len(damaged) - 4096)  # the header page stays: only reading finds it
    db.write_bytes(bytes(damaged))
    done = run(data.env(), argv)
    assert_said(done, argv[0], str(db), "is not a database (damaged?)")


def read_only_mount() -> list[str]:
    """A bubblewrap prefix that mounts a folder read-only (the rest of the tree as it is)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap (bwrap) is needed to make a read-only mount")
    probe = subprocess.run(
        [bwrap, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/tmp", "/tmp", "true"],
        capture_output=True,
        timeout=scaled(30),
    )
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot make mounts here: {probe.stderr.decode(errors='replace').strip()}")
    return [bwrap, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
def test_a_data_folder_on_a_read_only_disk_is_named_with_the_fix(data: DataDir, argv: tuple[str, ...]) -> None:
    wrap = [*read_only_mount(), "--ro-bind", str(data.home), str(data.home)]
    done = run(data.env(), argv, wrap)
    assert_said(done, argv[0], str(data.home), "is on a read-only disk", "MCP_SETUP_HOME")


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
def test_a_data_folder_that_cannot_be_made_on_a_read_only_disk_is_named(tmp_path: Path, argv: tuple[str, ...]) -> None:
    data = DataDir(tmp_path)  # nothing installed: the folder does not exist yet
    disk = tmp_path / "disk"
    disk.mkdir()
    home = disk / "mcp-setup"
    wrap = [*read_only_mount(), "--ro-bind", str(disk), str(disk)]
    done = run({**data.env(), "MCP_SETUP_HOME": str(home)}, argv, wrap)
    assert_said(done, argv[0], f"{home} cannot be created: {disk} is on a read-only disk")
    assert not home.exists()


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
def test_a_data_folder_under_a_file_cannot_be_created_and_list_does_not_say_nothing_is_installed(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    data = DataDir(tmp_path)
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file where a folder was meant to be\n")
    home = blocker / "mcp-setup"
    done = run({**data.env(), "MCP_SETUP_HOME": str(home)}, argv)
    assert_said(done, argv[0], f"{home} cannot be created: {blocker} is a file, not a folder")


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A folder another user can look into (pytest's own are root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="mcp-setup-perm-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("argv", [("list",), ("add", "stub")], ids=["list", "add"])
def test_a_data_folder_of_another_user_is_named_with_the_fix(shared_root: Path, argv: tuple[str, ...]) -> None:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("runs the command as another user: needs root and setpriv")
    data = DataDir(shared_root)
    data.install(STUB, "value-1234-abcd")
    data.home.chmod(0o755)  # the other user sees it and cannot write to it
    nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    done = run(data.env(), argv, nobody)
    assert_said(done, argv[0], str(data.home), "cannot be written by you (permission denied)", "MCP_SETUP_HOME")


def test_a_key_file_that_cannot_be_read_is_named_and_doctor_lists_it_with_the_damaged_database(
    tmp_path: Path,
) -> None:
    data = DataDir(tmp_path)
    data.install(STUB, "value-1234-abcd")
    team_key = tmp_path / "a-folder-not-a-key"
    team_key.mkdir()
    env = {**data.env(), "MCP_SETUP_DATA_KEY_FILE": str(team_key)}
    done = run(env, ["list"])
    assert_said(done, "list", f"The data key file {team_key} cannot be read (it is a folder)")
    db = data.home / "mcp-setup.db"
    db.write_bytes(b"garbage" * 1000)
    doctor = run(env, ["doctor"])
    assert_said(
        doctor, "doctor", f"BAD database: {db} is not a database", f"BAD data key: The data key file {team_key}"
    )
    assert "2 problem(s) found" in doctor.stdout and "runtime npx" in doctor.stdout  # the rest still checked
    assert "fix: Move it aside" in doctor.stdout


def test_a_damaged_database_is_said_without_making_a_key_file_or_loading_the_store(tmp_path: Path) -> None:
    data = DataDir(tmp_path)
    data.home.mkdir()
    (data.home / "mcp-setup.db").write_text("not sqlite")
    env = data.env()
    del env["MCP_SETUP_DATA_KEY_FILE"]  # the default key file would be made by a store that opens
    done = run(env, ["list"])
    assert_said(done, "list", "is not a database")
    assert sorted(p.name for p in data.home.iterdir()) == ["mcp-setup.db"]


# --- the mapping itself ----------------------------------------------------------------------


def test_the_os_and_sqlite_errors_of_the_data_folder_become_one_sentence_and_others_are_left_alone(
    tmp_path: Path,
) -> None:
    home, db, key = tmp_path / "data", tmp_path / "data" / "mcp-setup.db", tmp_path / "team.key"
    read_only = data_dir_error(OSError(errno.EROFS, "Read-only file system", str(home / "servers")), home, db, key)
    assert isinstance(read_only, DataDirUnusable) and read_only.details["path"] == str(home)
    assert read_only.message.startswith(f"{home} is on a read-only disk.")
    full = data_dir_error(OSError(errno.ENOSPC, "No space left on device", str(db)), home, db, key)
    assert full is not None and full.message.startswith(f"The disk holding {db} is full.")
    unreadable = data_dir_error(PermissionError(errno.EACCES, "Permission denied", str(key)), home, db, key)
    assert unreadable is not None and unreadable.details["check"] == "data key"
    wrapped = StoreError("Could not read the schema revision: the database reported an error.")
    wrapped.__cause__ = sqlite3.DatabaseError("file is not a database")  # as the store raises it
    damaged = data_dir_error(wrapped, home, db, key)
    assert damaged is not None and (damaged.details["path"], damaged.details["check"]) == (str(db), "database")
    # Not the data folder's: another file, or an error the core has already given its meaning.
    assert data_dir_error(PermissionError(errno.EACCES, "Permission denied", "/etc/shadow"), home, db, key) is None
    started = CommandNotFound("Could not start x: permission denied.")
    started.__context__ = PermissionError(errno.EACCES, "Permission denied", str(home / "servers" / "x"))
    assert data_dir_error(started, home, db, key) is None
    assert data_dir_error(ValueError("no"), home, db, key) is None


def test_the_fast_check_names_the_key_file_as_the_vault_does() -> None:
    assert KEY_FILE_NAME == VAULT_KEY_FILE_NAME
