"""An unreachable registry is said in one way everywhere: `mcp-setup doctor` and a search of
that one registry give the sentence `mcp-setup search` gives ("Could not reach the official
registry at …"), not the task group's wrapper; a Smithery without a key is listed as skipped."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from app.settings import Settings
from tests.helpers.data_dir import DataDir, cli, data  # noqa: F401 - the data fixture


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, never listening: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_doctor_says_an_unreachable_registry_as_search_does_and_lists_smithery_as_skipped(
    data: DataDir, capsys, monkeypatch, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("MCP_SETUP_REGISTRIES", "official,smithery,local")
    monkeypatch.setenv("MCP_SETUP_OFFICIAL_REGISTRY_URL", url)
    monkeypatch.delenv("MCP_SETUP_SMITHERY_API_KEY", raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    code, out, err = cli(capsys, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    official = checks["registry official"]
    assert code == 1 and not official["ok"]
    assert official["detail"] == f"Could not reach the official registry at {url} (ConnectError).", official
    assert "TaskGroup" not in out + err
    smithery = checks["registry smithery"]
    assert smithery["ok"] and smithery["detail"].startswith("skipped, no API key")
    _, search_out, search_err = cli(capsys, "search", "weather")
    assert official["detail"] in search_err + search_out  # the same words


@pytest.mark.anyio
async def test_searching_only_an_unreachable_registry_is_a_registry_error_not_an_internal_one(
    new_runtime, tmp_path, memory_keyring, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    runtime = new_runtime(
        Settings(home=tmp_path / "data", registries="official", official_registry_url=url),
        keyring_backend=memory_keyring,
    )
    try:
        result = await runtime.service.call("mcp_setup_search", {"query": "weather", "source": "official"})
    finally:
        await runtime.aclose()
    assert result["ok"] is False
    assert result["error"]["code"] == "registry_unavailable"
    # a configured registry's name is said back (it is ours); any other text the agent gave is not
    assert result["error"]["message"] == f"Could not reach the official registry at {url} (ConnectError)."
    runtime = new_runtime(
        Settings(home=tmp_path / "data", registries="official", official_registry_url=url),
        keyring_backend=memory_keyring,
    )
    try:
        unknown = await runtime.service.call("mcp_setup_search", {"query": "weather", "source": "my-guess-1234"})
    finally:
        await runtime.aclose()
    assert unknown["ok"] is False and "my-guess-1234" not in unknown["error"]["message"]
