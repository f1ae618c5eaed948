"""The agent's flow for one packaged stub server (npm, PyPI or OCI), shared by the download-phase,
prefetch and direct-start tests: a local catalog entry that wants the secret ``STUB_API_KEY``, the
secret prompt (and the prefetch it starts), the test-connect with its progress events, the
install; and a host environment whose runners have caches of their own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio

from app.runtime import Runtime
from setup_agent.setup.service import CallContext

__all__ = ["install", "open_prompt", "run_test", "runner_host_env", "uv_bin", "write_catalog_entry"]


def write_catalog_entry(catalog: Path, name: str, description: str, package: dict[str, Any]) -> None:
    """A local catalog entry for ``name`` with one ``package`` (stdio) wanting ``STUB_API_KEY``."""
    catalog.mkdir(parents=True, exist_ok=True)
    doc = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": description,
        "version": "1.0.0",
        "packages": [
            {
                **package,
                "version": "1.0.0",
                "transport": {"type": "stdio"},
                "environmentVariables": [
                    {
                        "name": "STUB_API_KEY",
                        "description": "API key",
                        "isRequired": True,
                        "isSecret": True,
                        "format": "string",
                    }
                ],
            }
        ],
    }
    (catalog / (name.rsplit("/", 1)[-1] + ".json")).write_text(json.dumps(doc))


async def open_prompt(runtime: Runtime, name: str, *, settle_seconds: float = 90) -> dict[str, Any]:
    """Open the secret prompt for ``name`` and wait (bounded) for the prefetch it started."""
    opened = await runtime.service.call(
        "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your key", "server": name}
    )
    assert "ref" in opened, opened
    with anyio.fail_after(settle_seconds):
        await runtime.service.prefetches_settled()
    return opened


async def run_test(runtime: Runtime, name: str, ref: str, events: list[dict[str, Any]], *, timeout: float) -> dict:
    """``mcp_setup_test_connection`` of ``name`` with the key's ref; its progress into ``events``."""

    async def hear(event: dict[str, Any]) -> None:
        events.append(event)

    with anyio.fail_after(timeout):
        return await runtime.service.call(
            "mcp_setup_test_connection",
            {"qualified_name": name, "env_refs": {"STUB_API_KEY": ref}},
            CallContext(on_progress=hear),
        )


def uv_bin() -> Path | None:
    """The ``uv`` of the ``uv`` wheel (the test extra), if it is installed."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return Path(find_uv_bin())
    except FileNotFoundError:
        return None


def runner_host_env(tmp_path: Path) -> dict[str, str]:
    """PATH with ``uv``/``uvx`` (links in a dir of their own), a private HOME (cold npm and uv
    caches of its own), no Python download by uv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    uv = uv_bin()
    for tool in ("uv", "uvx") if uv is not None else ():
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(uv.with_name(tool))  # type: ignore[union-attr]
    home = tmp_path / "home"
    (home / ".config" / "uv").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "uv" / "uv.toml").write_text('python-downloads = "never"\n')
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home), "LANG": "C.UTF-8"}


async def install(runtime: Runtime, name: str, secret: str, *, timeout: float = 180) -> str:
    """Test, install and connect ``name`` with ``secret`` as its key (no consent asked); its id."""
    ref = runtime.refs.mint("STUB_API_KEY", secret)
    await runtime.start(eager=False)
    with anyio.fail_after(timeout):
        installed = await runtime.service.call(
            "mcp_setup_install_and_connect",
            {"qualified_name": name, "env_refs": {"STUB_API_KEY": ref}},
            CallContext(installed_by="agent"),
        )
    assert installed.get("status") == "connected", installed
    return str(installed["server_id"])
