"""Issue 26 items 6–11: registry entries start the server they name, as their publishers wrote them.

One focused test per item, on the real entries that showed each problem (the fixture files).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.runtime import Runtime
from app.settings import Settings
from registry_clients.local import LocalCatalog
from registry_clients.serverjson import parse_server_json
from registry_clients.smithery import smithery_detail
from setup_agent.launch.packages import build_spec, choose_package, unset_keys
from setup_agent.launch.spec import fill
from setup_agent.setup.bundle_manifests import BundleManifests
from setup_agent.setup.service import CallContext
from tests.helpers.registry_fixtures import SAMPLE_FILES, load_fixture


def entry(name: str, version: str | None = None) -> dict[str, Any]:
    found = [
        d
        for f in SAMPLE_FILES
        for d in load_fixture(f)
        if (d.get("server") or d)["name"] == name and (version is None or (d.get("server") or d)["version"] == version)
    ]
    return found[-1]


def package(name: str, kind: str, version: str | None = None):
    detail = parse_server_json(entry(name, version), source="official")
    return next(p for p in detail.packages if p.type == kind)


# -- 6 -------------------------------------------------------------------------------------
def test_a_vscode_input_placeholder_in_an_argument_becomes_a_key_that_is_asked_for() -> None:
    obsidian = package("io.github.calclavia/mcp-obsidian", "npm")
    (key,) = obsidian.required_keys
    assert (key.name, key.kind, key.required, key.secret) == ("vaultPath", "argument", True, False)
    spec = build_spec(obsidian)
    assert "${vaultPath}" in spec.args and not any("input:" in a for a in spec.args)
    assert fill(spec, {"vaultPath": "/home/me/vault"}).args[-1] == "/home/me/vault"


# -- 7 -------------------------------------------------------------------------------------
def test_npms_own_y_flag_is_no_setting_and_is_passed_once() -> None:
    opik = package("io.github.comet-ml/opik-mcp", "npm", "0.1.3")
    assert "y" not in {k.name for k in opik.required_keys}
    for omit in (unset_keys(opik.required_keys, {}), set()):
        assert build_spec(opik, omit=omit).args.count("-y") == 1


def test_an_images_rm_flag_key_does_not_pass_rm_twice() -> None:
    codeweaver = package("com.knitli/codeweaver", "oci")
    assert "rm" not in {k.name for k in codeweaver.required_keys}
    values = {k.name: "true" for k in codeweaver.required_keys if k.format == "boolean"}
    args = build_spec(codeweaver, omit=unset_keys(codeweaver.required_keys, values)).args
    assert args.count("--rm") == 1 and args.count("-i") == 1


# -- 8 -------------------------------------------------------------------------------------
@pytest.fixture
async def runtime(new_runtime, tmp_path: Path, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for status, name in (("deleted", "gone"), ("deprecated", "old")):
        doc = json.loads(json.dumps(entry("io.github.comet-ml/opik-mcp", "0.1.3")))
        doc["server"]["name"] = f"io.github.example/{name}"
        doc.setdefault("_meta", {})["io.modelcontextprotocol.registry/official"] = {"status": status}
        (catalog / f"{name}.json").write_text(json.dumps(doc))
    rt = new_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog), keyring_backend=memory_keyring
    )
    yield rt
    await rt.aclose()


async def call(rt: Runtime, tool: str, **args: Any) -> dict:
    return await rt.service.call(tool, args, CallContext())


@pytest.mark.anyio
async def test_allow_deprecated_unlocks_a_deprecated_entry_but_a_deleted_one_stays_refused(runtime) -> None:
    got = await call(runtime, "mcp_setup_get", qualified_name="io.github.example/gone")
    assert got["status"] == "deleted" and any("deleted; install refuses it." in n for n in got["notes"])
    refused = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.github.example/gone", allow_deprecated=True
    )
    assert refused["error"]["code"] == "deprecated" and "deleted" in refused["error"]["message"]
    allowed = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.github.example/old", allow_deprecated=True
    )
    assert allowed["error"]["code"] != "deprecated"


# -- 9 -------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_the_local_catalog_keeps_the_entry_the_registry_marks_latest_over_a_higher_version(tmp_path) -> None:
    docs = [
        d for d in load_fixture("servers_sample_2025-12-18.json") if d["server"]["name"] == "finance.orbt/intelligence"
    ]
    assert {d["server"]["version"] for d in docs} >= {"3.3.0", "3.3.0.1"}
    for d in docs:
        (tmp_path / f"orbt-{d['server']['version']}.json").write_text(json.dumps(d))
    catalog = LocalCatalog(tmp_path)
    assert (await catalog.get("finance.orbt/intelligence")).version == "3.3.0"  # isLatest, not 3.3.0.1
    assert (await catalog.get("finance.orbt/intelligence", version="3.3.0.1")).version == "3.3.0.1"


# -- 10 ------------------------------------------------------------------------------------
SMITHERY_BOTH = {
    "qualifiedName": "@acme/both",
    "displayName": "Both",
    "description": "A bundle and a remote.",
    "connections": [
        {
            "type": "stdio",
            "bundleUrl": "https://bundles.example.com/acme/both.mcpb",
            "runtime": "node",
            "configSchema": {},
        },
        {
            "type": "http",
            "deploymentUrl": "https://server.smithery.ai/@acme/both/mcp",
            "configSchema": {
                "type": "object",
                "required": ["apiKey"],
                "properties": {
                    "apiKey": {"type": "string"},
                    "region": {"type": "string", "default": "eu"},
                    "verbose": {"type": "boolean"},
                },
            },
        },
    ],
}


def test_a_smithery_entry_prefers_its_remote_over_a_bundle_with_no_sha256() -> None:
    detail = smithery_detail(SMITHERY_BOTH)
    assert [p.type for p in detail.packages] == ["mcpb", "remote"]
    assert choose_package(detail.packages, which=lambda _: "/usr/bin/x").type == "remote"
    bundle_only = [p for p in detail.packages if p.type == "mcpb"]
    assert choose_package(bundle_only, which=lambda _: "/usr/bin/x").type == "mcpb"  # still the last resort


def test_smitherys_optional_settings_are_offered_and_an_unset_one_is_not_sent() -> None:
    remote = next(p for p in smithery_detail(SMITHERY_BOTH).packages if p.type == "remote")
    keys = {k.name: k for k in remote.required_keys}
    assert keys["apiKey"].required and not keys["region"].required and keys["region"].default == "eu"
    assert keys["verbose"].choices == ["true", "false"] and not keys["verbose"].required
    spec = build_spec(remote, omit=unset_keys(remote.required_keys, {"apiKey": "k", "region": "eu"}))
    assert "apiKey=${apiKey}" in spec.url and "region=${region}" in spec.url and "verbose" not in spec.url


@pytest.mark.anyio
async def test_get_never_downloads_a_bundle_it_cannot_verify(tmp_path: Path) -> None:
    asked: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, content=b"PK\x03\x04 not checked")

    bundle = next(p for p in smithery_detail(SMITHERY_BOTH).packages if p.type == "mcpb")
    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as http:
        manifests = BundleManifests(http=http, scratch_root=tmp_path)
        assert await manifests.cheap_manifest(bundle, allow_file=False, remote=True) is None
    assert asked == [] and not any(tmp_path.iterdir())


# -- 11 ------------------------------------------------------------------------------------
def test_a_name_ending_in_secretkey_is_guessed_secret() -> None:
    tos = {k.name: k for k in package("io.github.dinghuazhou/sample-mcp-server-tos", "oci").required_keys}
    assert tos["VOLC_SECRETKEY"].secret and tos["VOLC_SECRETKEY"].secret_guessed
    assert not tos["VOLC_ACCESSKEY"].secret
