"""``mcp-setup agent`` in a real pty: the hidden prompt's mark, finishing a run, what got installed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pexpect
from keyring.backends import fail

from app.runtime import build_runtime
from app.settings import Settings
from tests.helpers.timeouts import scaled

HIDDEN = r"STUB_API_KEY \(hidden\): "


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


async def installed_servers(data_dir: Path, catalog: Path) -> list[dict]:
    """What a second process sees: the store, and whether the server connects from it."""
    settings = Settings(home=data_dir, registries="local", catalog_dir=catalog)
    runtime = build_runtime(settings, keyring_backend=fail.Keyring())
    try:
        with anyio.fail_after(scaled(30)):
            await runtime.start()
            return (await runtime.service.call("mcp_setup_list_servers", {"wait_seconds": 20}))["servers"]
    finally:
        await runtime.aclose()
