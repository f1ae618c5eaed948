"""Folders named by a setting without a ``format`` (mcp-obsidian's ``${input:vaultPath}``, a
``--directory`` argument, a value that is a folder) are granted like ``format: directory`` ones,
and the consent shows them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from app.settings import Settings
from registry_clients.models import RequiredKey
from registry_clients.serverjson import parse_server_json
from setup_agent.launch import build_spec, granted_paths
from setup_agent.secrets import SecretValue
from setup_agent.setup.service import CallContext
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.anyio

REGISTRY = FIXTURES / "registry/official/seed_2025-09-29.json"

#: An entry whose folder is a positional ``${input:vaultPath}`` with no format.
OBSIDIAN_NAME = "io.github.calclavia/mcp-obsidian"


def obsidian_entry() -> dict[str, Any]:
    """The real entry, from the official registry's sample."""
    (doc,) = [d for d in json.loads(REGISTRY.read_text()) if d.get("name") == OBSIDIAN_NAME]
    return doc


def test_an_mcp_obsidian_vault_path_is_granted_though_the_entry_gives_no_format(tmp_path: Path) -> None:
    vault = tmp_path / "Notes Vault"
    vault.mkdir()
    package = parse_server_json(obsidian_entry(), source="official").packages[0]
    spec = build_spec(package)
    assert [k.name for k in package.required_keys] == ["vaultPath"] and package.required_keys[0].format is None
    assert granted_paths(package.required_keys, {"vaultPath": str(vault)}, spec.args) == [str(vault)]


def test_a_folder_is_granted_by_its_name_its_flag_or_its_value_and_never_a_secret_or_a_missing_path(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    config = tmp_path / "config.toml"
    config.write_text("")

    def grants(key: RequiredKey, value: object, args: list[str] | None = None) -> list[str]:
        return granted_paths([key], {key.name: value}, args or [])

    assert grants(RequiredKey(name="configPath", format="string"), str(config)) == [str(config)]  # by its name
    assert grants(RequiredKey(name="notes_dir"), str(folder)) == [str(folder)]
    assert grants(RequiredKey(name="VAULT"), str(folder)) == [str(folder)]
    assert grants(RequiredKey(name="where"), str(config), ["--directory", "${where}"]) == [str(config)]  # its flag
    assert grants(RequiredKey(name="where"), str(config), ["--dir=${where}"]) == [str(config)]
    assert grants(RequiredKey(name="argument_0"), str(folder)) == [str(folder)]  # a folder that exists
    assert grants(RequiredKey(name="argument_0"), str(config)) == []  # a file, named for nothing
    assert grants(RequiredKey(name="db-path"), "md:") == []  # not a path
    assert grants(RequiredKey(name="vaultPath"), "Notes") == []  # not absolute
    assert grants(RequiredKey(name="vaultPath"), str(tmp_path / "missing")) == []
    assert grants(RequiredKey(name="vaultPath"), "/") == []
    assert grants(RequiredKey(name="token_dir", secret=True), SecretValue(str(folder))) == []


@pytest.fixture
async def runtime(tmp_path: Path, new_runtime) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "mcp-obsidian.json").write_text(json.dumps(obsidian_entry()))
    settings = Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, consent="ask")
    rt = new_runtime(settings)
    yield rt
    await rt.aclose()


async def test_the_consent_for_an_mcp_obsidian_entry_shows_the_persons_vault_as_a_granted_folder(
    runtime: Runtime, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    seen: list[Any] = []

    async def user_reads_then_denies(pending: Any) -> dict:
        seen.append(pending.request)
        runtime.consents.deny(pending.consent_id)
        return {}

    args = {"qualified_name": OBSIDIAN_NAME, "env": {"vaultPath": str(vault)}}
    ctx = CallContext(present_consent=user_reads_then_denies)
    denied = await runtime.service.call("mcp_setup_test_connection", args, ctx)
    assert denied["ok"] is False and denied["error"]["code"] == "consent_denied", denied
    (request,) = seen
    words = " ".join(request.sandbox)
    if runtime.prober.sandbox is not None and runtime.prober.sandbox.mechanism != "none":
        assert f"the folder you chose ({vault})" in words
    assert str(vault) in json.dumps(request.public())
