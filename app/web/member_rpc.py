"""A member's own keys on their own channel: ``/rpc`` methods a named token
(``token:NAME``) calls for itself, never for another member.

* ``my_keys.list`` ``{}`` → ``{servers: [{server_id, qualified_name, per_member, have}]}``: the
  servers with per-member keys and which of them the caller has a value for (names only);
* ``my_keys.set`` ``{server_id, key_name}`` → ``{status: "pending", url, prompt_id}``: a one-time
  secret link on which the member enters (or replaces: a rotation) their own value; their sessions
  restart with it;
* ``my_keys.remove`` ``{server_id, key_name?}`` → ``{removed}``: their values deleted (one key, or
  every key of the server); their sessions end, and their next call asks again.

Any other caller (the user's page, this run's token) is refused: these are a member's own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from setup_agent.errors import InvalidInput, NotFound

from .security import current_principal

__all__ = ["MEMBER_METHODS", "member_call"]

MEMBER_METHODS = ("my_keys.list", "my_keys.set", "my_keys.remove")


async def member_call(runtime: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    principal = current_principal()
    members = getattr(runtime.gateway, "members", None)
    if principal is None or principal.kind != "member" or members is None:
        raise InvalidInput("Only a member's named token has keys of its own (mcp-setup token create NAME).")
    member, store = principal.name, runtime.store
    if any(k not in ("server_id", "key_name") for k in params):
        raise InvalidInput("Unknown parameter: these methods take server_id and key_name.")
    if method == "my_keys.list":
        servers = await asyncio.to_thread(store.servers.list)
        have = await asyncio.to_thread(store.values.member_keys_set, member)
        return {
            "servers": [
                {
                    "server_id": s.server_id,
                    "qualified_name": s.qualified_name,
                    "per_member": list(s.member_keys),
                    "have": have.get(s.server_id, []),
                }
                for s in servers
                if s.member_keys
            ]
        }
    server_id, key = params.get("server_id"), params.get("key_name")
    server = await asyncio.to_thread(store.servers.get, server_id) if isinstance(server_id, str) else None
    if server is None or not server.member_keys:
        raise NotFound("No installed server with per-member keys has that id; my_keys.list lists them.")
    if key is not None and key not in server.member_keys:
        raise InvalidInput("That is not a per-member key of this server; my_keys.list lists them.")
    if method == "my_keys.remove":
        done = await asyncio.to_thread(store.values.forget_member_values, member, server.server_id, key)
        return {"removed": done}
    if key is None:
        raise InvalidInput("key_name is required: which of the server's per-member keys to set.")
    prompt_id, url = members.prompts.open_for(server, member, key)
    return {
        "status": "pending",
        "prompt_id": prompt_id,
        "url": url,
        "message": "Open the link to enter your own value; only your calls use it.",
    }
