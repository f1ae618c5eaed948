"""The tool registry: a read-only inventory of every tool an agent can reach through mcp-setup.

It lists the setup tools (``mcp_setup_*``) and every installed server's tools, each with a
stable ``tool_id``, how a call reaches it (``route``), its version, schemas, the agent
archetypes allowed to call it, tags, whether it is enabled and the live health of its server.
It changes nothing: dispatch stays with the faces and the gateway, permissions with the
archetypes, the guard and admission.

* ``tool_id`` — ``mcp_setup.<tool>`` for a setup tool (``mcp_setup_search`` →
  ``mcp_setup.search``); ``<server qualified name>#<tool name>`` for an installed tool
  (``io.github.acme/search#query``). It depends on neither the slug nor the gateway name, so it
  is stable across restarts and re-installs.
* ``route`` — ``setup`` for the setup tools; ``mcp:stdio``, ``mcp:streamable-http`` or
  ``mcp:sse`` (the stored launch spec's transport) for installed ones, with ``server_id``.
* ``version`` — the installed package's version (the service's own for setup tools).
* ``allowed_agents`` — the archetypes (``agents/*.toml``) whose ``tools`` name the tool, by its
  call name or its ``tool_id``.
* ``health`` — ``{"status"}``: ``available`` (setup tools), ``connected``, ``connecting``,
  ``failed`` (with ``code``), ``needs_sign_in``, ``stopped`` or ``disabled``. Never the failure
  text (it can quote a server's output).
* **write-surface candidates** — tools that do not declare ``readOnlyHint: true`` or that declare
  ``destructiveHint: true``, with the reasons. The setup tools' own hints are
  :data:`SETUP_TOOL_HINTS` (they are not sent on the wire; the registry only reports them).

Diagnostics hold counts, names, codes and key *names* only: no secret value, no ref, no
environment value, no command line. Everything leaving goes through the redactor as well.
Other features add diagnostics sections with :meth:`ToolRegistry.add_diagnostics`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from setup_agent.errors import NotFound
from setup_agent.secrets import Redactor
from setup_agent.setup import TOOL_SPECS, ProviderConfig
from setup_agent.store import InstalledServer, gateway_name

from .archetypes import ArchetypeRegistry

__all__ = ["SETUP_TOOL_HINTS", "SETUP_TOOL_PREFIX", "ToolRegistry", "installed_tool_id", "setup_tool_id"]

SETUP_TOOL_PREFIX = "mcp_setup_"

#: MCP tool annotations the setup tools would declare (reported by the registry only).
SETUP_TOOL_HINTS: dict[str, dict[str, bool]] = {
    "mcp_setup_search": {"readOnlyHint": True, "openWorldHint": True},
    "mcp_setup_get": {"readOnlyHint": True, "openWorldHint": True},
    "mcp_setup_list_servers": {"readOnlyHint": True},
    "mcp_setup_request_secret": {"readOnlyHint": False, "destructiveHint": False},
    "mcp_setup_test_connection": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    "mcp_setup_install_and_connect": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    "mcp_setup_authorize": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    "mcp_setup_remove": {"readOnlyHint": False, "destructiveHint": True},
}

#: A diagnostics section another feature adds: called on every ``diagnostics()``; its answer
#: must hold counts and names only (it passes the redactor, like everything here).
DiagnosticsSection = Callable[[], dict[str, Any]]


def setup_tool_id(name: str) -> str:
    return "mcp_setup." + (name[len(SETUP_TOOL_PREFIX) :] if name.startswith(SETUP_TOOL_PREFIX) else name)


def installed_tool_id(qualified_name: str, tool_name: str) -> str:
    return f"{qualified_name}#{tool_name}"


def _write_reasons(annotations: dict[str, Any] | None) -> list[str]:
    annotations = annotations or {}
    reasons = []
    if annotations.get("readOnlyHint") is not True:
        reasons.append("does not declare readOnlyHint: true")
    if annotations.get("destructiveHint") is True:
        reasons.append("declares destructiveHint: true")
    return reasons


class ToolRegistry:
    """``list()``, ``get(tool_id)`` and ``diagnostics()`` over the store, live status and archetypes.

    Seams: ``servers`` returns the installed servers (``store.servers.list``), ``status(server_id)``
    the live connection status (``ConnectionManager.status``), ``archetypes`` the loaded
    agent archetypes (called each time, so an edited agents folder shows).
    """

    def __init__(
        self,
        *,
        servers: Callable[[], Sequence[InstalledServer]],
        status: Callable[[str], Any],
        archetypes: Callable[[], ArchetypeRegistry],
        providers: ProviderConfig,
        redactor: Redactor,
        version: str,
        policy: dict[str, Any] | None = None,
    ) -> None:
        self._servers = servers
        self._status = status
        self._archetypes = archetypes
        self.providers = providers
        self.redactor = redactor
        self.version = version
        self.policy = dict(policy or {})  # e.g. {"consent": "ask"}: shown under policy_surfaces
        self._sections: dict[str, DiagnosticsSection] = {}

    # -- hooks --------------------------------------------------------------------------
    def add_diagnostics(self, name: str, section: DiagnosticsSection) -> None:
        """Add ``diagnostics()[name]`` (e.g. tool-list pinning counts)."""
        if name in _BUILT_IN_SECTIONS:
            raise ValueError(f"{name!r} is a built-in diagnostics section")
        self._sections[name] = section

    # -- queries ------------------------------------------------------------------------
    async def list(self) -> list[dict[str, Any]]:
        servers, archetypes = await asyncio.to_thread(self._read)
        return self.redactor.redact_obj(self._entries(servers, archetypes))

    async def get(self, tool_id: str) -> dict[str, Any]:
        for entry in await self.list():
            if entry["tool_id"] == tool_id:
                return entry
        raise NotFound("No tool has this tool_id. tool_registry_list lists every tool with its tool_id.")

    async def diagnostics(self) -> dict[str, Any]:
        servers, archetypes = await asyncio.to_thread(self._read)
        entries = self._entries(servers, archetypes)
        out: dict[str, Any] = {
            "counts": {
                "tools": len(entries),
                "servers": len(servers),
                "by_route": dict(Counter(e["route"] for e in entries)),
                "by_health": dict(Counter(e["health"]["status"] for e in entries)),
                "enabled": sum(1 for e in entries if e["enabled"]),
                "disabled": sum(1 for e in entries if not e["enabled"]),
            },
            "write_surface": [
                {"tool_id": e["tool_id"], "name": e["name"], "route": e["route"], "reasons": reasons}
                for e in entries
                if (reasons := _write_reasons(e.get("annotations")))
            ],
            "policy_surfaces": self._policy(archetypes),
            "servers": [self._server_diagnostics(s) for s in servers],
            "capability_providers": {**self.providers.diagnostics(), **self._coverage(servers)},
        }
        for name, section in self._sections.items():
            out[name] = await asyncio.to_thread(section)  # a section may read the store
        return self.redactor.redact_obj(out)

    # -- building -----------------------------------------------------------------------
    def _read(self) -> tuple[list[InstalledServer], ArchetypeRegistry]:
        return list(self._servers()), self._archetypes()

    def _entries(self, servers: Sequence[InstalledServer], archetypes: ArchetypeRegistry) -> list[dict[str, Any]]:
        allowed = {a.id: set(a.tools) for a in archetypes.agents.values()}

        def agents_for(*names: str) -> list[str]:
            return sorted(a for a, tools in allowed.items() if tools.intersection(names))

        out = []
        for spec in TOOL_SPECS:
            name, tool_id = spec["name"], setup_tool_id(spec["name"])
            out.append(
                {
                    "tool_id": tool_id,
                    "name": name,
                    "description": spec.get("description", ""),
                    "route": "setup",
                    "version": self.version,
                    "input_schema": spec.get("inputSchema", {"type": "object"}),
                    "output_schema": spec.get("outputSchema"),
                    "annotations": dict(SETUP_TOOL_HINTS.get(name, {})),
                    "allowed_agents": agents_for(name, tool_id),
                    "tags": ["setup", *_hint_tags(SETUP_TOOL_HINTS.get(name))],
                    "enabled": True,
                    "health": {"status": "available"},
                }
            )
        for server in servers:
            route = _route(server)
            health = self._health(server)
            provider = self.providers.provider_for(server.qualified_name)
            for tool in server.tools:
                tool_name = str(tool.get("name", ""))
                name = gateway_name(server.slug, tool_name)
                tool_id = installed_tool_id(server.qualified_name, tool_name)
                annotations = tool.get("annotations") if isinstance(tool.get("annotations"), dict) else None
                out.append(
                    {
                        "tool_id": tool_id,
                        "name": name,
                        "description": str(tool.get("description") or ""),
                        "route": route,
                        "server_id": server.server_id,
                        "server": server.qualified_name,
                        "slug": server.slug,
                        "version": server.version,
                        "input_schema": tool.get("inputSchema") or {"type": "object"},
                        "output_schema": tool.get("outputSchema"),
                        "annotations": annotations,
                        "allowed_agents": agents_for(name, tool_id),
                        "tags": ["installed", route.removeprefix("mcp:"), server.slug, *_hint_tags(annotations)],
                        "enabled": server.enabled,
                        "health": health,
                        "provider": _provider_summary(provider),
                    }
                )
        return out

    def _health(self, server: InstalledServer) -> dict[str, Any]:
        if not server.enabled:
            return {"status": "disabled"}
        status = self._status(server.server_id)
        out: dict[str, Any] = {"status": status.status}
        if status.status == "failed":
            out["code"] = getattr(status, "code", None) or "failed"
        return out

    def _server_diagnostics(self, server: InstalledServer) -> dict[str, Any]:
        provider = self.providers.provider_for(server.qualified_name)
        return {
            "server_id": server.server_id,
            "qualified_name": server.qualified_name,
            "slug": server.slug,
            "route": _route(server),
            "version": server.version,
            "package_type": server.package_type,
            "enabled": server.enabled,
            "health": self._health(server),
            "tools": len(server.tools),
            # Key names only: never a value, never a ref.
            "env_keys": [{"key": k.key, "secret": k.secret} for k in server.env_keys],
            "provider": _provider_summary(provider),
        }

    def _coverage(self, servers: Sequence[InstalledServer]) -> dict[str, Any]:
        """Which installed servers each provider stands for, and how many none does."""
        by_provider: dict[str, list[str]] = {p.id: [] for p in self.providers.providers}
        uncovered = []
        for server in servers:
            provider = self.providers.provider_for(server.qualified_name)
            (by_provider[provider.id] if provider else uncovered).append(server.server_id)
        return {"servers_by_provider": by_provider, "servers_without_provider": uncovered}

    def _policy(self, archetypes: ArchetypeRegistry) -> dict[str, Any]:
        return {
            "agent_allowlists": [
                {"archetype": a.id, "tools": list(a.tools)}
                for a in sorted(archetypes.agents.values(), key=lambda a: a.id)
            ],
            "archetype_errors": sorted(archetypes.errors),  # file names only
            "admission": self.providers.admission,
            **self.policy,
        }


_BUILT_IN_SECTIONS = {"counts", "write_surface", "policy_surfaces", "servers", "capability_providers"}


def _route(server: InstalledServer) -> str:
    transport = server.launch_spec.get("transport") if isinstance(server.launch_spec, dict) else None
    return f"mcp:{transport or 'stdio'}"


def _hint_tags(annotations: dict[str, Any] | None) -> list[str]:
    annotations = annotations or {}
    tags = ["read-only" if annotations.get("readOnlyHint") is True else "write-candidate"]
    if annotations.get("destructiveHint") is True:
        tags.append("destructive")
    if annotations.get("openWorldHint") is True:
        tags.append("open-world")
    return tags


def _provider_summary(provider: Any) -> dict[str, Any] | None:
    if provider is None:
        return None
    return {"id": provider.id, "eligible": provider.eligible, "trust_state": provider.trust_state}
