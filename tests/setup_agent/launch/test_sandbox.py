"""The sandbox every local server starts in (issue #23), proven by a hostile server.

A hostile stub (tests/stub_server/hostile.py, an MCPB python bundle) is installed through the
normal flow (test → consent → install) next to a victim server, and its one tool, called through
the gateway, tries to read mcp-setup's key file and database, list the other servers, read the
victim's dir, read a planted ``~/.ssh/id_rsa`` and ``~/.aws/credentials``, append to
``~/.bashrc``, read mcp-setup's ``/proc/<pid>/environ`` and ``mem`` and signal it. Under ``auto``
(bubblewrap here) and ``landlock`` every attempt fails; under ``off`` the same attempts succeed,
which proves the test can fail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import keyring.backends.fail
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.launch.landlock import abi_version
from setup_agent.setup.service import CallContext
from tests.helpers.paths import REPO, STUB_DIR
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

pytestmark = pytest.mark.anyio

HOSTILE_PY = STUB_DIR / "hostile.py"
VICTIM, HOSTILE = "io.test/victim", "io.test/hostile"
ATTEMPTS = (
    "data_key",
    "database",
    "victim_dir",
    "ssh_key",
    "aws_credentials",
    "bashrc",
    "parent_environ",
    "parent_mem",
    "signal_parent",
)


async def call(runtime: Runtime, tool: str, **args: Any) -> dict:
    with anyio.fail_after(scaled(60)):
        return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


#: What the consent said the hostile server can see, by mode.
SHOWN: dict[str, list[str]] = {}


async def install(runtime: Runtime, name: str, secret: str) -> dict:
    """The normal flow: a test that asks for consent, the user's approval, the test, the install."""
    ref = runtime.refs.mint("STUB_API_KEY", secret)
    asked = await call(runtime, "mcp_setup_test_connection", qualified_name=name, env_refs={"STUB_API_KEY": ref})
    assert asked["error"]["code"] == "consent_required", asked
    pending = runtime.consents.pending()[-1]  # the agent gets no id: the user's channel has it
    SHOWN[name] = list(pending.request.public()["sandbox"])
    runtime.consents.approve(pending.consent_id)
    tested = await call(runtime, "mcp_setup_test_connection", qualified_name=name, env_refs={"STUB_API_KEY": ref})
    assert tested.get("ok") is True, tested
    installed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name=name, env_refs={"STUB_API_KEY": ref}
    )
    if installed.get("error", {}).get("code") == "consent_required":  # asked again, with the tools (#29 item 10)
        again = runtime.consents.pending()[-1]
        assert again.request.tools and not again.request.widenable  # the test's widening stands
        runtime.consents.approve(again.consent_id)
        installed = await call(
            runtime, "mcp_setup_install_and_connect", qualified_name=name, env_refs={"STUB_API_KEY": ref}
        )
    assert installed["status"] == "connected", installed
    return installed


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home with keys in it, and mcp-setup's data dir where it is by default."""
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- planted\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = planted\n")
    (home / ".bashrc").write_text("# the user's shell\n")
    monkeypatch.setenv("HOME", str(home))
    return home


async def attack_results(
    new_runtime, tmp_path: Path, user_home: Path, canary: str, mode: str
) -> tuple[Runtime, dict[str, str]]:
    data = user_home / ".local" / "share" / "mcp-setup"
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    victim, vsha = build_stub_bundle(tmp_path / "dist", expected_value=canary, name="victim")
    (catalog / "victim.json").write_text(json.dumps(stub_server_json(victim.resolve().as_uri(), vsha, name=VICTIM)))
    settings = Settings(
        home=data, registries="local", catalog_dir=catalog, consent="ask", sandbox=mode, probe_timeout_seconds=30
    )
    runtime = new_runtime(settings, keyring_backend=keyring.backends.fail.Keyring())
    await runtime.start(eager=False)
    victim_id = (await install(runtime, VICTIM, canary))["server_id"]
    targets = {
        "data_dir": str(data),
        "user_home": str(user_home),
        "victim_dir": str(data / "servers" / victim_id),
        "pid": os.getpid(),
    }
    hostile, hsha = build_stub_bundle(
        tmp_path / "dist",
        expected_value=None,
        name="hostile",
        server_py=HOSTILE_PY,
        extra_env={"HOSTILE_TARGETS": json.dumps(targets)},
    )
    (catalog / "hostile.json").write_text(json.dumps(stub_server_json(hostile.resolve().as_uri(), hsha, name=HOSTILE)))
    await install(runtime, HOSTILE, "any-key-" + canary[-8:])
    assert (data / "data.key").is_file() and (data / "mcp-setup.db").is_file()  # the targets exist
    await runtime.gateway.refresh(force=True)
    with anyio.fail_after(scaled(30)):
        answer = await runtime.gateway.call("hostile__attack", {})
    return runtime, json.loads(answer["content"][0]["text"])


@pytest.mark.parametrize("mode", ["auto", "landlock"])
async def test_a_hostile_installed_server_reaches_nothing_of_mcp_setup_or_the_user_in_the_sandbox(
    new_runtime, tmp_path: Path, user_home: Path, canary: str, mode: str
) -> None:
    if mode == "landlock" and abi_version() < 6:
        pytest.skip("this kernel has no Landlock with signal scoping (ABI 6)")
    runtime, got = await attack_results(new_runtime, tmp_path, user_home, canary, mode)
    try:
        assert runtime.prober.sandbox.mechanism == ("bwrap" if mode == "auto" else "landlock")
        for attempt in ATTEMPTS:
            assert got[attempt].startswith("failed"), (attempt, got[attempt])
        # Its parent dirs are empty stubs (bwrap) or unreadable (Landlock): no other server is named.
        assert got["list_servers"].startswith("failed") or "," not in got["list_servers"].partition(": ")[2], got
        assert got["own_dir"] == "ok: appended", got  # its own folder works
        assert got["home"] != str(user_home) and got["home"].endswith("/home")  # a private HOME, kept with it
        assert (user_home / ".bashrc").read_text() == "# the user's shell\n"
        mechanism = "bwrap" if mode == "auto" else "landlock"
        assert SHOWN[HOSTILE] == [  # the consent said so, in plain words
            "It can read and write: its own folder.",
            "It cannot see: your home folder, other servers, mcp-setup's keys and database.",
            "Network: allowed.",
            f"Sandbox: {mechanism}.",
        ]
    finally:
        await runtime.aclose()


async def test_with_the_sandbox_off_the_same_hostile_server_reaches_all_of_it(
    new_runtime, tmp_path: Path, user_home: Path, canary: str
) -> None:
    runtime, got = await attack_results(new_runtime, tmp_path, user_home, canary, "off")
    try:
        assert runtime.prober.sandbox.mechanism == "none"
        for attempt in ATTEMPTS:
            assert got[attempt].startswith("ok"), (attempt, got[attempt])
        assert "," in got["list_servers"], got  # both servers' dirs
        assert "hostile was here" in (user_home / ".bashrc").read_text()
        assert SHOWN[HOSTILE] == [
            "Sandbox: none — not isolated on this system. It runs as you and can read what you can read."
        ]
    finally:
        await runtime.aclose()


def test_mcp_setup_show_repeats_the_profile_of_the_consent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli.main import main
    from setup_agent.launch import LaunchSpec
    from setup_agent.secrets import Vault
    from setup_agent.store import Store

    key = tmp_path / "team.key"
    Vault.in_memory().export_key(key)
    granted = tmp_path / "docs"
    granted.mkdir()
    spec = LaunchSpec(command="npx", args=["-y", "some-server@1.0.0"], sandbox_grants=[str(granted)], runner="npx")
    with Store.for_data_dir(tmp_path / "data", Vault.from_key_file(key), None) as store:
        store.servers.install(
            qualified_name="io.test/fs",
            source="local",
            version="1.0.0",
            package_type="npm",
            launch_spec=spec.model_dump(mode="json"),
            installed_by="agent",
            tools_hash="x",
            env={},
        )
    monkeypatch.setenv("MCP_SETUP_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("MCP_SETUP_DATA_KEY_FILE", str(key))
    assert main(["show", "io.test/fs"]) == 0
    out = capsys.readouterr().out
    assert f"sandbox: It can read and write: its own folder, the folder you chose ({granted})." in out
    assert "sandbox: It cannot see: your home folder, other servers, mcp-setup's keys and database." in out
    assert "sandbox: Sandbox: bwrap." in out
    monkeypatch.setenv("MCP_SETUP_SANDBOX", "off")
    assert main(["show", "io.test/fs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sandbox"] == [
        "Sandbox: none — not isolated on this system. It runs as you and can read what you can read."
    ]


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
def test_a_profile_without_network_cannot_reach_even_loopback(tmp_path: Path, mode: str) -> None:
    import socket
    import subprocess
    import sys

    from setup_agent.launch.sandbox import Profile, Sandbox

    if mode == "landlock" and abi_version() < 4:
        pytest.skip("this kernel's Landlock has no TCP rules (ABI 4)")
    sandbox = Sandbox(mode, hide=(tmp_path / "data",), user_home=tmp_path, host_env={"HOME": str(tmp_path)})  # type: ignore[arg-type]
    assert sandbox.mechanism == mode, sandbox.why
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
    try:
        for network, expected in ((True, 0), (False, 1)):
            work = tmp_path / "data" / "servers" / f"srv_{network}"
            work.mkdir(parents=True)
            command, args, env = sandbox.wrap(
                sys.executable, ["-c", code], {"PATH": "/usr/bin:/bin"}, Profile(work, network=network)
            )
            done = subprocess.run(
                [command, *args], env=env, cwd=work, capture_output=True, text=True, timeout=scaled(30)
            )
            assert (done.returncode != 0) == bool(expected), (network, done.stdout, done.stderr[-500:])
    finally:
        listener.close()


PARENT = """
import subprocess, sys
from pathlib import Path
from setup_agent.launch.sandbox import Profile, Sandbox
work = Path(sys.argv[2])
sandbox = Sandbox(sys.argv[1], hide=(work.parent,), user_home=work.parent, host_env={"HOME": str(work.parent)})
command, args, env = sandbox.wrap("/bin/sh", ["-c", "echo started; sleep 300 & wait; : " + sys.argv[3]], {"PATH": "/usr/bin:/bin"},
                                  Profile(work))
child = subprocess.Popen([command, *args], env=env, cwd=work, start_new_session=True)
print(child.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
def test_a_sandboxed_server_dies_with_a_killed_mcp_setup(tmp_path: Path, mode: str, canary: str) -> None:
    import signal
    import subprocess
    import sys

    from tests.helpers.processes import process_alive, processes_mentioning, wait_gone

    if mode == "landlock" and abi_version() < 1:
        pytest.skip("no Landlock here")
    work = tmp_path / "data" / "srv_x"
    work.mkdir(parents=True)
    repo = str(REPO)
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, mode, str(work), canary],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={"PYTHONPATH": repo, "PATH": "/usr/bin:/bin"},
    )
    try:
        assert parent.stdout is not None
        # The parent prints its child's pid, the sandboxed shell "started" (the launcher ran): the two
        # share the pipe, so either comes first.
        lines = {parent.stdout.readline().strip(), parent.stdout.readline().strip()}
        assert "started" in lines, lines
        sandboxed = int(next(line for line in lines if line != "started"))
        assert process_alive(sandboxed)
        parent.send_signal(signal.SIGKILL)  # no cleanup of any kind runs
        parent.wait(scaled(10))
        assert wait_gone([sandboxed]) == []  # bwrap --die-with-parent; Landlock's launcher: PDEATHSIG
        if mode == "bwrap":  # its own PID namespace: the shell's child goes with it
            assert wait_gone(processes_mentioning(canary)) == []
    finally:
        parent.kill()
        for pid in processes_mentioning(canary):
            subprocess.run(["kill", "-9", str(pid)], check=False)


def test_doctor_names_the_mechanism_and_says_plainly_when_nothing_isolates(tmp_path: Path) -> None:
    from app.cli.doctor import _sandbox_check
    from setup_agent.launch.sandbox import Sandbox

    here = _sandbox_check(Sandbox("auto", hide=(tmp_path,), user_home=tmp_path))
    assert here["ok"] and here["detail"].startswith("bwrap (bubblewrap at ")
    mac = _sandbox_check(Sandbox("auto", platform="darwin"))
    assert mac["ok"] and mac["detail"] == "none — not isolated on this system (no sandbox on darwin)"
    bare = _sandbox_check(Sandbox("auto", which=lambda name: None, platform="linux"))  # no bwrap
    assert bare["detail"].startswith("landlock") or (not bare["ok"] and "install bubblewrap" in bare["fix"])
    forced = _sandbox_check(Sandbox("bwrap", which=lambda name: None))
    assert not forced["ok"] and "MCP_SETUP_SANDBOX=bwrap, but it does not work here" in forced["detail"]
    assert "no local server starts" in forced["detail"]
    off = _sandbox_check(Sandbox("off"))
    assert off["ok"] and "MCP_SETUP_SANDBOX=off (unsafe" in off["detail"] and "not isolated" in off["detail"]


async def test_a_forced_mechanism_that_does_not_work_here_starts_nothing(tmp_path: Path) -> None:
    import sys

    from setup_agent.errors import SandboxUnavailable
    from setup_agent.launch import LaunchSpec
    from setup_agent.launch.sandbox import Sandbox
    from setup_agent.secrets import Redactor
    from setup_agent.setup.probe import Prober
    from tests.stub_server.bundle import SERVER_PY

    (tmp_path / "scratch").mkdir()
    prober = Prober(
        Redactor(),
        scratch_root=tmp_path / "scratch",
        timeout=scaled(20),
        sandbox=Sandbox("bwrap", which=lambda name: None),
    )
    spec = LaunchSpec(command=sys.executable, args=[str(SERVER_PY)], env={"STUB_REQUIRE": "0"})
    with pytest.raises(SandboxUnavailable) as caught:
        await prober.probe(spec, {})
    await prober.drain()
    assert caught.value.code == "sandbox_unavailable" and "bubblewrap (bwrap) is not installed" in caught.value.message


def test_an_npx_servers_view_of_its_package_follows_the_npm_cache_of_the_face_that_starts_it(tmp_path: Path) -> None:
    """A server installed from one face (its HOME's npm cache) and started by another (an AI
    client that passes another HOME, or none): its own npx entry links to the package in the
    cache this face shows the sandbox, or is empty when this face has none (npx fills it),
    never left pointing at another cache."""
    import shutil as sh

    from setup_agent.launch.fetch import npx_entry_name
    from setup_agent.launch.sandbox import Profile, Sandbox

    work = tmp_path / "data" / "servers" / "srv_npx"
    work.mkdir(parents=True)
    entry = work / "home" / ".npm" / "_npx" / npx_entry_name("pkg@1.0.0")
    npx = sh.which("npx") or "/usr/bin/npx"
    legacy = tmp_path / "installed-by" / ".npm" / "_npx"
    legacy.mkdir(parents=True)
    entry.parent.parent.mkdir(parents=True)
    entry.parent.symlink_to(legacy, target_is_directory=True)  # what earlier versions made: the whole _npx
    for name in ("installed-by", "started-by"):
        home = tmp_path / name
        shared = home / ".npm" / "_npx" / npx_entry_name("pkg@1.0.0")
        (shared / "node_modules").mkdir(parents=True)
        (shared / "package.json").write_text("{}")
        (home / ".npm" / "_npx" / "0123456789abcdef").mkdir()  # another package's entry
        sandbox = Sandbox("bwrap", hide=(tmp_path / "data",), user_home=home, host_env={"HOME": str(home)})  # type: ignore[arg-type]
        assert sandbox.mechanism == "bwrap", sandbox.why
        sandbox.wrap(npx, ["--yes", "--", "pkg@1.0.0"], {"PATH": "/usr/bin:/bin"}, Profile(work))
        assert sorted(p.name for p in entry.iterdir()) == ["node_modules", "package.json"]
        assert all(p.is_symlink() and p.resolve().parent == shared.resolve() for p in entry.iterdir())
        assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name]  # no other package's entry
        assert not entry.parent.is_symlink()
    bare = Sandbox(
        "bwrap", hide=(tmp_path / "data",), user_home=tmp_path / "nobody", host_env={"HOME": str(tmp_path / "nobody")}
    )  # type: ignore[arg-type]
    bare.wrap(npx, ["--yes", "--", "pkg@1.0.0"], {"PATH": "/usr/bin:/bin"}, Profile(work))
    assert entry.is_dir() and list(entry.iterdir()) == []  # npx fills its own
