"""Issue 11 item 3: a local package that serves HTTP is started, its port awaited, connected
to, and stopped together with the connection (real subprocess, real port)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.redact import Redactor
from setup_agent.setup.probe import Prober
from tests.helpers.paths import REPO
from tests.helpers.processes import no_process_left
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

ROOT = str(REPO)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_package_spec(marker: str, *extra: str) -> LaunchSpec:
    port = free_port()
    return LaunchSpec(
        transport="streamable-http",
        command=sys.executable,
        runner=sys.executable,
        package_type="pypi",
        args=["-m", "tests.stub_server.http_server", "--port", str(port), *extra, "--header", marker],
        env={"PYTHONPATH": ROOT},
        url=f"http://127.0.0.1:{port}/mcp",
    )


async def test_an_http_serving_package_is_started_connected_and_stopped_with_the_probe(tmp_path: Path) -> None:
    marker = f"X-Marker-{free_port()}"  # a header name nobody else runs with: finds the process
    prober = Prober(Redactor(), scratch_root=tmp_path, timeout=scaled(30))
    result = await prober.probe(http_package_spec(marker), {})
    assert {t["name"] for t in result.tools} >= {"echo"}
    await prober.drain()
    assert no_process_left(marker), "the package's process outlived its connection"


async def test_an_http_serving_package_that_exits_before_its_port_opens_is_reported_exited(tmp_path: Path) -> None:
    spec = http_package_spec("x").model_copy(update={"args": ["-c", "import sys; sys.exit(3)"]})
    prober = Prober(Redactor(), scratch_root=tmp_path, timeout=scaled(30))
    with pytest.raises(Exception) as info:
        await prober.probe(spec, {})
    assert getattr(info.value, "code", None) == "exited"
    await prober.drain()
