"""The sandbox's words are true about the person's home: a file there that a registry entry names
(``~/.git-credentials``) is kept from the server, and the usual credential files stay hidden even
inside a folder the person's settings grant. Real bubblewrap and Landlock starts of ``cat``; with
the sandbox off the same reads succeed, which proves the test can fail."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from setup_agent.launch.grants import profile_words
from setup_agent.launch.landlock import abi_version
from setup_agent.launch.sandbox import USER_SECRETS, Profile, Sandbox
from tests.timeouts import scaled

CREDENTIAL_FILES = (".git-credentials", ".npmrc", ".pypirc", ".pgpass", ".bash_history", ".zsh_history")


@pytest.fixture
def home(tmp_path: Path, canary: str) -> Path:
    home = tmp_path / "user"
    (home / "projects").mkdir(parents=True)
    (home / "projects" / "notes.txt").write_text("my notes\n")
    for name in CREDENTIAL_FILES:
        (home / name).write_text(f"https://me:{canary}@github.com\n")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text(canary)
    return home


def run_cat(sandbox: Sandbox, tmp_path: Path, files: list[Path], *, grants: tuple[Path, ...] = ()) -> str:
    workdir = tmp_path / "server"
    workdir.mkdir(exist_ok=True)
    profile = Profile(workdir, grants, False, (), tuple(files))
    cat = "/usr/bin/cat"
    command, args, env = sandbox.wrap(cat, [str(f) for f in files], {"PATH": "/usr/bin:/bin"}, profile)
    done = subprocess.run([command, *args], env=env, capture_output=True, text=True, timeout=scaled(30))
    return done.stdout + done.stderr


def sandbox_of(mode: str, home: Path, tmp_path: Path) -> Sandbox:
    sandbox = Sandbox(mode, hide=(tmp_path / "data",), user_home=home, host_env={"HOME": str(home)})  # type: ignore[arg-type]
    if mode != "off" and sandbox.mechanism == "none":
        pytest.skip(f"no {mode} sandbox on this machine: {sandbox.why}")
    if mode == "landlock" and abi_version() < 4:
        pytest.skip("this kernel's Landlock is too old for this test")
    return sandbox


@pytest.mark.parametrize("mode", ["auto", "landlock"])
def test_a_file_in_the_home_an_entry_names_is_kept_from_the_server_and_the_consent_says_so(
    tmp_path: Path, home: Path, canary: str, mode: str
) -> None:
    sandbox = sandbox_of(mode, home, tmp_path)
    script = tmp_path / "server.js"  # outside the home: what an entry's own script would be
    script.write_text("console.log('hi')\n")
    out = run_cat(sandbox, tmp_path, [home / ".git-credentials", script])
    assert canary not in out and "console.log('hi')" in out
    words = profile_words(sandbox.mechanism, reads=[str(home / ".git-credentials"), str(script)], user_home=str(home))
    assert f"It can read: {script} (named in its command line)." in words
    assert f"Kept from it: {home / '.git-credentials'} (named in its command line, but in your home folder)." in words
    assert "It cannot see: your home folder, other servers, mcp-setup's keys and database." in words


@pytest.mark.parametrize("mode", ["auto", "landlock"])
def test_a_granted_home_folder_still_hides_the_usual_credential_files(
    tmp_path: Path, home: Path, canary: str, mode: str
) -> None:
    sandbox = sandbox_of(mode, home, tmp_path)
    wanted = [
        home / "projects" / "notes.txt",
        *(home / name for name in CREDENTIAL_FILES),
        home / ".ssh" / "id_ed25519",
    ]
    out = run_cat(sandbox, tmp_path, wanted, grants=(home,))
    assert "my notes" in out  # the grant works
    assert canary not in out
    # A grant inside a credential folder is dropped altogether.
    assert canary not in run_cat(sandbox, tmp_path, [home / ".ssh" / "id_ed25519"], grants=(home / ".ssh",))


def test_with_the_sandbox_off_the_same_reads_succeed(tmp_path: Path, home: Path, canary: str) -> None:
    sandbox = sandbox_of("off", home, tmp_path)
    assert canary in run_cat(sandbox, tmp_path, [home / ".git-credentials"])
    assert canary in run_cat(sandbox, tmp_path, [home / ".ssh" / "id_ed25519"], grants=(home,))


def test_the_deny_list_names_the_usual_credential_files() -> None:
    for name in (*CREDENTIAL_FILES, ".netrc", ".docker", ".kube", ".aws", ".azure", ".config", ".ssh"):
        assert name in USER_SECRETS, name


@pytest.mark.parametrize("mode", ["auto", "landlock"])
def test_a_home_file_the_person_ticked_is_readable_and_a_credential_file_never_is(
    tmp_path: Path, home: Path, canary: str, mode: str
) -> None:
    sandbox = sandbox_of(mode, home, tmp_path)
    script = home / "projects" / "notes.txt"
    workdir = tmp_path / "server"
    workdir.mkdir(exist_ok=True)
    named = (script, home / ".git-credentials")
    profile = Profile(workdir, (), False, (), named, chosen=named)  # both "ticked": only the first shows
    command, args, env = sandbox.wrap("/usr/bin/cat", [str(p) for p in named], {"PATH": "/usr/bin:/bin"}, profile)
    done = subprocess.run([command, *args], env=env, capture_output=True, text=True, timeout=scaled(30))
    assert "my notes" in done.stdout and canary not in done.stdout + done.stderr


def test_the_consent_offers_the_named_home_files_unticked_and_only_those(tmp_path: Path, home: Path) -> None:
    from setup_agent.errors import InvalidInput
    from setup_agent.launch import LaunchSpec
    from setup_agent.setup import build_consent_request
    from setup_agent.setup.sandbox_choice import apply_sandbox_choice, validated_sandbox_choice

    script, credentials = str(home / "projects" / "notes.txt"), str(home / ".git-credentials")
    spec = LaunchSpec(command="node", args=[script, credentials, "/opt/tool.js"], runner="node")
    request = build_consent_request(
        server="io.test/named", version="1", spec=spec, keys=[], values={}, sandbox="bwrap", user_home=str(home)
    )
    assert request.home_files == [script]  # a credential file is never offered
    assert "It can read: /opt/tool.js (named in its command line)." in request.sandbox
    assert any(line.startswith("Kept from it: ") and script in line and credentials in line for line in request.sandbox)
    with pytest.raises(InvalidInput):
        validated_sandbox_choice(True, {"reads": [credentials]}, home_files=request.home_files)
    choice = validated_sandbox_choice(True, {"reads": [script]}, home_files=request.home_files)
    ticked = apply_sandbox_choice(spec, choice)
    assert ticked.sandbox_reads == [script]
    again = build_consent_request(
        server="io.test/named", version="1", spec=ticked, keys=[], values={}, sandbox="bwrap", user_home=str(home)
    )
    assert any(line.startswith("It can read: ") and script in line for line in again.sandbox)
    assert any(
        line.startswith("Kept from it: ") and credentials in line and script not in line for line in again.sandbox
    )
