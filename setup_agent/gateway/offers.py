"""Installed servers' prompts, resources, resource templates and completions through the
gateway.

At each connect a server's prompts, resources and templates are listed (only what it
declared), redacted and recorded in the store (:func:`record_offers`; prompts are pinned there
like tools, setup_agent/store/tool_pins.py), so listing never waits for a spawn. The
:class:`OfferIndex` is built from those records and the catalog (enabled servers only):

* a prompt is listed as ``<slug>__<prompt>`` (the tools' naming, catalog.py), its description
  prefixed with the server's label, and routed back to its server under its own name;
* a resource or template keeps its URI when no other server lists the same one; on a
  collision each server's copy is listed as ``mcp-setup://resource/<slug>/<uri>`` and a read
  of that URI goes to that server with the original URI (the answer's ``uri`` fields are put
  back to the listed one);
* a read (or a subscription) of a plain URI goes to the server a tool result last named it
  for (a ``resource_link``), else the one server that listed it, else the first whose template
  matches it, else the one server that has resources at all (a URI it did not list).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from setup_agent.store import Catalog, gateway_name

from .passthrough import raw_request

__all__ = ["MAPPED_PREFIX", "OfferIndex", "PromptRoute", "left_out_names", "record_offers", "without_hidden"]

logger = logging.getLogger(__name__)

MAPPED_PREFIX = "mcp-setup://resource/"
MAX_PAGES = 20
MAX_ITEMS = 1000
#: How long listing a server's offers at connect may take (each list), before it is left out.
LIST_TIMEOUT = 10.0


async def _list_all(client: Any, method: str, key: str, label: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await raw_request(client, method, {"cursor": cursor} if cursor else None, label=label)
        items.extend(i for i in page.get(key) or () if isinstance(i, dict))
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor or len(items) >= MAX_ITEMS:
            break
    return items[:MAX_ITEMS]


async def record_offers(client: Any, store: Any, redactor: Any, server_id: str, label: str) -> None:
    """List what the server declared (prompts, resources, templates) and record it, redacted.

    A list that fails or takes too long is recorded empty (the connection goes on)."""
    caps = getattr(client, "server_capabilities", None)
    lists: dict[str, list[dict[str, Any]]] = {"prompts": [], "resources": [], "templates": []}
    wanted = []
    if getattr(caps, "prompts", None) is not None:
        wanted.append(("prompts", "prompts/list", "prompts"))
    if getattr(caps, "resources", None) is not None:
        wanted += [
            ("resources", "resources/list", "resources"),
            ("templates", "resources/templates/list", "resourceTemplates"),
        ]
    for part, method, key in wanted:
        try:
            async with asyncio.timeout(LIST_TIMEOUT):
                lists[part] = redactor.redact_obj(await _list_all(client, method, key, label))
        except Exception as exc:  # noqa: BLE001 - a server that lists nothing well still serves its tools
            logger.info("%s of %s failed: %s", method, label, type(exc).__name__)
    try:
        await asyncio.to_thread(lambda: store.pins.set_offers(server_id, **lists))
    except Exception as exc:  # noqa: BLE001 - e.g. removed meanwhile
        logger.info("could not record the prompts and resources of %s: %s", server_id, getattr(exc, "code", exc))


def without_hidden(entry: Any, offers: dict[str, Any]) -> Any:
    """``entry`` (a catalog server) without the tools the user unticked (store/tool_pins.py)."""
    hidden = getattr(offers.get(entry.server_id), "hidden_tools", None)
    if not hidden:
        return entry
    return dataclasses.replace(entry, tools=tuple(t for t in entry.tools if t.get("name") not in hidden))


def left_out_names(entries: Iterable[Any], offers: dict[str, Any]) -> dict[str, str]:
    """The gateway name each unticked tool would have, with the sentence its call is refused with."""
    entries = list(entries)
    if not any(getattr(offers.get(e.server_id), "hidden_tools", None) for e in entries):
        return {}
    out: dict[str, str] = {}
    for tool in Catalog.build(entries).tools():
        server = tool.server
        if tool.tool_name in getattr(offers.get(server.server_id), "hidden_tools", ()):
            out[tool.name] = (
                f"The user left out the tool {tool.tool_name[:80]} of {server.title or server.qualified_name} when they "
                f"installed it, so it is not available. Only they can turn it back on, with "
                f"`mcp-setup enable {server.slug} --tool {tool.tool_name[:80]}` in a terminal. Do not ask them to unless "
                "the task needs it."
            )
    return out


@dataclass(frozen=True)
class PromptRoute:
    server_id: str
    slug: str
    name: str  # the prompt's own name at its server
    prompt: dict[str, Any]


def _template_regex(template: str) -> re.Pattern[str]:
    """A regex matching what RFC 6570 ``template`` expands to (loosely: ``{x}`` one segment,
    ``{+x}``, ``{#x}``, ``{?x}``, ``{&x}``, ``{/x}`` anything)."""
    out, pos = [], 0
    for m in re.finditer(r"\{([^}]*)\}", template):
        out.append(re.escape(template[pos : m.start()]))
        out.append(".*" if m.group(1)[:1] in "+#?&/" and m.group(1) else "[^/?#]*")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out) + r"\Z")


@dataclass
class OfferIndex:
    """Prompts, resources and templates of the enabled servers, as the gateway lists them."""

    prompts: dict[str, PromptRoute] = field(default_factory=dict)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # unmapped URI / template -> server id
    slugs: dict[str, str] = field(default_factory=dict)  # slug -> server id
    matchers: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    sole: str | None = None  # the one enabled server with resources, when there is one

    @classmethod
    def build(cls, catalog: Catalog, offers: dict[str, Any]) -> OfferIndex:
        index = cls()
        servers = [s for s in catalog.servers if s.enabled and s.server_id in offers]
        index.slugs = {s.slug: s.server_id for s in catalog.servers if s.enabled}
        counts: dict[str, int] = {}
        for server in servers:
            for item in (*offers[server.server_id].resources, *offers[server.server_id].templates):
                key = item.get("uri") or item.get("uriTemplate")
                counts[key] = counts.get(key, 0) + 1
        with_resources = [
            s.server_id for s in servers if offers[s.server_id].resources or offers[s.server_id].templates
        ]
        index.sole = with_resources[0] if len(with_resources) == 1 else None
        for server in servers:
            offer = offers[server.server_id]
            for prompt in offer.prompts:
                name = gateway_name(server.slug, str(prompt["name"]))
                index.prompts.setdefault(name, PromptRoute(server.server_id, server.slug, str(prompt["name"]), prompt))
            for item, key, into in [(r, "uri", index.resources) for r in offer.resources] + [
                (t, "uriTemplate", index.templates) for t in offer.templates
            ]:
                original = item[key]
                if counts[original] > 1:
                    into.append({**item, key: f"{MAPPED_PREFIX}{server.slug}/{original}"})
                else:
                    into.append(dict(item))
                    index.owners[original] = server.server_id
                if key == "uriTemplate":
                    index.matchers.append((_template_regex(original), server.server_id))
        return index

    def wire_prompts(self, catalog: Catalog) -> list[dict[str, Any]]:
        out = []
        for name, route in self.prompts.items():
            server = catalog.server(route.server_id)
            label = (server.title or server.qualified_name) if server is not None else route.slug
            description = str(route.prompt.get("description") or "").strip()
            out.append({**route.prompt, "name": name, "description": f"[{label}] {description}".rstrip()})
        return out

    def signature(self) -> str:
        return json.dumps([self.prompts_signature(), self.resources_signature()], sort_keys=True)

    def prompts_signature(self) -> str:
        """Equal for two indexes that list the same prompts (prompts/list_changed)."""
        prompts = sorted((n, r.server_id, json.dumps(r.prompt, sort_keys=True)) for n, r in self.prompts.items())
        return json.dumps(prompts, sort_keys=True)

    def resources_signature(self) -> str:
        """Equal for two indexes that list the same resources and templates (resources/list_changed)."""
        return json.dumps([self.resources, self.templates], sort_keys=True)

    def route_uri(self, uri: str, linked: str | None) -> tuple[str, str] | None:
        """``(server_id, the URI at that server)`` for a read (or a completion's template)."""
        if uri.startswith(MAPPED_PREFIX):
            slug, _, original = uri[len(MAPPED_PREFIX) :].partition("/")
            server_id = self.slugs.get(slug)
            return (server_id, original) if server_id is not None and original else None
        if linked is not None:
            return linked, uri
        if uri in self.owners:
            return self.owners[uri], uri
        for pattern, server_id in self.matchers:
            if pattern.match(uri):
                return server_id, uri
        return (self.sole, uri) if self.sole is not None else None
