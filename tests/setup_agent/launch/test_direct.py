"""A server starts from what its runner installed, with no runner left beside it
(setup_agent/launch/direct.py).

Real ``npx`` and ``uvx`` against one-package registries on loopback (tests/fakes), a private
HOME (cold caches of their own), the normal flow (test → install → a call through the gateway),
sandboxed as this machine allows (bubblewrap or Landlock; skipped where neither works). What
runs is read from /proc: the server's process and every parent of it up to this test.
A cache entry pruned since the download is fetched again before the start; with no download
phase (``mcp-setup run``) the runner starts it instead (tests/e2e/test_direct_starts.py).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.launch import DirectStarts, LaunchSpec, Sandbox, local_command, materialize
from setup_agent.launch.fetch import npx_entry_name
from setup_agent.secrets import SecretValue
from tests.fakes.npm_registry import serve_npm_package
from tests.fakes.pypi_index import serve_pypi_package, stub_wheel
from tests.helpers import package_flow
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.processes import command_line, descendants, runner_processes, runners_above
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NPM_NAME, NPM_PACKAGE = "io.test/npm-direct", "mcp-setup-npm-direct"
PYPI_NAME, PYPI_PACKAGE = "io.test/pypi-direct", "mcp-setup-pypi-direct"

needs_npx = pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None, reason="needs Node's npx")


needs_uv = pytest.mark.skipif(package_flow.uv_bin() is None, reason="needs the uv wheel (pip install -e '.[test]')")


def make_runtime(
    new_runtime, tmp_path: Path, name: str, package: dict[str, Any], memory_keyring, mode: str = "auto"
) -> Runtime:
    write_catalog_entry(tmp_path / "catalog", name, "The stub server as a package, from a registry here.", package)
    env = package_flow.runner_host_env(tmp_path)
    runtime = new_runtime(
        Settings(
            home=tmp_path / "data",
            registries="local",
            catalog_dir=tmp_path / "catalog",
            probe_timeout_seconds=scaled(30),
            adopt_tested_servers=False,  # the gateway starts the installed server itself
            consent="never-ask",
            sandbox=mode,  # type: ignore[arg-type]
        ),
        keyring_backend=memory_keyring,
        host_env=env,
        which=lambda command: shutil.which(command, path=env["PATH"]),
    )
    box = runtime.prober.sandbox
    assert box is not None
    if box.mechanism == "none" or (mode != "auto" and box.mechanism != mode):
        pytest.skip(f"{mode} does not run here: {box.why}")
    return runtime


async def echo(runtime: Runtime, tool: str, text: str) -> None:
    await runtime.gateway.refresh(force=True)
    with anyio.fail_after(scaled(120)):
        answer = await runtime.gateway.call(tool, {"text": text})
    assert answer["content"] == [{"type": "text", "text": text}], answer


def server_processes(runtime: Runtime, server_id: str, marker: str) -> list[int]:
    """The live server's processes whose command line names ``marker`` (its script, its package)."""
    spawned = runtime.connections.pid(server_id)
    assert spawned is not None, "the server is not running"
    found = [p for p in [spawned, *descendants(spawned)] if any(marker in part for part in command_line(p))]
    assert found, [command_line(p) for p in [spawned, *descendants(spawned)]]
    return found


@needs_npx
@pytest.mark.parametrize("mode", ["auto", "landlock"])
async def test_an_installed_npm_server_runs_on_node_with_no_npm_exec_above_it_and_answers_through_the_gateway(
    new_runtime, tmp_path: Path, memory_keyring, canary: str, mode: str
) -> None:
    with serve_npm_package(NPM_PACKAGE, "1.0.0") as registry:
        package = {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": NPM_PACKAGE}
        runtime = make_runtime(new_runtime, tmp_path, NPM_NAME, package, memory_keyring, mode)
        server_id = await package_flow.install(runtime, NPM_NAME, canary, timeout=scaled(180))
        await echo(runtime, "npm-direct__echo", "no wrapper")
        servers = server_processes(runtime, server_id, f"{NPM_PACKAGE}/")
        assert runners_above(servers) == [] and runner_processes(servers) == []
        node = [p for p in servers if command_line(p)[1:2] and command_line(p)[1].endswith("/bin.js")]
        assert node, [command_line(p) for p in servers]  # node on the package's bin, its link resolved
        entry = tmp_path / "home" / ".npm" / "_npx" / npx_entry_name(f"{NPM_PACKAGE}@1.0.0")
        assert command_line(node[0])[1] == str(entry / "node_modules" / NPM_PACKAGE / "bin.js")
        assert len(registry.tarball_requests) == 1  # what the download phase fetched is what runs
        env = dict(v.split("=", 1) for v in Path(f"/proc/{node[0]}/environ").read_text().split("\0") if "=" in v)
        assert env["PATH"].split(os.pathsep)[0] == str(entry / "node_modules" / ".bin")  # as npx gives it
        assert env["STUB_API_KEY"] == canary and env["npm_config_registry"] == registry.url
        assert not {"npm_lifecycle_event", "npm_execpath", "npm_command", "INIT_CWD"} & set(env)  # npm exec's own
        notes = tmp_path / "data" / "cache" / "starts"
        assert list(notes.iterdir()) and not any(canary in f.read_text() for f in notes.iterdir())


@needs_uv
@pytest.mark.parametrize("mode", ["auto", "landlock"])
async def test_an_installed_pypi_server_runs_its_own_entry_point_with_no_uvx_above_it_and_answers_through_the_gateway(
    new_runtime, tmp_path: Path, memory_keyring, canary: str, mode: str
) -> None:
    with serve_pypi_package(PYPI_PACKAGE, stub_wheel(PYPI_PACKAGE, "1.0.0")) as index:
        package = {"registryType": "pypi", "registryBaseUrl": index.url, "identifier": PYPI_PACKAGE}
        runtime = make_runtime(new_runtime, tmp_path, PYPI_NAME, package, memory_keyring, mode)
        server_id = await package_flow.install(runtime, PYPI_NAME, canary, timeout=scaled(180))
        await echo(runtime, "pypi-direct__echo", "no wrapper")
        servers = server_processes(runtime, server_id, f"/bin/{PYPI_PACKAGE}")
        assert runners_above(servers) == [] and runner_processes(servers) == []
        cache = tmp_path / "home" / ".cache" / "uv"
        script = next(part for part in command_line(servers[0]) if part.endswith(f"/bin/{PYPI_PACKAGE}"))
        assert Path(script).parent.parent.parent.parent == cache  # <cache>/archive-v*/<env>/bin/<command>


@needs_npx
async def test_an_npm_server_whose_cache_entry_was_pruned_is_fetched_again_and_started_from_it_without_npx(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    with serve_npm_package(NPM_PACKAGE, "1.0.0") as registry:
        package = {"registryType": "npm", "registryBaseUrl": registry.url, "identifier": NPM_PACKAGE}
        runtime = make_runtime(new_runtime, tmp_path, NPM_NAME, package, memory_keyring)
        server_id = await package_flow.install(runtime, NPM_NAME, canary, timeout=scaled(180))
        await runtime.connections.disconnect(server_id)
        # Pruned meanwhile (``npx`` clears old entries): this process fetched it once already.
        entry = tmp_path / "home" / ".npm" / "_npx" / npx_entry_name(f"{NPM_PACKAGE}@1.0.0")
        shutil.rmtree(entry)
        await echo(runtime, "npm-direct__echo", "after the prune")
        servers = server_processes(runtime, server_id, f"{NPM_PACKAGE}/")
        assert runners_above(servers) == [] and (entry / "node_modules" / NPM_PACKAGE / "bin.js").is_file()


def test_npx_picks_the_only_bin_or_the_one_named_like_the_package_and_the_start_keeps_npx_otherwise(
    tmp_path: Path,
) -> None:
    from setup_agent.launch.direct import _npx_bin

    assert _npx_bin({"name": "@scope/tool", "bin": "cli.js"}) == "tool"
    assert _npx_bin({"name": "@scope/tool", "bin": {"a": "cli.js", "b": "./cli.js"}}) == "a"
    assert _npx_bin({"name": "@scope/tool", "bin": {"other": "x.js", "tool": "cli.js"}}) == "tool"
    assert _npx_bin({"name": "tool", "bin": {"a": "x.js", "b": "y.js"}}) is None  # npx cannot tell either
    assert _npx_bin({"name": "tool"}) is None


def npx_entry(cache: Path, spec: str, bins: dict[str, str], files: dict[str, str]) -> Path:
    """An npx cache entry as ``npm exec`` leaves it: the package, its ``.bin`` links."""
    name = spec.rsplit("@", 1)[0]
    entry = cache / "_npx" / npx_entry_name(spec)
    package = entry / "node_modules" / name
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": name, "version": "1.0.0", "bin": bins}))
    for file, text in files.items():
        (package / file).write_text(text)
        (package / file).chmod(0o755)
    (entry / "node_modules" / ".bin").mkdir()
    for command, file in bins.items():
        (entry / "node_modules" / ".bin" / command).symlink_to(f"../{name}/{file}")
    return entry


@pytest.mark.parametrize(
    ("args", "bins", "files", "direct"),
    [
        (["-y", "pkg@1.0.0", "--flag"], {"pkg": "cli.js"}, {"cli.js": "#!/usr/bin/env node\n"}, True),
        (["-y", "pkg@1.0.0"], {"pkg": "cli.sh"}, {"cli.sh": "#!/bin/sh\nexec node x\n"}, False),  # no Node script
        (["-y", "pkg@1.0.0"], {"pkg": "cli.js"}, {"cli.js": "#!/usr/bin/env -S node --inspect\n"}, False),
        (["-y", "--package=x", "pkg@1.0.0"], {"pkg": "cli.js"}, {"cli.js": "#!/usr/bin/env node\n"}, False),
    ],
    ids=["node-script", "shell-script", "node-options", "npx-option"],
)
def test_a_start_runs_node_on_the_bin_only_when_npx_would_run_a_plain_node_script(
    tmp_path: Path, args: list[str], bins: dict[str, str], files: dict[str, str], direct: bool
) -> None:
    cache = tmp_path / "user" / ".npm"
    entry = npx_entry(cache, "pkg@1.0.0", bins, files)
    notes = DirectStarts(tmp_path / "data" / "starts")
    spec = LaunchSpec(command="npx", args=args, package_type="npm", identifier="pkg", runner="npx")
    from setup_agent.launch.fetch import fetch_plan

    plan = fetch_plan(spec)
    assert plan is not None
    notes.note(plan.key, entry)
    box = Sandbox("off", host_env={"HOME": str(tmp_path / "user")})
    resolved = materialize(spec, {}, cwd=str(tmp_path / "work"))
    command = local_command(resolved, sandbox=box, host_env={"PATH": os.environ["PATH"]}, direct=notes)
    assert (Path(command.command).name == "node") is direct, command
    if direct:
        script = entry / "node_modules" / "pkg" / "cli.js"
        assert command.args == [str(script), "--flag"]
        assert command.env["PATH"].split(os.pathsep)[0] == str(entry / "node_modules" / ".bin")
        shutil.rmtree(entry)  # gone by the next start: the runner starts it, the start does not fail
        again = local_command(resolved, sandbox=box, host_env={"PATH": os.environ["PATH"]}, direct=notes)
        assert Path(again.command).name in ("npx", "npx-cli.js") and again.args == args


def test_a_prefix_a_package_printed_outside_uvs_cache_is_never_started(tmp_path: Path) -> None:
    """The download phase reads the prefix from output a package's own code could write to."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "bin").mkdir(parents=True)
    (elsewhere / "bin" / "srv").write_text("#!/bin/sh\n")
    (elsewhere / "bin" / "srv").chmod(0o755)
    (elsewhere / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    notes = DirectStarts(tmp_path / "starts")
    spec = LaunchSpec(command="uvx", args=["srv==1.0"], package_type="pypi", identifier="srv", runner="uvx")
    from setup_agent.launch.fetch import fetch_plan

    notes.note(fetch_plan(spec).key, elsewhere)  # type: ignore[union-attr]
    box = Sandbox("off", host_env={"HOME": str(tmp_path / "user")})
    command = local_command(materialize(spec, {}, cwd=str(tmp_path)), sandbox=box, host_env=os.environ, direct=notes)
    assert Path(command.command).name == "uvx"


def test_a_secret_on_the_command_line_reaches_no_log_no_note_and_no_repr_whether_it_starts_directly_or_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, canary: str
) -> None:
    caplog.set_level(logging.DEBUG)
    entry = npx_entry(tmp_path / "user" / ".npm", "pkg@1.0.0", {"pkg": "cli.js"}, {"cli.js": "#!/usr/bin/env node\n"})
    notes = DirectStarts(tmp_path / "data" / "starts")
    box = Sandbox("off", host_env={"HOME": str(tmp_path / "user")})
    shown: list[str] = []
    for args in (
        ["-y", "pkg@1.0.0", "--key", "${KEY}"],
        ["-y", "--key=${KEY}", "pkg@1.0.0"],
        ["-y", "-k${KEY}", "pkg@1.0.0"],
    ):
        spec = LaunchSpec(
            command="npx", args=args, package_type="npm", identifier="pkg", runner="npx", env={"K": "${KEY}"}
        )
        from setup_agent.launch.fetch import fetch_plan

        notes.note(fetch_plan(spec).key, entry)  # type: ignore[union-attr]
        resolved = materialize(spec, {"KEY": SecretValue(canary)}, cwd=str(tmp_path / "work"))
        command = local_command(resolved, sandbox=box, host_env={"PATH": os.environ["PATH"]}, direct=notes)
        assert canary in command.env["K"] and canary in " ".join(command.args)  # it does reach the server
        shown += [repr(command), repr(resolved)]
    assert canary not in caplog.text and "through its runner" in caplog.text  # two kept npx, and said why
    assert not any(canary in f.read_text() for f in (tmp_path / "data" / "starts").iterdir())
    assert not any(canary in text for text in shown)


def uv_environment(cache: Path, commands: tuple[str, ...]) -> Path:
    """An environment as uv leaves it in its cache: ``archive-v0/<id>`` with ``bin`` and ``pyvenv.cfg``."""
    prefix = cache / "archive-v0" / "Re8UpAaM"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    for command in commands:
        (prefix / "bin" / command).write_text("#!/bin/sh\n")
        (prefix / "bin" / command).chmod(0o755)
    return prefix


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        (["--default-index", "http://i.example/simple", "srv==1.0", "--port", "1"], ["bin/srv", "--port", "1"]),
        (["--from", "srv[extra]==1.0", "python", "-m", "srv.main"], ["bin/python", "-m", "srv.main"]),
        (["--with", "mcp<2", "--native-tls", "srv==1.0"], ["bin/srv"]),
        (["--isolated", "srv==1.0"], None),  # an option it does not read: uvx runs it
        (["--from", "srv==1.0", "other"], None),  # no such command in the environment: uvx says so
    ],
    ids=["index", "module", "with", "unknown-option", "no-command"],
)
def test_a_pypi_start_runs_the_command_uvx_would_run_from_the_environment_the_download_made(
    tmp_path: Path, args: list[str], runs: list[str] | None
) -> None:
    from setup_agent.launch.fetch import fetch_plan

    prefix = uv_environment(tmp_path / "user" / ".cache" / "uv", ("srv", "python"))
    notes = DirectStarts(tmp_path / "starts")
    spec = LaunchSpec(command="uvx", args=args, package_type="pypi", identifier="srv", runner="uvx")
    plan = fetch_plan(spec)
    if plan is not None:
        notes.note(plan.key, prefix)
    box = Sandbox("off", host_env={"HOME": str(tmp_path / "user")})
    host = {"PATH": os.environ["PATH"]}
    command = local_command(materialize(spec, {}, cwd=str(tmp_path)), sandbox=box, host_env=host, direct=notes)
    if runs is None:
        assert Path(command.command).name == "uvx"
    else:
        assert [command.command, *command.args] == [str(prefix / runs[0]), *runs[1:]]
        assert command.env["PATH"].split(os.pathsep)[0] == str(prefix / "bin")  # as uvx gives it


#: A package's command that tries to change its own file in the shared npx entry (what another
#: server of the same package would run next).
REWRITES_ITSELF = """#!/usr/bin/env node
try { require("fs").appendFileSync(__filename, "// planted\\n"); console.log("wrote"); }
catch (e) { console.log("refused " + e.code); }
"""


@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
async def test_a_server_started_without_npx_cannot_change_the_cached_package_it_runs_from_sandboxed(
    tmp_path: Path, mode: str
) -> None:
    user = tmp_path / "user"
    entry = npx_entry(user / ".npm", "pkg@1.0.0", {"pkg": "cli.js"}, {"cli.js": REWRITES_ITSELF})
    notes = DirectStarts(tmp_path / "data" / "starts")
    spec = LaunchSpec(command="npx", args=["-y", "pkg@1.0.0"], package_type="npm", runner="npx", sandbox_network=False)
    from setup_agent.launch.fetch import fetch_plan

    notes.note(fetch_plan(spec).key, entry)  # type: ignore[union-attr]
    box = Sandbox(mode, hide=(tmp_path / "data",), user_home=user, host_env={"HOME": str(user)})  # type: ignore[arg-type]
    if mode != "off" and box.mechanism != mode:
        pytest.skip(f"{mode} does not run here: {box.why}")
    (tmp_path / "work").mkdir()
    resolved = materialize(spec, {}, cwd=str(tmp_path / "work"))
    command = local_command(resolved, sandbox=box, host_env={"PATH": os.environ["PATH"]}, direct=notes)
    script = entry / "node_modules" / "pkg" / "cli.js"
    assert str(script) in [command.command, *command.args]  # node on the cached file, no npx
    async with command:
        process = await command.spawn()
        assert process.stdout is not None
        with anyio.fail_after(scaled(30)):
            said = b"".join([chunk async for chunk in process.stdout]).decode()
            await process.wait()
    assert said.startswith("wrote" if mode == "off" else "refused"), said
    assert (script.read_text() != REWRITES_ITSELF) is (mode == "off")
