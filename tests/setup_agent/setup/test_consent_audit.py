"""Every answer to a consent is audited: who gave it (``user:web``, ``user:terminal``,
``user:consent-page``, ``token:NAME``), which launch (the consent's fingerprint) and what it
granted (the sandbox as approved, destinations, tools left out). Never a value; the chain holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import keyring.backends.fail
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.setup.service import CallContext
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import stub_catalog

pytestmark = pytest.mark.anyio

STUB = "io.github.mcp-setup/stub"


async def ask(runtime: Runtime, ref: str) -> Any:
    args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
    with anyio.fail_after(scaled(60)):
        asked = await runtime.service.call("mcp_setup_test_connection", args, CallContext(installed_by="agent"))
    assert asked["error"]["code"] == "consent_required", asked
    return runtime.consents.pending()[-1]


async def test_an_approval_and_a_denial_are_audited_with_who_what_and_the_grant(
    tmp_path: Path, canary: str, new_runtime
) -> None:
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=stub_catalog(tmp_path, canary), consent="ask"
    )
    runtime = new_runtime(settings, keyring_backend=keyring.backends.fail.Keyring())
    await runtime.start(eager=False)
    try:
        ref = runtime.refs.mint("STUB_API_KEY", canary)
        first = await ask(runtime, ref)
        runtime.consents.deny(first.consent_id, "denied on the consent page", by="user:consent-page")
        second = await ask(runtime, ref)
        runtime.consents.approve(second.consent_id, by="user:terminal", sandbox={"network": False})
        rows = [r for r in runtime.store.audit.entries() if r.event.startswith("consent_")]
        assert [(r.event, r.actor, r.qualified_name) for r in rows] == [
            ("consent_denied", "user:consent-page", STUB),
            ("consent_approved", "user:terminal", STUB),
        ]
        assert f"launch {first.request.fingerprint}" in (rows[0].detail or "")
        assert f"launch {second.request.fingerprint}" in (rows[1].detail or "")
        assert '"network":false' in (rows[1].detail or "")  # what it granted: the sandbox as approved
        assert all(canary not in (r.detail or "") for r in rows)
        assert runtime.store.audit.verify().ok
    finally:
        await runtime.aclose()
