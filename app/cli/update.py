"""``mcp-setup update NAME [--version V]``: the registry's newer version (or exactly V), swapped in only if it answers.

1. The registry's current detail of NAME (with ``--version V``, exactly V's, from the source the
   server came from; Smithery keeps no versions, so V fails there, plainly); nothing to do when
   the installed version is it. A V the registry does not have: exit 1, nothing changed.
2. The old install steps aside: its row goes (its install dir is moved aside, not deleted),
   since the service tests and installs only a server that is not installed.
3. The new version is installed with the stored settings (secrets as fresh refs, as if
   typed again), after the user's consent in this terminal; the install saves nothing unless
   the server answered its test. If it did not, the old row and dir are put back as they
   were (same server id and slug). Running faces see the old server leave and come back.

Servers that signed in with OAuth are not updated here (their grant is bound to the old
install): remove and add them again.
"""

from __future__ import annotations

import asyncio
import shutil
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
    except RegistryNotFound as exc:
        if version is None:
            raise
        return 1, (f"No version {version} of {server.qualified_name} in {source or 'the registries'} ({exc}); "
                   f"{server.version} stays installed.")  # fmt: skip
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
    # The service tests only servers that are not installed: the old row steps aside (its dir
    # moved, its sign-in kept), and comes back as it was unless the new version answered.
    old_dir = runtime.connections.install_dir(server.server_id)
    aside = old_dir.with_name(old_dir.name + ".pre-update")
    if old_dir.exists():
        await asyncio.to_thread(old_dir.rename, aside)
    await runtime.connections.remove(server.server_id)
    try:
        result = await runtime.service.install_and_connect(args, ctx)
    except BaseException as exc:
        await asyncio.to_thread(_restore, runtime, server, stored, aside, old_dir)
        if isinstance(exc, SetupError):
            return 1, f"{detail.version} did not answer ({exc.code}: {exc.message}); {server.version} stays installed."
        raise
    await asyncio.to_thread(shutil.rmtree, aside, True)
    return 0, (f"Updated {server.qualified_name} from {server.version} to {detail.version} "
               f"({len(result.get('tools') or [])} tools).")  # fmt: skip


def _restore(runtime: Any, server: InstalledServer, stored: dict, aside: Any, old_dir: Any) -> None:
    runtime.store.install(
        server_id=server.server_id, qualified_name=server.qualified_name, source=server.source,
        version=server.version, package_type=server.package_type, launch_spec=server.launch_spec,
        installed_by=server.installed_by, tools_hash=server.tools_hash, title=server.title, tools=server.tools,
        env={k: (v, k in {e.key for e in server.env_keys if e.secret}) for k, v in stored.items()},
    )  # fmt: skip
    if aside.exists():
        shutil.rmtree(old_dir, ignore_errors=True)
        aside.rename(old_dir)
