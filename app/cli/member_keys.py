"""``mcp-setup settings NAME``: a server's settings by name, and which of them each member of a
team gateway enters for themselves.

``--per-member KEY`` marks a key per member (each person's own token: a member is asked for their
value at their first call, and only their calls use it); ``--shared KEY`` makes it shared again
(the members' values of it are deleted); ``--forget-member NAME`` deletes one member's values of
this server (they are asked again at their next call). Names only: no value is ever printed.
Every change is audited and reaches every ``serve`` on the database at its next change read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = ["add_settings_parser", "run_settings"]


def add_settings_parser(sub: Any) -> None:
    p = sub.add_parser(
        "settings",
        help="show a server's settings; mark keys each team member enters for themselves",
        description="Show an installed server's settings (names only), and mark the keys each member of a team "
        "gateway (a named token) enters for themselves at their first call: nobody else's calls use their value.",
    )
    p.add_argument("name", help="installed server: id, qualified name or slug")
    p.add_argument("--per-member", action="append", default=[], metavar="KEY", help="mark KEY per member (repeatable)")
    p.add_argument("--shared", action="append", default=[], metavar="KEY", help="make KEY shared again (repeatable)")
    p.add_argument("--forget-member", default=None, metavar="MEMBER", help="delete this member's values of the server")
    p.add_argument("--json", action="store_true", help="print JSON")


def run_settings(settings: Settings, args: argparse.Namespace) -> int:
    from setup_agent.errors import SetupError

    from .servers import _resolve, _store

    try:
        with _store(settings) as store:
            server = _resolve(store, args.name)
            known = {k.key for k in server.env_keys} | set(server.member_keys) | _template_keys(server.launch_spec)
            wanted = (set(server.member_keys) | set(args.per_member)) - set(args.shared)
            if any(k not in known for k in args.per_member):
                print(
                    f"mcp-setup: {server.slug} takes no such setting; its settings: {', '.join(sorted(known))}",
                    file=sys.stderr,
                )
                return 1
            if wanted != set(server.member_keys):
                store.values.set_member_keys(server.server_id, sorted(wanted), actor="user:terminal")
            forgot = (
                store.values.forget_member_values(args.forget_member, server.server_id, actor="user:terminal")
                if args.forget_member
                else 0
            )
            server = store.servers.get(server.server_id) or server
            members = store.values.members_of(server.server_id)
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    rows = [
        {
            "key": k,
            "secret": any(e.key == k and e.secret for e in server.env_keys),
            "per_member": k in server.member_keys,
            "shared_value": any(e.key == k for e in server.env_keys),
            "members_with_value": sorted(m for m, keys in members.items() if k in keys),
        }
        for k in sorted(known)
    ]
    if args.json:
        print(
            json.dumps({"server_id": server.server_id, "settings": rows, "forgotten": forgot}, indent=2, sort_keys=True)
        )
        return 0
    print(f"{server.slug} ({server.qualified_name})")
    for row in rows:
        kind = "per member" if row["per_member"] else "shared"
        extra = (
            f"; own values: {', '.join(row['members_with_value'])}"
            if row["per_member"] and row["members_with_value"]
            else ""
        )
        print(f"  {row['key']}: {kind}{' (secret)' if row['secret'] else ''}{extra}")
    if args.forget_member:
        print(f"Deleted {forgot} value(s) of token:{args.forget_member}; they are asked again at their next call.")
    return 0


def _template_keys(spec: dict[str, Any]) -> set[str]:
    """The ``${KEY}`` names a launch spec templates (a key with no shared value is still a setting)."""
    import re

    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}", json.dumps(spec))) - {"__dirname"}
