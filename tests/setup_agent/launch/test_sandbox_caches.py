"""No server can change what another runs (setup_agent/launch/sandbox.py, ``_cache_views``).

A hostile "runner" (tests/stub_server/cache_hostile.py, started as ``npx`` or ``uvx`` so that the
sandbox shows it that runner's caches) tries to rewrite a cached package file through its own
view, in the shared cache itself and through another server's view of it, and plants links in
its own folder for the host to follow when it prepares the next start. Real bubblewrap and
Landlock, real processes; every attempt fails sandboxed and succeeds with ``MCP_SETUP_SANDBOX=off``, so the
tests can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from setup_agent.launch import LaunchSpec, Sandbox, local_command, materialize
from setup_agent.launch.fetch import npx_entry_name
from setup_agent.launch.sandbox import Profile
from tests.helpers.timeouts import scaled
from tests.stub_server import cache_hostile

pytestmark = pytest.mark.anyio

TARGET = "pkg@1.0.0"
ORIGINAL = "what the download phase fetched\n"


def shared_file(user: Path, runner: str) -> Path:
    """A file of a cached package in the user's runner cache, as the download phase left it."""
    if runner == "npx":
        return user / ".npm" / "_npx" / npx_entry_name(TARGET) / "node_modules" / "pkg" / "index.js"
    return user / ".cache" / "uv" / "archive-v0" / "abc123" / "pkg" / "__init__.py"


def view_file(work: Path, runner: str) -> Path:
    """The same file as a server (its folder ``work``) sees it in its own view of the cache."""
    if runner == "npx":
        return work / "home" / ".npm" / "_npx" / npx_entry_name(TARGET) / "node_modules" / "pkg" / "index.js"
    return work / "home" / ".cache" / "uv" / "archive-v0" / "abc123" / "pkg" / "__init__.py"


def plant_at(work: Path, runner: str) -> list[Path]:
    """Where a server plants links in its own folder for the host to follow (the deepest first)."""
    if runner == "npx":
        return [work / "home" / ".npm" / "_npx" / npx_entry_name(TARGET), work / "home" / ".npm" / "_npx"]
    return [work / "home" / ".cache" / "uv" / "archive-v0", work / "home" / ".cache" / "uv"]


def prepare(tmp_path: Path, runner: str, work: Path) -> None:
    """Prepare a sandboxed start of a server in ``work``, as the host does before each start."""
    box = Sandbox(
        "bwrap", hide=(tmp_path / "data",), user_home=tmp_path / "user", host_env={"HOME": str(tmp_path / "user")}
    )  # type: ignore[arg-type]
    if box.mechanism != "bwrap":
        pytest.skip(box.why)
    box.wrap(str(tmp_path / "bin" / runner), [TARGET], {"PATH": "/usr/bin:/bin"}, Profile(work))


@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
@pytest.mark.parametrize("runner", ["npx", "uvx"])
async def test_a_server_can_change_no_cached_package_another_server_runs_nor_have_the_host_follow_its_links(
    tmp_path: Path, runner: str, mode: str
) -> None:
    user = tmp_path / "user"
    cached = shared_file(user, runner)
    cached.parent.mkdir(parents=True)
    cached.write_text(ORIGINAL)
    (user / ".cache" / "uv" / "environments-v2" / "pkg-abc").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(cache_hostile.__file__, bin_dir / runner)
    (bin_dir / runner).chmod(0o755)
    servers = tmp_path / "data" / "servers"
    hostile, other = servers / "srv_hostile", servers / "srv_other"
    for work in (hostile, other):  # both started sandboxed before: their views of the cache exist
        work.mkdir(parents=True)
        prepare(tmp_path, runner, work)
    assert view_file(other, runner).read_text() == ORIGINAL  # another server's view: the shared file
    outside = tmp_path / "outside"
    outside.mkdir()
    writes = [str(view_file(hostile, runner)), str(cached), str(view_file(other, runner))]
    plan = {
        "writes": writes,
        "plants": {str(p): str(outside) for p in plant_at(hostile, runner)},
        "outside": str(outside),
    }

    box = Sandbox(mode, hide=(tmp_path / "data",), user_home=user, host_env={"HOME": str(user)})  # type: ignore[arg-type]
    spec = LaunchSpec(command=str(bin_dir / runner), args=[TARGET, json.dumps(plan)])
    resolved = materialize(spec, {}, cwd=str(hostile))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(user)}
    async with local_command(resolved, sandbox=box, host_env=env) as command:
        process = await command.spawn()
        assert process.stdout is not None and process.stderr is not None
        with anyio.fail_after(scaled(30)):
            line = await process.stdout.receive()
            await process.aclose()  # waits for it, and closes its pipes with this event loop
    report = json.loads(line)

    sandboxed = mode != "off"
    assert all(got.startswith("failed") is sandboxed for got in report["writes"].values()), report
    assert (cached.read_text() == ORIGINAL) is sandboxed  # what every server of this package runs
    assert (view_file(other, runner).read_text() == ORIGINAL) is sandboxed
    if sandboxed:
        assert all(got == "ok" for got in report["plants"].values()), report  # its own folder: it may
        prepare(tmp_path, runner, hostile)  # the host prepares its next start
        deep, top = plant_at(hostile, runner)
        assert top.is_dir() and not top.is_symlink(), top
        assert deep.is_dir() and not deep.resolve().is_relative_to(outside.resolve()), deep
        assert view_file(hostile, runner).read_text() == ORIGINAL  # its view is the cache's again
    assert (list(outside.iterdir()) == []) is sandboxed, report  # nothing written there, by it or by the host


def test_a_uvx_server_gets_a_private_uv_cache_with_the_shared_packages_read_only(tmp_path: Path) -> None:
    """uv locks and revalidates in its cache: a private one of its own, where only the unpacked
    wheels and tool environments are links to the shared cache (shown read-only)."""
    user = tmp_path / "user"
    shared = user / ".cache" / "uv"
    for bucket in ("archive-v0", "environments-v2", "simple-v28", "interpreter-v5", "wheels-v8"):
        (shared / bucket).mkdir(parents=True)
    (shared / ".lock").write_text("")
    work = tmp_path / "server"
    work.mkdir()
    box = Sandbox("bwrap", hide=(tmp_path / "data",), user_home=user, host_env={"HOME": str(user)})  # type: ignore[arg-type]
    if box.mechanism != "bwrap":
        pytest.skip(box.why)
    uvx = shutil.which("uvx") or str(Path(sys.executable).with_name("uvx"))
    _command, args, env = box.wrap(uvx, ["some-server"], {"PATH": "/usr/bin:/bin"}, Profile(work))
    private = work / "home" / ".cache" / "uv"
    assert env["UV_CACHE_DIR"] == str(private)
    assert sorted(p.name for p in private.iterdir()) == ["archive-v0", "environments-v2"]
    assert all(p.is_symlink() and p.resolve() == (shared / p.name).resolve() for p in private.iterdir())
    for bucket in ("archive-v0", "environments-v2"):
        at = args.index(str(shared / bucket))
        assert args[at - 1] == "--ro-bind-try", args[at - 1 : at + 2]
    assert str(shared) not in args  # the rest of the shared cache (its lock, its index answers) is not shown
    assert os.path.isdir(private)
