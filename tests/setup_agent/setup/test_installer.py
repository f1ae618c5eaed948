"""What the installer tells the agent when nobody was asked: a file of the person's home that an
entry's command line names stays unbound with consent off, and the result says how to grant it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from app.settings import Settings
from setup_agent.setup.service import CallContext
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import stub_catalog

pytestmark = pytest.mark.anyio

STUB = "io.github.mcp-setup/stub"


async def test_with_consent_off_a_home_file_an_entry_names_is_kept_and_the_result_says_how_to_grant_it(
    tmp_path: Path, canary: str, new_runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the person's home the sandbox keeps
    (home / "notes.txt").write_text("my notes\n")
    (home / ".git-credentials").write_text(f"https://me:{canary}@github.com\n")
    catalog = stub_catalog(tmp_path, canary, extra_args=["${HOME}/notes.txt", "${HOME}/.git-credentials"])
    settings = Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, consent="never-ask")
    runtime = new_runtime(settings)
    if runtime.prober.sandbox is None or runtime.prober.sandbox.mechanism == "none":
        pytest.skip("no sandbox on this machine: nothing is kept from a server")
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
    with anyio.fail_after(scaled(120)):
        tested = await runtime.service.call("mcp_setup_test_connection", args, CallContext(installed_by="agent"))
        installed = await runtime.service.call("mcp_setup_install_and_connect", args, CallContext(installed_by="agent"))
    notes = str(home / "notes.txt")
    for result in (tested, installed):
        assert result.get("ok", True) is not False, result
        kept = result["home_files_kept"]
        assert kept["files"] == [notes]  # a credential file is never offered to grant: not named here either
        assert "MCP_SETUP_CONSENT=ask" in kept["message"] and "ticks them in the consent" in kept["message"]
        assert canary not in str(result)
    (server,) = runtime.store.servers.list()
    assert server.launch_spec.get("sandbox_reads", []) == []  # nothing was bound for it
    await runtime.aclose()


async def test_with_consent_off_an_entry_naming_no_home_file_gets_no_note(
    tmp_path: Path, canary: str, new_runtime
) -> None:
    catalog = stub_catalog(tmp_path, canary, extra_args=["/opt/tool.js"])
    settings = Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, consent="never-ask")
    runtime = new_runtime(settings)
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
    with anyio.fail_after(scaled(120)):
        tested = await runtime.service.call("mcp_setup_test_connection", args, CallContext(installed_by="agent"))
    assert tested.get("ok", True) is not False and "home_files_kept" not in tested, tested
    await runtime.aclose()
