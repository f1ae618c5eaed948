"""``mcp-setup export`` and ``mcp-setup apply`` (#28 item 4): one data dir's servers written as a
lock file and installed on a fresh one with the secrets typed again; an artifact or a tool list
that differs from the file is refused, saying what differs; the planted secret is never in the
file, the output or the logs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pexpect
import pytest
from keyring.backends import fail

from app.runtime import build_runtime
from app.settings import Settings
from setup_agent.setup import CallContext, InstallRequest
from tests.fakes.loopback import TrickleHandler, serve_loopback
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

STUB = "io.github.mcp-setup/stub"
PROMPT = rf"STUB_API_KEY for {STUB} \(hidden\): "


@contextmanager
def serve_path(path: Path) -> Iterator[str]:
    """``path`` over loopback HTTP, read again at each request (a registry that republishes)."""

    class Handler(TrickleHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_body(path.read_bytes(), "application/octet-stream")

    with serve_loopback(Handler) as port:
        yield f"http://127.0.0.1:{port}/{path.name}"


@contextmanager
def published(tmp: Path, expected: str, **bundle: object) -> Iterator[tuple[FakeOfficialRegistry, Path, str]]:
    """The stub bundle (wanting ``expected``) served over HTTP and listed by a fake official registry."""
    path, sha = build_stub_bundle(tmp / "dist", expected_value=expected, **bundle)  # type: ignore[arg-type]
    with serve_path(path) as url, FakeOfficialRegistry([stub_server_json(url, sha)]) as registry:
        yield registry, path, url


def machine(tmp: Path, name: str, registry: FakeOfficialRegistry, **extra: str) -> dict[str, str]:
    return face_env(tmp / name, MCP_SETUP_REGISTRIES="official", MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url, **extra)


def install_here(env: dict[str, str], value: str) -> None:
    """Installs the stub on ``env``'s data dir (or database), in process, as any face's install does."""

    async def go() -> None:
        settings = Settings(
            home=env["MCP_SETUP_HOME"],
            registries="official",
            official_registry_url=env["MCP_SETUP_OFFICIAL_REGISTRY_URL"],
            database_url=env.get("MCP_SETUP_DATABASE_URL"),
        )
        runtime = build_runtime(settings, keyring_backend=fail.Keyring())
        try:
            with anyio.fail_after(scaled(60)):
                ref = runtime.refs.mint("STUB_API_KEY", value)
                request = InstallRequest(qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
                result = await runtime.service.install_and_connect(request, CallContext(installed_by="cli"))
            assert result["status"] == "connected"
        finally:
            await runtime.aclose()

    anyio.run(go)


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        mcp_setup_argv(*argv),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        stdin=subprocess.DEVNULL,
    )


def apply(env: dict[str, str], lock: Path, *answers: tuple[str, str], verbose: bool = False) -> tuple[int | None, str]:
    """``mcp-setup apply`` on a pty: each (expected prompt, line to type); its exit and output."""
    argv = mcp_setup_argv("apply", str(lock), *(["--verbose"] if verbose else []))
    child = pexpect.spawn(
        argv[0], argv[1:], env=env, cwd=str(REPO), encoding="utf-8", timeout=scaled(90), dimensions=(50, 250)
    )
    out = ""
    for prompt, line in answers:
        child.expect(prompt)
        out += child.before + child.after
        child.sendline(line)
    index = child.expect([pexpect.EOF, r"\(hidden\): ", r"\[y/N\]: "])
    out += child.before
    if index:  # asked something the test did not expect: fail below
        out += "<<asked: " + str(child.after) + ">>"
        child.sendcontrol("c")
        child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, out


def installed(env: dict[str, str]) -> list[dict]:
    return json.loads(run(env, "list", "--json").stdout)["servers"]


def stub_answers(env: dict[str, str]) -> bool:
    """``doctor`` starts each enabled server once: the stub answers only with its expected key."""
    doctor = json.loads(run(env, "doctor", "--json").stdout)
    return next(c for c in doctor["checks"] if c["name"] == "server stub")["ok"] is True


def logs_text(env: dict[str, str]) -> str:
    logs = Path(env["MCP_SETUP_HOME"]) / "logs"
    return "".join(p.read_text(errors="replace") for p in logs.glob("*")) if logs.exists() else ""


def export(env: dict[str, str], tmp: Path) -> tuple[Path, dict, str]:
    lock = tmp / "servers.lock.json"
    done = run(env, "export", "--to", str(lock))
    assert done.returncode == 0, done.stderr
    return lock, json.loads(lock.read_text()), done.stdout + done.stderr


def test_a_lock_file_exported_on_one_data_dir_installs_the_same_server_on_a_fresh_one_with_the_secret_typed_again(
    tmp_path: Path, canary: str
) -> None:
    with published(tmp_path, canary) as (registry, bundle, url):
        laptop = machine(tmp_path, "laptop", registry)
        install_here(laptop, canary)
        lock, doc, said = export(laptop, tmp_path)
        assert oct(lock.stat().st_mode & 0o777) == "0o644"
        assert "mcp-setup apply" in said and "STUB_API_KEY" in said
        assert json.loads(run(laptop, "export").stdout)["servers"] == doc["servers"]  # stdout: the same document
        [entry] = doc["servers"]
        assert (doc["format"], doc["version"]) == ("mcp-setup-lock", 1)
        assert (entry["qualified_name"], entry["registry"], entry["version"]) == (STUB, "official", "1.0.0")
        assert entry["package"] == {"type": "mcpb", "identifier": url}
        assert entry["artifact"]["digest"] == "sha256:" + hashlib.sha256(bundle.read_bytes()).hexdigest()
        assert entry["secrets"] == ["STUB_API_KEY"] and "STUB_API_KEY" not in entry["settings"]
        assert sorted(entry["tools"]["approved"]) == ["echo", "whoami"] and len(entry["tools"]["hash"]) == 64
        assert entry["launch"]["command"] == "python3" and "${__dirname}/server/server.py" in entry["launch"]["args"]
        assert entry["sandbox"] == {"grants": [], "network": True}

        new_laptop = machine(tmp_path, "new-laptop", registry)
        code, out = apply(new_laptop, lock, (PROMPT, canary))
        assert code == 0, out
        assert f"✓ {STUB} 1.0.0 installed, connected (2 tools) as stub" in out, out
        assert "1 installed, 0 already installed identically, 0 failed." in out
        [server] = installed(new_laptop)
        assert (server["qualified_name"], server["version"], server["slug"]) == (STUB, "1.0.0", "stub")
        assert stub_answers(new_laptop)  # it runs with the secret typed again
        db = sqlite3.connect(Path(new_laptop["MCP_SETUP_HOME"]) / "mcp-setup.db")
        assert db.execute("SELECT artifact_digest FROM mcp_servers").fetchall() == [(entry["artifact"]["digest"],)]
        db.close()  # the install recorded the digest it checked (migration 0010)
        (tmp_path / "again").mkdir()
        _, again, _ = export(new_laptop, tmp_path / "again")
        assert again["servers"][0]["artifact"] == entry["artifact"]
        assert again["servers"][0]["tools"] == entry["tools"]

        code, out2 = apply(new_laptop, lock)  # idempotent: nothing asked, nothing changed
        assert code == 0, out2
        assert f"= {STUB} 1.0.0 is already installed as the file says." in out2
        assert "0 installed, 1 already installed identically, 0 failed." in out2
        assert [s["server_id"] for s in installed(new_laptop)] == [server["server_id"]]

        other = tmp_path / "other.lock.json"  # the same server, another version than the one installed here
        other.write_text(lock.read_text().replace('"version": "1.0.0"', '"version": "0.9.0"'))
        done = run(new_laptop, "apply", str(other))
        assert done.returncode == 1, done.stderr
        assert (
            f"{STUB} is installed here differently (version 1.0.0 here, 0.9.0 in the file; another launch or "
            "sandbox). To apply the file's: mcp-setup remove stub, then apply again."
        ) in done.stderr
        other.write_text(lock.read_text().replace('"registry": "official"', '"registry": "local"'))
        done = run(machine(tmp_path, "third", registry), "apply", str(other))
        assert done.returncode == 1, done.stderr
        assert (
            f"{STUB} comes from the registry 'local', which this mcp-setup does not search "
            "(MCP_SETUP_REGISTRIES=official): add it there." in done.stderr
        )
        assert "nothing was installed" not in done.stdout and "(hidden)" not in done.stdout + done.stderr

    for text in (lock.read_text(), said, out, out2, logs_text(laptop), logs_text(new_laptop)):
        assert canary not in text


def test_the_tools_left_out_on_one_data_dir_are_in_its_lock_file_and_left_out_where_it_is_applied(
    tmp_path: Path, canary: str
) -> None:
    """#29 item 10: the person's choice travels with the file, never re-exposing a tool they left out."""
    with published(tmp_path, canary) as (registry, _bundle, _url):
        laptop = machine(tmp_path, "laptop", registry)
        install_here(laptop, canary)
        assert run(laptop, "disable", "stub", "--tool", "whoami").returncode == 0
        lock, doc, _ = export(laptop, tmp_path)
        assert doc["servers"][0]["tools"]["left_out"] == ["whoami"]
        new_laptop = machine(tmp_path, "new-laptop", registry, MCP_SETUP_CONSENT="ask")
        code, out = apply(new_laptop, lock, (r"\[y/N\]: ", "y"), (PROMPT, canary))
        assert code == 0 and f"✓ {STUB} 1.0.0 installed, connected (1 tools) as stub" in out, out
        assert "Tools (2): echo, whoami" in out and "Left out: whoami" in out  # shown before the one yes/no
        [server] = installed(new_laptop)
        assert server["left_out_by_user"] == ["whoami"] and server["tools"] == ["echo"]
        code, again = apply(new_laptop, lock)  # the same choice: installed identically
        assert code == 0 and "1 already installed identically" in again, again


def test_a_team_database_exports_its_servers_and_a_laptop_on_sqlite_applies_them(
    tmp_path: Path, canary: str, postgres_url: str
) -> None:
    with published(tmp_path, canary) as (registry, _bundle, _url):
        team = machine(tmp_path, "team", registry, MCP_SETUP_DATABASE_URL=postgres_url)
        install_here(team, canary)
        lock, doc, _ = export(team, tmp_path)
        assert [s["qualified_name"] for s in doc["servers"]] == [STUB]
        laptop = machine(tmp_path, "laptop", registry)
        code, out = apply(laptop, lock, (PROMPT, canary))
        assert code == 0, out
        assert stub_answers(laptop)
    assert canary not in out + lock.read_text()


def test_apply_asks_one_consent_for_the_whole_file_and_a_no_installs_nothing(tmp_path: Path, canary: str) -> None:
    with published(tmp_path, canary) as (registry, _bundle, _url):
        laptop = machine(tmp_path, "laptop", registry)
        install_here(laptop, canary)
        lock, _doc, _ = export(laptop, tmp_path)
        fresh = machine(tmp_path, "fresh", registry, MCP_SETUP_CONSENT="ask")
        code, out = apply(fresh, lock, (r"\[y/N\]: ", "n"))
        assert code == 130, out
        assert "mcp-setup needs your approval to install 1 server(s) from this lock file:" in out
        assert f"{STUB} 1.0.0 from the registry official" in out and "Artifact: MCPB sha256 sha256:" in out
        assert (
            "Command line: python3 <its own folder>/server/server.py" in out
            and "Asked next (hidden): STUB_API_KEY" in out
        )
        assert "Environment: STUB_API_KEY=<your STUB_API_KEY>" in out and "STUB_API_KEY: your secret, never " in out
        assert "Tools (2): echo, whoami" in out and "- It cannot see: your home folder" in out
        assert "Sandbox: Sandbox:" not in out and "${" not in out  # one sandbox block, templates in words
        assert "Not approved: nothing was installed." in out and installed(fresh) == []

        code, out = apply(fresh, lock, (r"\[y/N\]: ", "y"), (PROMPT, canary))  # asked once, not per server step
        assert code == 0, out
        assert out.count("[y/N]") == 1 and "needs your approval to install" in out
        assert stub_answers(fresh)
    assert canary not in out


def test_ctrl_c_at_a_secret_prompt_cancels_with_exit_130_and_installs_nothing(tmp_path: Path, canary: str) -> None:
    with published(tmp_path, canary) as (registry, _bundle, _url):
        laptop = machine(tmp_path, "laptop", registry)
        install_here(laptop, canary)
        lock, _doc, _ = export(laptop, tmp_path)
        fresh = machine(tmp_path, "fresh", registry)
        argv = mcp_setup_argv("apply", str(lock))
        child = pexpect.spawn(argv[0], argv[1:], env=fresh, cwd=str(REPO), encoding="utf-8", timeout=scaled(60))
        child.expect(PROMPT)
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 130, child.before
        assert "Cancelled: nothing was installed." in child.before and "Traceback" not in child.before
        assert installed(fresh) == []


def test_an_artifact_republished_with_other_bytes_is_refused_with_the_expected_and_found_digest(
    tmp_path: Path, canary: str
) -> None:
    with published(tmp_path, canary) as (registry, bundle, _url):
        laptop = machine(tmp_path, "laptop", registry)
        install_here(laptop, canary)
        lock, doc, _ = export(laptop, tmp_path)
        old = doc["servers"][0]["artifact"]["digest"]
        # The publisher replaces the bundle at the same URL and version, with the registry's sha256 to match.
        _, new_sha = build_stub_bundle(tmp_path / "dist", expected_value=canary, mode="slow")
        registry.entries[0]["server"]["packages"][0]["fileSha256"] = new_sha
        assert "sha256:" + new_sha != old
        fresh = machine(tmp_path, "fresh", registry)
        code, out = apply(fresh, lock)
        assert code == 1, out
        assert (
            f"{STUB} 1.0.0: the artifact differs from the lock file: expected MCPB sha256 {old}, found sha256:{new_sha}"
            in out
        )
        assert "Nothing of it was run." in out and "(hidden)" not in out  # refused before anything is asked
        assert installed(fresh) == []
        assert not list((Path(fresh["MCP_SETUP_HOME"]) / "servers").glob("srv_*"))
        assert bundle.exists()
    assert canary not in out


def test_a_tool_list_that_differs_from_the_file_is_refused_naming_the_tools_and_nothing_is_installed(
    tmp_path: Path, canary: str
) -> None:
    tools_file = tmp_path / "stub-tools.json"  # read by the stub at each start (absent on the laptop)
    with published(tmp_path, canary, extra_env={"STUB_TOOLS_FILE": str(tools_file)}) as (registry, _bundle, _url):
        laptop = machine(tmp_path, "laptop", registry)
        install_here(laptop, canary)
        lock, doc, _ = export(laptop, tmp_path)
        tools_file.write_text(
            json.dumps(
                {
                    "extra": [
                        {
                            "name": "exfiltrate",
                            "description": "Sends your files elsewhere.",
                            "inputSchema": {"type": "object"},
                        }
                    ],
                    "descriptions": {"echo": "Echo the given text back, and more."},
                }
            )
        )
        # Sandbox off: the stub reads the tool file beside the test, outside its own folder.
        fresh = machine(tmp_path, "fresh", registry, MCP_SETUP_SANDBOX="off")
        code, out = apply(fresh, lock, (PROMPT, canary), verbose=True)  # debug logs too: no canary in them
        assert code == 1, out
        assert " DEBUG " in out
        assert f"{STUB}: the tool list differs from the lock file (added: exfiltrate; changed: echo; " in out, out
        assert f"expected tools hash {doc['servers'][0]['tools']['hash']}, found " in out
        assert "It was not installed." in out and "0 installed, 0 already installed identically, 1 failed." in out
        assert installed(fresh) == []
        assert not list((Path(fresh["MCP_SETUP_HOME"]) / "servers").glob("srv_*"))
    assert canary not in out + logs_text(fresh)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "The lock file is not JSON (line 1, column 2)"),
        ('{"format": "something-else"}', 'This is not an mcp-setup lock file (no "format": "mcp-setup-lock")'),
        (
            '{"format": "mcp-setup-lock", "version": 7, "servers": []}',
            "The lock file is version 7, newer than this mcp-setup reads (version 1): update mcp-setup",
        ),
        (
            '{"format": "mcp-setup-lock", "version": 1, "servers": [{"qualified_name": "a/b", "registry": "npmjs"}]}',
            "The lock file names an unknown registry for a/b: 'npmjs' (mcp-setup knows official, smithery, local); "
            "it was left out.",
        ),
        (
            '{"format": "mcp-setup-lock", "version": 1, "servers": [{"qualified_name": "a/b", "registry": "local"}]}',
            'The lock file\'s server 1 (a/b) cannot be used: "package" must be an object; it was left out.',
        ),
    ],
)
def test_a_file_or_entry_apply_cannot_use_is_said_with_what_is_wrong_and_exit_1(
    tmp_path: Path, text: str, said: str
) -> None:
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local")
    lock = tmp_path / "bad.json"
    lock.write_text(text)
    done = run(env, "apply", str(lock))
    assert done.returncode == 1, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_apply_of_a_file_that_is_not_there_is_exit_3_and_help_says_the_steps(tmp_path: Path) -> None:
    env = face_env(tmp_path)
    done = run(env, "apply", str(tmp_path / "missing.json"))
    assert done.returncode == 3 and f"no such file: {tmp_path / 'missing.json'}" in done.stderr
    helped = run(env, "apply", "--help").stdout
    for words in ("exact version", "approve the whole file once", "hidden prompt", "Exit codes", "130 cancelled"):
        assert words in helped
    assert "never their values" in run(env, "export", "--help").stdout
    assert os.path.exists(REPO / "README.md")


@pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")
def test_an_npm_lock_entry_carries_its_integrity_applies_elsewhere_and_a_tarball_republished_is_refused(
    tmp_path: Path, canary: str
) -> None:
    from tests.fakes.npm_registry import serve_npm_package
    from tests.helpers.package_flow import write_catalog_entry

    name, package = "io.test/npm-stub", "mcp-setup-npm-stub"
    with serve_npm_package(package, "1.0.0") as registry:
        laptop = face_env(
            tmp_path / "laptop",
            MCP_SETUP_REGISTRIES="local",
            MCP_SETUP_CATALOG_DIR=str(tmp_path / "laptop" / "catalog"),
        )
        write_catalog_entry(
            Path(laptop["MCP_SETUP_CATALOG_DIR"]),
            name,
            "The stub as an npm package.",
            {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": package},
        )

        async def go() -> None:
            settings = Settings(
                home=laptop["MCP_SETUP_HOME"], registries="local", catalog_dir=laptop["MCP_SETUP_CATALOG_DIR"]
            )
            runtime = build_runtime(settings, keyring_backend=fail.Keyring(), host_env=laptop)  # a cold npm cache
            try:
                with anyio.fail_after(scaled(120)):
                    ref = runtime.refs.mint("STUB_API_KEY", canary)
                    request = InstallRequest(qualified_name=name, env_refs={"STUB_API_KEY": ref})
                    result = await runtime.service.install_and_connect(request, CallContext(installed_by="cli"))
                assert result["status"] == "connected", result
            finally:
                await runtime.aclose()

        anyio.run(go)
        lock, doc, _ = export(laptop, tmp_path)
        integrity = doc["servers"][0]["artifact"]
        assert integrity["kind"] == "npm integrity" and integrity["digest"].startswith("sha512-")
        assert integrity["digest"] == published_integrity(registry.url, package)

        desk = face_env(
            tmp_path / "desk", MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=laptop["MCP_SETUP_CATALOG_DIR"]
        )
        code, out = apply(desk, lock, (rf"STUB_API_KEY for {name} \(hidden\): ", canary))  # npx on a cold cache
        assert code == 0, out
        assert f"✓ {name} 1.0.0 installed, connected (2 tools) as npm-stub" in out, out

    with serve_npm_package(package, "1.0.0", scripts={"postinstall": "echo changed"}) as republished:
        fresh = face_env(
            tmp_path / "fresh", MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(tmp_path / "fresh" / "catalog")
        )
        write_catalog_entry(
            Path(fresh["MCP_SETUP_CATALOG_DIR"]),
            name,
            "The stub as an npm package.",
            {"registryType": "npm", "registryBaseUrl": republished.url, "identifier": package},
        )
        done = run(fresh, "apply", str(lock))
        found = published_integrity(republished.url, package)
        assert republished.tarball_requests == []  # refused before anything was fetched
    assert done.returncode == 1, done.stderr
    assert (
        f"{name} 1.0.0: the artifact differs from the lock file: expected npm integrity {integrity['digest']}, "
        f"found {found} in the registry local. Nothing of it was run."
    ) in done.stderr
    assert installed(fresh) == [] and canary not in done.stdout + done.stderr + lock.read_text() + out


def published_integrity(url: str, package: str) -> str:
    """What the npm registry at ``url`` publishes as the integrity of ``package`` 1.0.0."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/{package}", timeout=scaled(10)) as response:  # noqa: S310 - loopback
        return json.loads(response.read())["versions"]["1.0.0"]["dist"]["integrity"]
