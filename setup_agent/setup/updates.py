"""Update an installed server to the registry's newer version (or exactly one), swapped in only if
it answers: the one code path of ``mcp-setup update`` and the page card's
"Update".

1. :func:`update_offer`: the registry's current detail of the server (or exactly ``version``'s),
   from the source it came from (Smithery keeps no versions, so a version fails there, plainly),
   and whether it is newer. A version the registry does not have is :class:`NotFound`, with where
   it looked and that the installed one stays.
2. :func:`update_server`: the new version is tested and installed with the stored settings
   (secrets as fresh refs, as if typed again), after the user's consent through ``ctx`` (the
   terminal's or the page's), while the old one stays installed: the store's commit deletes the
   old row and values in the same transaction as it adds the new one. The new row keeps the slug.
3. Only then the old one's process is stopped and its dir and log deleted.

Servers that signed in with OAuth are not updated (their grant is bound to the old install):
:class:`UpdateRefused` says to remove and add them again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from registry_clients.errors import RegistryNotFound
from setup_agent.errors import NotFound, SetupError, UpdateRefused
from setup_agent.oauth import GRANT_KEY
from setup_agent.store import InstalledServer

from .call_context import CallContext
from .tool_requests import InstallRequest

if TYPE_CHECKING:
    from registry_clients.hub import RegistryHub

    from .service import SetupService

__all__ = ["UpdateOffer", "update_offer", "update_server"]


@dataclass(frozen=True)
class UpdateOffer:
    server: InstalledServer  # as read when the registry was asked
    latest: str | None  # None: the registry names no version
    source: str | None  # the hub source it came from, when still configured
    asked: bool  # a version was asked for (else: the registry's latest)

    @property
    def server_id(self) -> str:
        return self.server.server_id

    @property
    def name(self) -> str:  # the qualified name
        return self.server.qualified_name

    @property
    def installed(self) -> str | None:
        return self.server.version

    @property
    def newer(self) -> bool:
        return self.latest != self.installed

    def public(self) -> dict[str, Any]:
        return {"server_id": self.server_id, "installed": self.installed, "latest": self.latest, "newer": self.newer}


def _where(hub: RegistryHub, source: str | None) -> str:
    if source == "local":
        directory = getattr(hub.sources.get("local"), "directory", None)
        return f"the local catalog ({directory})" if directory is not None else "the local catalog"
    return {"official": "the official registry", "smithery": "Smithery (it keeps no versions)"}.get(
        source or "", "the registries"
    )


async def update_offer(service: SetupService, server_id: str, version: str | None = None) -> UpdateOffer:
    server = await asyncio.to_thread(service.store.servers.get, server_id)
    if server is None:
        raise NotFound("No installed server has that id.")
    source = server.source if server.source in service.hub.sources else None
    try:
        # fresh: a long-running face's cache would hide a version published since (5 min TTL)
        detail = await service.hub.get(server.qualified_name, source=source, version=version, fresh=True)
    except RegistryNotFound:
        where = _where(service.hub, source)
        if version is None:
            raise NotFound(
                f"{server.qualified_name} is no longer in {where}; {server.version} stays installed."
            ) from None
        # said once: not the registry's own sentence inside ours
        raise NotFound(
            f"No version {version} of {server.qualified_name} in {where}; {server.version} stays installed."
        ) from None
    return UpdateOffer(server, detail.version, source, version is not None)


def _current(offer: UpdateOffer) -> str:
    which = "the version asked for" if offer.asked else "the registry's latest version"
    return f"{offer.name} is already at {offer.installed}, {which}."


async def update_server(service: SetupService, offer: UpdateOffer, ctx: CallContext) -> dict[str, Any]:
    """``{updated, server_id, version, tools, message}``; raises (redacted) when the new one does not
    answer, the old one still installed and running."""
    if not offer.newer:
        return {"updated": False, "server_id": offer.server_id, "version": offer.installed, "message": _current(offer)}
    server = offer.server
    stored = await asyncio.to_thread(service.store.values.env_values, offer.server_id)
    if GRANT_KEY in stored:
        stored.clear()
        raise UpdateRefused(f"{offer.name} signs in with OAuth: remove it and add it again to update it.")
    await service.connections.learn_stored_secrets()
    secret = {k.key for k in server.env_keys if k.secret}
    # Secrets go in as refs, as if typed again (masked all the way to the launch); the settings
    # that are not secret go back as the plain text they were given in.
    env_refs = {k: service.refs.mint(k, v) for k, v in stored.items() if k in secret and v}
    env = {k: v.reveal() for k, v in stored.items() if k not in secret}
    stored.clear()
    request = InstallRequest.parse(
        {
            "qualified_name": offer.name,
            "env_refs": env_refs,
            "env": env,
            "package": server.package_type,
            # else the registry's latest, as the offer found it (Smithery takes no version)
            **({"version": offer.latest} if offer.asked else {}),
            **({"source": offer.source} if offer.source else {}),
        }
    )
    try:
        result = await service.install_and_connect(request, ctx, replaces=offer.server_id)
    except SetupError as exc:
        # the outcome first, then what the new version said (its code stays in exc.code)
        exc.add_words(
            f"Version {offer.latest} did not answer, so {offer.installed} stays installed. ", own=True, first=True
        )
        raise
    finally:
        env.clear()
    await service.connections.retire(offer.server_id)  # its row went in the commit
    tools = len(result.get("tools") or [])
    return {
        "updated": True,
        "server_id": result.get("server_id"),
        "version": offer.latest,
        "tools": tools,
        "message": f"Updated {offer.name} from {offer.installed} to {offer.latest} ({tools} tools).",
    }
