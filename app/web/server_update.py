"""A server card's "Update" at ``/rpc``, through the core's
:func:`setup_agent.setup.update_offer` / :func:`~setup_agent.setup.update_server`, the calls
``mcp-setup update`` makes:

* ``servers.update_check {server_id}`` → ``{server_id, installed, latest, newer}``: the registry's
  current version, from the source the server came from;
* ``servers.update {server_id}`` → ``{updated, server_id, version, tools, message}``: that version
  is tested and installed with the stored settings; the consent opens in this tab as a modal and
  the update waits for the person's answer; progress goes to the tab as an install's does; the
  swap is one transaction and the old version stays installed and running when the new one does
  not answer. The person (or an admin token) only.
"""

from __future__ import annotations

from typing import Any

from setup_agent.errors import InvalidInput
from setup_agent.setup import CallContext, update_offer, update_server

from .security import require_user

__all__ = ["UPDATE_METHODS", "server_update"]

UPDATE_METHODS = ("servers.update_check", "servers.update")


async def server_update(
    runtime: Any, method: str, params: dict[str, Any], hub: Any, audience: str | None
) -> dict[str, Any]:
    server_id = params.get("server_id")
    if not isinstance(server_id, str) or not server_id or set(params) - {"server_id"}:
        raise InvalidInput(f"{method} takes one server_id.")
    if method == "servers.update_check":
        return (await update_offer(runtime.service, server_id)).public()
    require_user("updates a server")
    offer = await update_offer(runtime.service, server_id)  # NotFound for an id no server has

    async def present(pending: Any) -> dict[str, Any]:  # the modal in this tab; the person answers there
        hub.announce_consent(pending, audience=audience)
        try:
            await runtime.consents.wait(pending.consent_id, timeout=runtime.settings.secret_prompt_timeout_seconds)
        except TimeoutError:
            return {"status": "pending"}
        return {}

    ctx = CallContext(  # it stays installed by whoever installed it; the person pressed Update
        installed_by=offer.server.installed_by,
        asked_by="ui",
        on_progress=hub.progress_to(audience),
        present_consent=present,
    )
    return await update_server(runtime.service, offer, ctx)
