"""What a start checked, told apart from what a later start would run (resume.py): real files
in a temp folder, their ``stat``s as the kernel keeps them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from setup_agent.gateway import resume
from setup_agent.gateway.resume import Checked, files_of
from setup_agent.launch import LaunchSpec, materialize


def launch(folder: Path, **fields: object) -> object:
    spec = LaunchSpec(**{"command": sys.executable, "args": [str(folder / "server.py")], **fields})  # type: ignore[arg-type]
    return materialize(spec, {}, cwd=str(folder / "install"))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "install" / "bundle").mkdir(parents=True)
    (tmp_path / "install" / "bundle" / "index.py").write_text("TOOLS = ['echo']\n")
    (tmp_path / "server.py").write_text("print('hi')\n")
    return tmp_path


def test_the_same_files_give_the_same_fingerprint_and_an_empty_folder_made_by_the_sandbox_counts_for_nothing(
    folder: Path,
) -> None:
    before = files_of(launch(folder), folder / "install")
    (folder / "install" / "home").mkdir()
    assert before is not None and files_of(launch(folder), folder / "install") == before


def test_a_file_of_its_own_folder_rewritten_with_its_mtime_set_back_is_a_change(folder: Path) -> None:
    code = folder / "install" / "bundle" / "index.py"
    before = files_of(launch(folder), folder / "install")
    stat = code.stat()
    code.write_text("TOOLS = ['ECHO']\n")  # same size
    os.utime(code, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert files_of(launch(folder), folder / "install") != before


def test_a_file_its_command_line_names_or_a_new_file_in_its_folder_is_a_change(folder: Path) -> None:
    before = files_of(launch(folder), folder / "install")
    (folder / "server.py").write_text("print('other')\n")
    after_script = files_of(launch(folder), folder / "install")
    (folder / "install" / "sitecustomize.py").write_text("")
    assert len({before, after_script, files_of(launch(folder), folder / "install")}) == 3


@pytest.mark.parametrize(
    ("fields", "told"),
    [
        (
            {"command": "npx", "args": ["-y", "pkg@1.2.3"], "package_type": "npm", "runner": "npx", "version": "1.2.3"},
            True,
        ),
        (
            {
                "command": "uvx",
                "args": ["pkg==0.4.0.post1"],
                "package_type": "pypi",
                "runner": "uvx",
                "version": "0.4.0.post1",
            },
            True,
        ),
        ({"command": "npx", "args": ["-y", "pkg"], "package_type": "npm", "runner": "npx", "version": None}, False),
        (
            {"command": "npx", "args": ["-y", "pkg@^1.2"], "package_type": "npm", "runner": "npx", "version": "^1.2"},
            False,
        ),
        (
            {
                "command": "npx",
                "args": ["-y", "pkg@latest"],
                "package_type": "stdio",
                "runner": "npx",
                "version": "latest",
            },
            False,
        ),
        (
            {
                "command": "docker",
                "args": ["run", "-i", "img:1.0.0"],
                "package_type": "oci",
                "runner": "docker",
                "version": "1.0.0",
            },
            False,
        ),
    ],
)
def test_a_runners_package_is_told_only_at_an_exact_release_and_a_container_never(
    folder: Path, fields: dict[str, object], told: bool
) -> None:
    assert (files_of(launch(folder, **fields), folder / "install") is not None) is told


def test_a_remote_or_a_folder_too_large_to_look_at_cheaply_cannot_be_told(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = materialize(LaunchSpec(transport="streamable-http", url="https://example.test/mcp"), {})
    assert files_of(remote, folder / "install") is None  # type: ignore[arg-type]
    monkeypatch.setattr(resume, "MAX_ENTRIES", 3)
    assert files_of(launch(folder), folder / "install") is None


def test_a_check_holds_only_for_the_same_launch_settings_and_files() -> None:
    checked = Checked({"command": "x"}, "stamp", "files")
    assert checked.holds_for({"command": "x"}, "stamp", "files")
    assert not checked.holds_for({"command": "y"}, "stamp", "files")  # its launch changed
    assert not checked.holds_for({"command": "x"}, "replaced", "files")  # a key was replaced
    assert not checked.holds_for({"command": "x"}, "stamp", "other")  # its files changed
    assert not checked.holds_for({"command": "x"}, "stamp", None)  # cannot be told
