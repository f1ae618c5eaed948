"""The consent's choices: an install's consent (a test's, which covers the install) asks "May ask
your AI to write text" (no / yes, without tools / yes, with tools; default: without tools), the
person's answer is stored with the installed server and audited with the approval.
Service-level over build_runtime (consent "ask"), a local catalog and the real stub bundle."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.errors import InvalidInput
from setup_agent.setup.service import CallContext
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json

pytestmark = pytest.mark.anyio

STUB = "io.test/stub"


@pytest.fixture
async def world(new_runtime, tmp_path: Path, canary: str, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, name=STUB)))
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, consent="ask", probe_timeout_seconds=scaled(20)
    )
    runtime = new_runtime(settings, keyring_backend=memory_keyring)
    yield runtime
    await runtime.aclose()


async def _call(runtime: Runtime, tool: str, **args: Any) -> dict[str, Any]:
    with anyio.fail_after(scaled(30)):
        return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


async def _install_consent(runtime: Runtime, canary: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The consent of a test, which covers the install (one approval per install): its id, its
    JSON and the arguments of the test and the install."""
    args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": runtime.refs.mint("STUB_API_KEY", canary)}}
    asked = await _call(runtime, "mcp_setup_test_connection", **args)
    assert asked["error"]["code"] == "consent_required", asked
    (pending,) = runtime.consents.pending()
    assert pending.request.covers_install is True
    return pending.consent_id, pending.request.public(), args


async def _tested_and_installed(runtime: Runtime, args: dict[str, Any]) -> dict[str, Any]:
    assert (await _call(runtime, "mcp_setup_test_connection", **args))["ok"] is True
    installed = await _call(runtime, "mcp_setup_install_and_connect", **args)
    assert runtime.consents.pending() == []  # not asked again
    return installed


async def test_an_install_consent_asks_whether_it_may_ask_your_ai_to_write_text_without_tools_by_default(
    world: Runtime, canary: str
) -> None:
    consent_id, shown, args = await _install_consent(world, canary)
    assert shown["choices"] == [
        {
            "name": "sampling",
            "label": "May ask your AI to write text",
            "options": [
                {"value": "no", "label": "No"},
                {"value": "text", "label": "Yes, without tools"},
                {"value": "tools", "label": "Yes, with tools"},
            ],
            "default": "text",
        }
    ]
    world.consents.approve(consent_id, by="user:web")  # no answer given: the default
    installed = await _tested_and_installed(world, args)
    assert installed["status"] == "connected", installed
    assert world.store.servers.get_by_name(STUB).sampling == "text"  # type: ignore[union-attr]


async def test_the_persons_choice_is_stored_with_the_server_and_audited_with_the_approval(
    world: Runtime, canary: str
) -> None:
    consent_id, _, args = await _install_consent(world, canary)
    with pytest.raises(InvalidInput, match="May ask your AI to write text"):
        world.consents.approve(consent_id, choices={"sampling": "always"})
    with pytest.raises(InvalidInput):
        world.consents.approve(consent_id, choices={"network": "yes"})  # only the choices shown
    world.consents.approve(consent_id, choices={"sampling": "no"}, by="user:web")
    installed = await _tested_and_installed(world, args)
    assert installed["status"] == "connected", installed
    assert world.store.servers.get_by_name(STUB).sampling == "no"  # type: ignore[union-attr]
    approvals = [e for e in world.store.audit.entries() if e.event == "consent_approved"]
    assert "May ask your AI to write text: No" in (approvals[-1].detail or "")
