"""Issue 11 item 1: an MCPB bundle whose manifest maps the registry's env var from a
``user_config`` key asks for one secret once, and installs with it (core and ``mcp-setup mcp``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.helpers.mcp_face import Browser, Recorder, call, elicitation_answering, face_env, mcp_setup_client
from tests.helpers.processes import no_process_left
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import stub_catalog

pytestmark = pytest.mark.anyio

STUB = "io.github.mcp-setup/stub-mapped"


def mapped_catalog(root: Path, expected: str) -> Path:
    """A catalog entry listing STUB_API_KEY, whose bundle fills it from user_config.api_key."""
    return stub_catalog(root, expected, name=STUB, user_config_key="api_key")


async def test_one_prompt_one_ref_installs_a_bundle_whose_manifest_maps_the_variable(
    tmp_path: Path, canary: str
) -> None:
    catalog = mapped_catalog(tmp_path, canary)
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    recorder, browser = Recorder(), Browser()
    data_dir = Path(env["MCP_SETUP_HOME"])
    with anyio.fail_after(scaled(120)):
        async with mcp_setup_client(
            tmp_path,
            tmp_path / "stderr.log",
            recorder,
            elicitation_callback=elicitation_answering(browser, [canary]),
            env=env,
        ) as client:
            detail = await call(client, "mcp_setup_get", {"qualified_name": STUB})
            keys = detail["required_env_keys"]
            assert [(k["name"], k["secret"], k["required"], k.get("aliases")) for k in keys] == [
                ("STUB_API_KEY", True, True, ["api_key"])
            ]
            asked = await call(
                client,
                "mcp_setup_request_secret",
                {"key_name": "STUB_API_KEY", "prompt": "Your stub API key", "server": STUB},
            )
            installed = await call(
                client,
                "mcp_setup_install_and_connect",
                {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": asked["ref"]}},
            )
            assert installed["status"] == "connected", installed
            again = await call(client, "mcp_setup_get", {"qualified_name": STUB})
            assert (again["installed"], again["server_id"]) == (True, installed["server_id"])
    assert len(browser.pages) == 1  # one prompt
    assert canary not in recorder.text()
    assert no_process_left(str(data_dir))


async def test_a_value_given_under_the_manifest_name_satisfies_the_registry_name_too(
    new_runtime, tmp_path: Path, canary: str, memory_keyring
) -> None:
    from app.settings import Settings
    from setup_agent.setup.service import CallContext

    catalog = mapped_catalog(tmp_path, canary)
    runtime = new_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(20)),
        keyring_backend=memory_keyring,
    )
    try:
        pending = runtime.broker.open("api_key", "key?", STUB)
        runtime.broker.answer(pending.prompt_id, canary)
        tested = await runtime.service.call(
            "mcp_setup_test_connection", {"qualified_name": STUB, "env_refs": {"api_key": pending.ref}}, CallContext()
        )
        assert tested["ok"] is True, tested
        twice = await runtime.service.call(
            "mcp_setup_test_connection",
            {"qualified_name": STUB, "env_refs": {"api_key": pending.ref, "STUB_API_KEY": pending.ref}},
            CallContext(),
        )
        assert twice["error"]["code"] == "invalid_input" and "same setting" in twice["error"]["message"]
    finally:
        await runtime.aclose()


async def test_get_reads_the_chosen_remote_bundle_once_and_lists_its_own_keys(
    new_runtime, tmp_path: Path, memory_keyring
) -> None:
    """A bundle whose manifest asks for a key the registry does not list, on a remote-looking
    host: get downloads the option install would choose (once: cached) and lists that key, so
    install never demands a key get did not list (#11 item 1)."""
    import json

    from app.settings import Settings
    from tests.fakes.file_server import serve_file
    from tests.stub_server.bundle import build_stub_bundle, stub_server_json

    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value="x", user_config_key="api_key")
    hits: list[str] = []
    with serve_file(bundle, hits, host="::1") as url:
        doc = stub_server_json(url, sha, name=STUB)
        doc["packages"][0]["environmentVariables"] = []  # the registry names no key at all
        catalog = tmp_path / "catalog"
        catalog.mkdir()
        (catalog / "stub.json").write_text(json.dumps(doc))
        runtime = new_runtime(
            Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog), keyring_backend=memory_keyring
        )
        try:
            with anyio.fail_after(scaled(30)):
                first = await runtime.service.call("mcp_setup_get", {"qualified_name": STUB})
                again = await runtime.service.call("mcp_setup_get", {"qualified_name": STUB})
        finally:
            await runtime.aclose()
    assert [(k["name"], k["secret"]) for k in first["required_env_keys"]] == [("api_key", True)]
    assert again["required_env_keys"] == first["required_env_keys"]
    assert len(hits) == 1  # downloaded once, then from the cache
