"""``mcp-setup allow SERVER HOST:PORT``: the one step that lets a server reach a destination its
proxy refused (a loopback or private service, or a new one of a strict server), and the
network lines ``mcp-setup show`` and ``doctor`` print (setup_agent/launch/net_words.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from setup_agent.errors import SetupError

from .readonly import NotFound, open_store, resolve

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = ["add_allow_parser", "network_lines", "run_allow"]


def add_allow_parser(sub: Any) -> None:
    p = sub.add_parser(
        "allow",
        help="let an installed server reach HOST:PORT (a refused destination)",
        description="Allow a sandboxed server to connect to HOST:PORT: a service on this computer or your "
        "network, or a new destination of a server limited to 'only these'. It restarts with it allowed.",
    )
    p.add_argument("name", help="server id, qualified name or slug")
    p.add_argument("destination", help="HOST:PORT, e.g. 127.0.0.1:5432 or api.example.com:443")


def run_allow(settings: Settings, args: argparse.Namespace) -> int:
    from setup_agent.launch import allowing

    try:
        with open_store(settings) as store:
            server = resolve(store, args.name)
            if not server.launch_spec.get("sandbox_network", True):
                print(f"mcp-setup: {server.qualified_name} has no network (chosen in its consent).", file=sys.stderr)
                return 1
            policy = allowing(server.launch_spec, args.destination)
            store.servers.set_network(server.server_id, policy, actor="cli")
    except NotFound as exc:
        print(f"mcp-setup: {exc}", file=sys.stderr)
        return 4
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    print(f"{server.qualified_name} may now connect to {args.destination}; running mcp-setup sessions restart it.")
    return 0


def net_mechanism(settings: Settings) -> tuple[str, str]:
    """The network mechanism this machine runs now, and why (found as app.runtime's sandbox finds it)."""
    from setup_agent.launch import Sandbox

    sandbox = Sandbox(
        settings.sandbox, hide=(Path(settings.home).expanduser(),), user_home=Path.home(), host_env=dict(os.environ)
    )
    isolation = sandbox.network_isolation()
    return isolation.mechanism, isolation.why


def network_lines(settings: Settings, spec: dict[str, Any]) -> list[str]:
    from setup_agent.launch import network_words

    return network_words(spec, net_mechanism(settings)[0])
