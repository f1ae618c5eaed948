"""OCI images pulled while the user types (#17 item 2), through a stand-in ``docker`` CLI.

This machine has the docker client but no daemon (and no registry to pull from), so the
outermost edge is replaced: a ``docker`` script on the runtime's PATH that records every
command line, answers ``pull`` with docker's own progress lines, and runs ``run -i --rm -e KEY
IMAGE`` as our stdlib stub MCP server with the environment docker would pass into the
container. Everything between the agent's call and that command line is the real product.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from app.settings import Settings
from tests.helpers import package_flow
from tests.helpers.package_flow import write_catalog_entry
from tests.helpers.paths import STUB_DIR
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

NAME = "io.test/oci-stub"
IMAGE = "ghcr.io/mcp-setup-test/stub"
STUB = STUB_DIR / "server.py"

FAKE_DOCKER = """#!{python}
import os, sys
log, fail = {log!r}, {fail!r}
with open(log, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["pull"]:
    if os.path.exists(fail):
        print("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.", file=sys.stderr)
        sys.exit(1)
    for layer in ("4f4fb700ef54", "a2abf6c4d29d"):
        print(layer + ": Pull complete", flush=True)
    sys.exit(0)
if sys.argv[1:2] == ["run"]:
    os.execv(sys.executable, [sys.executable, {stub!r}])
sys.exit(2)
"""


class Docker:
    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.log = tmp_path / "docker.log"
        self.fail = tmp_path / "docker-daemon-down"
        script = self.bin / "docker"
        script.write_text(
            FAKE_DOCKER.format(python=sys.executable, log=str(self.log), fail=str(self.fail), stub=str(STUB))
        )
        script.chmod(0o755)

    def commands(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def make_runtime(new_runtime, tmp_path: Path, docker: Docker, memory_keyring) -> Runtime:
    catalog = tmp_path / "catalog"
    write_catalog_entry(catalog, NAME, "The stub server as an OCI image.", {"registryType": "oci", "identifier": IMAGE})
    path = f"{docker.bin}{os.pathsep}{os.environ['PATH']}"
    return new_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, adopt_tested_servers=False),
        keyring_backend=memory_keyring,
        host_env={"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8"},
        which=lambda name: shutil.which(name, path=path),
    )


async def open_prompt_and_settle(runtime: Runtime) -> dict[str, Any]:
    return await package_flow.open_prompt(runtime, NAME, settle_seconds=60)


async def run_test(runtime: Runtime, ref: str, events: list[dict[str, Any]]) -> dict:
    return await package_flow.run_test(runtime, NAME, ref, events, timeout=scaled(60))


async def test_an_image_is_pulled_while_the_prompt_is_open_and_the_test_does_not_pull_it_again(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    docker = Docker(tmp_path)
    runtime = make_runtime(new_runtime, tmp_path, docker, memory_keyring)
    try:
        opened = await open_prompt_and_settle(runtime)
        assert docker.commands() == [f"pull {IMAGE}:1.0.0"]  # before any answer or consent: a pull runs nothing
        runtime.broker.answer(opened["prompt_id"], canary)
        events: list[dict[str, Any]] = []
        result = await run_test(runtime, opened["ref"], events)
        assert result["ok"] is True, result
        assert "downloading" not in [e["stage"] for e in events]  # the warm image
        pulls = [c for c in docker.commands() if c.startswith("pull")]
        runs = [c for c in docker.commands() if c.startswith("run")]
        assert pulls == [f"pull {IMAGE}:1.0.0"] and len(runs) == 1
        assert runs[0] == f"run -i --rm -e STUB_API_KEY {IMAGE}:1.0.0"  # the key travels in the environment
        assert canary not in docker.log.read_text() and canary not in json.dumps([result, events])
    finally:
        await runtime.aclose()


async def test_a_failed_pull_while_the_user_types_changes_nothing(
    new_runtime, tmp_path: Path, memory_keyring, canary: str
) -> None:
    docker = Docker(tmp_path)
    docker.fail.touch()  # no daemon while the user types
    runtime = make_runtime(new_runtime, tmp_path, docker, memory_keyring)
    try:
        opened = await open_prompt_and_settle(runtime)
        assert docker.commands() == [f"pull {IMAGE}:1.0.0"]
        docker.fail.unlink()  # it is back by the time the user answered
        runtime.broker.answer(opened["prompt_id"], canary)
        events: list[dict[str, Any]] = []
        result = await run_test(runtime, opened["ref"], events)
        assert result["ok"] is True, result  # the failed prefetch is not reported
        downloading = [e for e in events if e["stage"] == "downloading"]
        assert downloading and downloading[-1]["status"] == "done" and downloading[-1]["fetched"] == 2  # two layers
        assert [c for c in docker.commands() if c.startswith("pull")] == [f"pull {IMAGE}:1.0.0"] * 2
    finally:
        await runtime.aclose()
