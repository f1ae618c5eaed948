"""Every real registry entry, through the local catalog and the fake official registry:
``mcp_setup_get`` and the launch-spec builder, judged by tests/helpers/registry_judge.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.runtime import Runtime
from app.settings import Settings
from registry_clients.serverjson import parse_server_json
from setup_agent.errors import SetupError
from setup_agent.launch.packages import build_spec, unset_keys
from setup_agent.setup.service import CallContext
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.registry_fixtures import SAMPLE_FILES, load_fixture
from tests.helpers.registry_judge import REFUSED, expected_options, judge_spec, raw_options

pytestmark = pytest.mark.anyio

ENTRIES = [(f, e) for f in SAMPLE_FILES for e in load_fixture(f)]


def _server(doc: dict) -> dict:
    return doc["server"] if isinstance(doc.get("server"), dict) else doc


def _latest_docs() -> dict[str, dict]:
    """Per name, the entry the registry calls latest (the last one of a name without metadata)."""
    out: dict[str, dict] = {}
    for _, doc in ENTRIES:
        meta = (doc.get("_meta") or {}).get("io.modelcontextprotocol.registry/official") or {}
        name = _server(doc)["name"]
        if meta.get("isLatest", True) or name not in out:
            out[name] = doc
    return out


def _judge_entry(doc: dict, detail_packages: list[Any]) -> list[str]:
    problems: list[str] = []
    name = _server(doc)["name"]
    raw = dict(raw_options(doc))
    for pkg in detail_packages:
        refusal = REFUSED.get((name, pkg.id))
        try:
            spec = build_spec(pkg, omit=unset_keys(pkg.required_keys, {}))
        except SetupError as exc:
            if refusal is None or refusal[0] != exc.code:
                problems.append(f"{name} {pkg.id}: refused ({exc.code}) without a listed reason: {exc.message}")
            continue
        if refusal is not None:
            problems.append(f"{name} {pkg.id}: listed as refused ({refusal[1]}) but it builds")
            continue
        problems += [f"{name} {pkg.id}: {p}" for p in judge_spec(pkg.id, raw[pkg.id], spec, pkg.required_keys)]
    return problems


def test_every_entry_of_the_three_files_parses_and_builds_or_is_a_listed_refusal() -> None:
    problems: list[str] = []
    refused: set[tuple[str, str]] = set()
    for _, doc in ENTRIES:
        detail = parse_server_json(doc, source="official")  # zero parse failures: this raises on any
        got = [(p.id, sorted(k.name for k in p.required_keys)) for p in detail.packages]
        assert got == [(oid, sorted(keys)) for oid, keys in expected_options(doc)], detail.qualified_name
        problems += _judge_entry(doc, detail.packages)
        refused |= {(detail.qualified_name, p.id) for p in detail.packages if (detail.qualified_name, p.id) in REFUSED}
    assert len(ENTRIES) == 514
    assert problems == []
    assert refused == set(REFUSED)  # every listed exception is still needed


class LoopbackOnly(httpx.AsyncHTTPTransport):
    """The real entries name bundles on GitHub and elsewhere: this machine is offline for them
    (refused at once, as a closed network would), while the fake registry on loopback answers."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host not in ("127.0.0.1", "localhost", "::1"):
            raise httpx.ConnectError("offline in this test", request=request)
        return await super().handle_async_request(request)


@pytest.fixture
async def local_runtime(new_runtime, tmp_path: Path, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for fname in SAMPLE_FILES:  # a file holds a list of entries: each get reads 3 files, not 514
        (catalog / fname).write_text(json.dumps(load_fixture(fname)))
    runtime = new_runtime(
        Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, prefetch_packages=False),
        keyring_backend=memory_keyring,
        http_transport=LoopbackOnly(),
    )
    yield runtime
    await runtime.aclose()


@pytest.fixture
async def official_runtime(new_runtime, tmp_path: Path, memory_keyring) -> AsyncIterator[Runtime]:
    with FakeOfficialRegistry([d for _, d in ENTRIES]) as fake:
        runtime = new_runtime(
            Settings(
                home=tmp_path / "data", registries="official", official_registry_url=fake.url, prefetch_packages=False
            ),
            keyring_backend=memory_keyring,
            http_transport=LoopbackOnly(),
        )
        yield runtime
        await runtime.aclose()


async def _get_all(runtime: Runtime) -> list[str]:
    problems: list[str] = []
    for name in _latest_docs():
        result = await runtime.service.call("mcp_setup_get", {"qualified_name": name}, CallContext())
        if result.get("ok") is False:
            problems.append(f"{name}: get failed: {result['error']}")
            continue
        # the source's choice of version (the catalog keeps the highest, the registry isLatest)
        doc = [
            d
            for _, d in ENTRIES
            if _server(d)["name"] == name and _server(d).get("version") == result["detail"].get("version")
        ][-1]
        expected = dict(expected_options(doc))
        for item in result["packages"]:
            want = expected[item["id"]]
            got = {k["name"]: (k["secret"], k["required"]) for k in item["keys"]}
            if got != {n: (k["secret"], k["required"]) for n, k in want.items()}:
                problems.append(f"{name} {item['id']}: get shows keys {got}, the entry says {want}")
        if result["package"] is not None:
            chosen = next(i for i in result["packages"] if i["id"] == result["package"])
            if result["required_env_keys"] != chosen["keys"]:
                problems.append(f"{name}: required_env_keys are not the chosen option's keys")
        if result["installed"] is not False:
            problems.append(f"{name}: shown as installed")
        detail = parse_server_json(doc, source="x")
        problems += _judge_entry(doc, detail.packages)
    return problems


async def test_get_on_every_entry_through_the_local_catalog_shows_each_options_keys(local_runtime) -> None:
    assert await _get_all(local_runtime) == []


async def test_get_on_every_entry_through_the_fake_official_registry_shows_each_options_keys(official_runtime) -> None:
    assert await _get_all(official_runtime) == []
