"""``mcp-setup tools [--json]``: the tool registry for people (setup_agent/agent/tool_registry.py).

It reads the store (with the standard library, as ``list`` does: app/cli/readonly.py) and
config.toml of this data dir; it starts no server and loads neither the SDK nor the web stack. Live health is
known only to the process running the servers (``mcp-setup serve``: ``tool_registry_list``
on ``/rpc``), so here an enabled server's tools show ``not checked``, and the table ends with
how to check them (``mcp-setup doctor`` starts each enabled server once).
``--json`` prints ``{"tools": [...], "diagnostics": {...}}``. Also :func:`check_config`:
the start-up check of config.toml every face runs (a clear line, exit code 2, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from setup_agent.errors import SetupError

if TYPE_CHECKING:  # the core loads when `mcp-setup tools` runs, not when another command parses
    from app.settings import Settings
    from setup_agent.agent import ToolRegistry
    from setup_agent.store import Store

__all__ = ["add_tools_parser", "check_config", "format_table", "run_tools"]

NOT_CHECKED = "not checked"
CHECK_HINT = (
    'HEALTH "not checked": this command starts no server. To check them, run `mcp-setup doctor` '
    "(it starts each enabled server once), or run `mcp-setup serve` and open its page."
)


def add_tools_parser(sub: Any) -> None:
    tools = sub.add_parser(
        "tools",
        help="list every tool an agent can reach (setup tools and installed servers' tools)",
        description="The read-only tool registry: each tool's id, route, health, enabled state, the agent "
        "archetypes allowed to call it, and its capability provider; then the write-surface candidates. "
        "Starts no server.",
    )
    tools.add_argument("--json", action="store_true", help="print the registry and its diagnostics as JSON")


def check_config(settings: Settings) -> str | None:
    """None when config.toml is usable (or absent); else the line to print."""
    try:
        from setup_agent.setup import load_provider_config

        load_provider_config(settings.config_path)
    except SetupError as exc:
        return f"mcp-setup: {exc.message}"
    return None


def _registry(settings: Settings, store: Store) -> ToolRegistry:
    from app.settings import service_version
    from setup_agent.agent import ToolRegistry, load_archetypes
    from setup_agent.gateway import ServerStatus
    from setup_agent.secrets import Redactor
    from setup_agent.setup import load_provider_config

    return ToolRegistry(
        servers=store.servers.list,
        status=lambda server_id: ServerStatus(server_id, status=NOT_CHECKED),  # type: ignore[arg-type]
        archetypes=load_archetypes,
        providers=load_provider_config(settings.config_path),
        redactor=Redactor(),
        version=service_version(),
        policy={"consent": settings.consent},
    )


def run_tools(settings: Settings, args: argparse.Namespace) -> int:
    from .readonly import reader  # the store read with the standard library when it can

    try:
        with reader(settings) as store:
            registry = _registry(settings, store)
            import asyncio

            tools, diagnostics = asyncio.run(_read(registry))
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"tools": tools, "diagnostics": diagnostics}, indent=2))
    else:
        print(format_table(tools, diagnostics))
    return 0


async def _read(registry: ToolRegistry) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return await registry.list(), await registry.diagnostics()


def format_table(tools: list[dict[str, Any]], diagnostics: dict[str, Any]) -> str:
    # TOOL: the name an AI client lists it under (the stable tool_id is in --json)
    rows = [("TOOL", "ROUTE", "HEALTH", "ENABLED", "AGENTS", "PROVIDER")]
    for t in tools:
        health = t["health"]["status"] + (f" ({t['health']['code']})" if t["health"].get("code") else "")
        provider = t.get("provider")
        rows.append(
            (
                t["name"],
                t["route"],
                health,
                "yes" if t["enabled"] else "no",
                ",".join(t["allowed_agents"]) or "-",
                "-" if not provider else provider["id"] + ("" if provider["eligible"] else " (not eligible)"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    counts = diagnostics["counts"]
    if any(t["health"]["status"] == NOT_CHECKED for t in tools):
        lines += ["", CHECK_HINT]
    routes = ", ".join(f"{n} {route}" for route, n in sorted(counts["by_route"].items()))
    lines += ["", f"{counts['tools']} tools ({routes}); {counts['disabled']} disabled."]
    write = diagnostics["write_surface"]
    if write:
        lines.append(
            f"Tools that may change things (they do not say they only read), write-surface candidates ({len(write)}):"
        )
        lines += [f"  {w['name']}: {'; '.join(w['reasons'])}" for w in write]
    providers = diagnostics["capability_providers"]
    if providers["providers"]:
        eligible = providers["counts"]["eligible"]
        lines.append(
            f"Capability providers: {providers['counts']['total']} ({eligible} eligible); admission: {providers['admission']}."
        )
    return "\n".join(lines)
