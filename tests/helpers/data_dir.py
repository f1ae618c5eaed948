"""A real data dir with stub servers installed, and the CLI run against it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.main import main
from setup_agent.launch.spec import LaunchSpec
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.helpers.mcp_face import face_env
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, sha256_hex

STUB = "io.github.acme/stub-search"


OTHER = "io.github.acme/other"


def stub_spec(expected: str, mode: str = "") -> dict:
    env = {"STUB_API_KEY": "${STUB_API_KEY}", "STUB_EXPECTED_SHA256": sha256_hex(expected), "STUB_MODE": mode}
    return LaunchSpec(command=sys.executable, args=[str(SERVER_PY)], env=env).model_dump(mode="json")


class DataDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "data"
        self.key = root / "team.key"
        self.catalog = root / "catalog"
        self.catalog.mkdir(parents=True, exist_ok=True)
        Vault.in_memory().export_key(self.key)

    def store(self) -> Store:
        return Store.for_data_dir(self.home, Vault.from_key_file(self.key), None)

    def install(self, name: str, value: str, expected: str | None = None, mode: str = "") -> str:
        with self.store() as store:
            return store.servers.install(
                qualified_name=name,
                source="local",
                version="1.0.0",
                package_type="stdio",
                launch_spec=stub_spec(expected or value, mode),
                installed_by="agent",
                tools_hash="x",
                env={"STUB_API_KEY": (value, True), "STUB_REGION": ("eu", False)},
                title="Stub Search",
                tools=[{"name": "echo", "description": "Echo text"}],
            ).server_id

    def install_tested(
        self, name: str, seen: list[str], granted: tuple[str, ...] = (), value: str = "value-1234567"
    ) -> str:
        """``name`` installed as an install after a test through the proxy stores it: its network
        policy the default (with ``granted``), and ``seen``, the destinations the test reached."""
        net = {"mode": "default", "granted": sorted(granted), "only": [], "seen": seen}
        with self.store() as store:
            return store.servers.install(
                qualified_name=name,
                source="local",
                version="1.0.0",
                package_type="stdio",
                launch_spec={**stub_spec(value), "sandbox_net": net},
                installed_by="agent",
                tools_hash="x",
                env={"STUB_API_KEY": (value, True)},
                title="Stub Search" if name == STUB else None,
            ).server_id  # no tools: its first list is its pin, with no review to answer

    def env(self, **extra: str) -> dict[str, str]:
        return face_env(
            self.root,
            MCP_SETUP_HOME=str(self.home),
            MCP_SETUP_DATA_KEY_FILE=str(self.key),
            MCP_SETUP_REGISTRIES="local",
            MCP_SETUP_CATALOG_DIR=str(self.catalog),
            **extra,
        )


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DataDir]:
    d = DataDir(tmp_path)
    monkeypatch.setenv("MCP_SETUP_HOME", str(d.home))
    monkeypatch.setenv("MCP_SETUP_DATA_KEY_FILE", str(d.key))
    monkeypatch.setenv("MCP_SETUP_REGISTRIES", "local")
    monkeypatch.setenv("MCP_SETUP_CATALOG_DIR", str(d.catalog))
    monkeypatch.setenv("MCP_SETUP_PROBE_TIMEOUT_SECONDS", str(scaled(20)))
    yield d


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
