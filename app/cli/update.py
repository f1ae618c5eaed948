"""``mcp-setup update NAME [--version V]``: the registry's newer version (or exactly V), swapped in only if it answers.

1. The registry's current detail of NAME (with ``--version V``, exactly V's, from the source the
   server came from; Smithery keeps no versions, so V fails there, plainly); nothing to do when
   the installed version is it. A V the registry does not have: exit 1, nothing changed.
2. The new version is tested and installed with the stored settings (secrets as fresh refs, as
   if typed again), after the user's consent in this terminal, while the old one stays
   installed: its row, its encrypted values and its install dir are untouched until the new
   row is committed, and the commit deletes the old row and values in the same transaction
   (#24 item 6: a crash or SIGKILL at any moment, during the download, the test or the
   commit, leaves exactly one of the two, never none). The new row keeps the old slug.
3. Only then the old one's process is stopped and its dir and log deleted. Running faces see
   the one swapped for the other at the commit.

Servers that signed in with OAuth are not updated here (their grant is bound to the old
install): remove and add them again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from registry_clients.errors import RegistryNotFound
from setup_agent.errors import SetupError
from setup_agent.oauth import GRANT_KEY
from setup_agent.setup import CallContext
from setup_agent.store import InstalledServer

__all__ = ["update"]


async def update(runtime: Any, server: InstalledServer, version: str | None) -> tuple[int, str]:
    from .terminal import TerminalIO

    source = server.source if server.source in runtime.hub.sources else None
    try:
        detail = await runtime.hub.get(server.qualified_name, source=source, version=version)
    except RegistryNotFound:
        if version is None:
            raise
        where = {"local": f"the local catalog ({runtime.settings.catalog_path})", "official": "the official registry",
                 "smithery": "Smithery (it keeps no versions)"}.get(source or "", "the registries")  # fmt: skip
        # said once: not the registry's own sentence inside ours (#25 item 12)
        return 1, f"No version {version} of {server.qualified_name} in {where}; {server.version} stays installed."
    if detail.version == server.version:
        which = "the version asked for" if version is not None else "the registry's latest version"
        return 0, f"{server.qualified_name} is already at {server.version}, {which}."
    stored = await asyncio.to_thread(runtime.store.env_values, server.server_id)
    if GRANT_KEY in stored:
        return 1, f"{server.qualified_name} signs in with OAuth: remove it and add it again to update it."
    await runtime.connections.learn_stored_secrets()
    secret = {k.key for k in server.env_keys if k.secret}
    env_refs = {k: runtime.refs.mint(k, v) for k, v in stored.items() if k in secret and v.reveal()}
    env = {k: v.reveal() for k, v in stored.items() if k not in secret}
    args = {"qualified_name": server.qualified_name, "env_refs": env_refs, "env": env, "package": server.package_type}
    if version is not None:
        args["version"] = version
    if source:
        args["source"] = source
    io = TerminalIO(runtime.broker, consents=runtime.consents)
    ctx = CallContext(installed_by=server.installed_by, present_consent=io.present_consent)
    try:
        result = await runtime.service.install_and_connect(args, ctx, replaces=server.server_id)
    except SetupError as exc:
        return 1, f"{detail.version} did not answer ({exc.code}: {exc.message}); {server.version} stays installed."
    await runtime.connections.retire(server.server_id)  # its row went in the commit
    return 0, (f"Updated {server.qualified_name} from {server.version} to {detail.version} "
               f"({len(result.get('tools') or [])} tools).")  # fmt: skip
