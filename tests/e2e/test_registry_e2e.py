"""End to end through ``mcp-setup mcp`` with servers found in a fake official registry.

A remote streamable-HTTP server with a secret header, an MCPB bundle, and a real npm server
(``@modelcontextprotocol/server-everything`` through npx, which needs the npm registry).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from tests.fakes.file_server import serve_file
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.canary import all_bytes_under
from tests.helpers.mcp_face import Browser, Recorder, call, elicitation_answering, face_env, mcp_setup_client
from tests.helpers.processes import processes_mentioning
from tests.helpers.registry_entries import SCHEMA, everything_entry
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, sha256_hex, stub_server_json
from tests.stub_server.http_server import serve_http_stub

pytestmark = pytest.mark.anyio


def remote_entry(url: str) -> dict:
    return {
        "$schema": SCHEMA,
        "name": "io.github.mcp-setup/remote-stub",
        "description": "A remote MCP server that wants a bearer token.",
        "version": "1.0.0",
        "remotes": [
            {
                "type": "streamable-http",
                "url": url,
                "headers": [
                    {
                        "name": "Authorization",
                        "description": "Bearer token for the remote stub",
                        "value": "Bearer {api_token}",
                        "isRequired": True,
                        "isSecret": True,
                        "variables": {
                            "api_token": {"description": "Your API token", "isRequired": True, "isSecret": True}
                        },
                    }
                ],
            }
        ],
    }


async def test_a_remote_server_with_a_secret_header_and_an_mcpb_bundle_install_from_the_official_registry(
    tmp_path: Path, canary: str
) -> None:
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary)
    with serve_file(bundle) as bundle_url, serve_http_stub(expected_sha256=sha256_hex(f"Bearer {canary}")) as url:
        mcpb = stub_server_json(bundle_url, sha, name="io.github.mcp-setup/bundle-stub")
        with FakeOfficialRegistry([remote_entry(url), mcpb]) as registry:
            env = face_env(tmp_path, MCP_SETUP_REGISTRIES="official", MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url)
            recorder = Recorder()
            browser = Browser()
            answers = ["wrong-token", canary, canary]
            stderr = tmp_path / "stderr.log"
            with anyio.fail_after(scaled(120)):
                async with mcp_setup_client(
                    tmp_path, stderr, recorder, elicitation_callback=elicitation_answering(browser, answers), env=env
                ) as client:
                    found = await call(client, "mcp_setup_search", {"query": "mcp-setup"})
                    names = {s["qualified_name"] for s in found["servers"]}
                    assert names == {"io.github.mcp-setup/remote-stub", "io.github.mcp-setup/bundle-stub"}

                    # The remote: the header's placeholder is a secret key.
                    detail = await call(client, "mcp_setup_get", {"qualified_name": "io.github.mcp-setup/remote-stub"})
                    keys = {k["name"]: k for k in detail["required_env_keys"]}
                    assert keys["api_token"]["secret"] is True
                    assert [p["id"] for p in detail["packages"]] == ["remote"]
                    bad = await call(client, "mcp_setup_request_secret", {"key_name": "api_token", "prompt": "Token"})
                    rejected = await call(
                        client,
                        "mcp_setup_test_connection",
                        {"qualified_name": "io.github.mcp-setup/remote-stub", "env_refs": {"api_token": bad["ref"]}},
                    )
                    assert rejected["error"]["code"] == "rejected"
                    assert "401" in rejected["error"]["message"]
                    good = await call(client, "mcp_setup_request_secret", {"key_name": "api_token", "prompt": "Token"})
                    remote = await call(
                        client,
                        "mcp_setup_install_and_connect",
                        {"qualified_name": "io.github.mcp-setup/remote-stub", "env_refs": {"api_token": good["ref"]}},
                    )
                    assert remote["status"] == "connected", remote
                    assert {t["name"] for t in remote["tools"]} == {"echo", "whoami"}

                    # The bundle: fetched, verified, unpacked, run from its manifest.
                    key = await call(client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key"})
                    bundled = await call(
                        client,
                        "mcp_setup_install_and_connect",
                        {"qualified_name": "io.github.mcp-setup/bundle-stub", "env_refs": {"STUB_API_KEY": key["ref"]}},
                    )
                    assert bundled["status"] == "connected", bundled

                    listed = (await call(client, "mcp_setup_list_servers"))["servers"]
                    assert sorted((s["qualified_name"], s["status"], s["package_type"]) for s in listed) == [
                        ("io.github.mcp-setup/bundle-stub", "connected", "mcpb"),
                        ("io.github.mcp-setup/remote-stub", "connected", "remote"),
                    ]
            assert canary not in recorder.text()
            assert canary not in stderr.read_text()
            data_dir = Path(env["MCP_SETUP_HOME"])
            for path, data in all_bytes_under(data_dir):
                assert canary.encode() not in data, f"canary in {path}"
            assert not processes_mentioning(str(data_dir))


async def test_a_real_npm_server_is_test_connected_through_npx(tmp_path: Path) -> None:
    assert shutil.which("npx"), "npx is needed for this test (Debian: apt-get install nodejs npm)"
    with FakeOfficialRegistry([everything_entry()]) as registry:
        env = face_env(
            tmp_path,
            MCP_SETUP_REGISTRIES="official",
            MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
            MCP_SETUP_PROBE_TIMEOUT_SECONDS=str(scaled(240)),
        )
        with anyio.fail_after(scaled(300)):
            async with mcp_setup_client(tmp_path, tmp_path / "err.log", Recorder(), env=env) as client:
                detail = await call(
                    client, "mcp_setup_get", {"qualified_name": "io.github.modelcontextprotocol/server-everything"}
                )
                assert detail["packages"] == [{"id": "npm", "type": "npm", "available": True, "keys": []}]
                tested = await call(
                    client,
                    "mcp_setup_test_connection",
                    {"qualified_name": "io.github.modelcontextprotocol/server-everything"},
                )
    assert tested["ok"] is True, json.dumps(tested)[:2000]
    names = {t["name"] for t in tested["tools"]}
    assert {"echo", "get-sum", "get-env", "get-tiny-image"} <= names, names
    # 17: the probe declares what the gateway relays (sampling, elicitation, roots; #29 item 5),
    # so the server also shows the four tools it registers only for such clients.
    assert len(names) == 17 and {"trigger-sampling-request", "get-roots-list"} <= names


async def test_the_real_server_everything_is_installed_and_called_through_the_gateway_without_its_secret(
    tmp_path: Path, canary: str
) -> None:
    """npx server-everything behind the gateway: echo works, and get-env (which prints the
    server's whole environment, where its stored secret is) comes back redacted."""
    assert shutil.which("npx"), "npx is needed for this test (Debian: apt-get install nodejs npm)"
    entry = everything_entry()
    entry["packages"][0]["environmentVariables"] = [
        {"name": "EVERYTHING_DEMO_TOKEN", "description": "A token the server does not need", "isSecret": True}
    ]
    recorder, browser = Recorder(), Browser()
    with FakeOfficialRegistry([entry]) as registry:
        env = face_env(
            tmp_path,
            MCP_SETUP_REGISTRIES="official",
            MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url,
            MCP_SETUP_PROBE_TIMEOUT_SECONDS=str(scaled(240)),
        )
        with anyio.fail_after(scaled(300)):
            async with mcp_setup_client(
                tmp_path,
                tmp_path / "err.log",
                recorder,
                env=env,
                elicitation_callback=elicitation_answering(browser, [canary]),
            ) as client:
                ref = (
                    await call(client, "mcp_setup_request_secret", {"key_name": "EVERYTHING_DEMO_TOKEN", "prompt": "t"})
                )["ref"]
                installed = await call(
                    client,
                    "mcp_setup_install_and_connect",
                    {"qualified_name": entry["name"], "env_refs": {"EVERYTHING_DEMO_TOKEN": ref}},
                )
                assert installed["status"] == "connected", json.dumps(installed)[:2000]
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"server-everything__echo", "server-everything__get-env"} <= names
                echoed = await client.call_tool("server-everything__echo", {"message": "through the gateway"})
                assert "through the gateway" in echoed.content[0].text
                printed = await client.call_tool("server-everything__get-env", {})
                text = printed.content[0].text
                assert "PATH" in text  # it did print its environment
                assert canary not in text and "[secret:EVERYTHING_DEMO_TOKEN]" in text
    assert canary not in recorder.text()
    assert canary not in (tmp_path / "err.log").read_text()
