"""``mcp-setup allow SERVER HOST:PORT``: the one step that lets a server reach a destination its
proxy refused (a loopback or private service, or a new one of a strict server), and the
network lines ``mcp-setup show`` and ``doctor`` print (setup_agent/launch/net_words.py).

``mcp-setup allow SERVER --sampling no|text|tools``: whether the server may ask your AI to write
text, and with tools (setup_agent/store/sampling.py). Both are audited as the person at the
terminal (:data:`BY`); a name that is not installed exits 3 as in every other command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from setup_agent.errors import SetupError

from .readonly import EXIT_NOT_FOUND, NotFound, open_store, resolve

if TYPE_CHECKING:
    from app.settings import Settings
    from setup_agent.store import InstalledServer, Sampling

__all__ = ["BY", "add_allow_parser", "network_lines", "run_allow", "sampling_line"]

#: Who the audit says changed a server's network or sampling: the person at this terminal.
BY = "user:terminal"


def add_allow_parser(sub: Any) -> None:
    p = sub.add_parser(
        "allow",
        help="let an installed server reach HOST:PORT, or choose whether it may ask your AI to write text",
        description="Allow a sandboxed server to connect to HOST:PORT: a service on this computer or your "
        "network, or a new destination of a server limited to 'only these'. It restarts with it allowed. "
        "With --sampling: whether the server may ask your AI to write text (no; text: yes, without tools; "
        "tools: yes, with tools). That takes effect at its next request, without a restart.",
    )
    p.add_argument("name", help="server id, qualified name or slug")
    p.add_argument("destination", nargs="?", help="HOST:PORT, e.g. 127.0.0.1:5432 or api.example.com:443")
    p.add_argument(
        "--sampling",
        choices=("no", "text", "tools"),
        help="may it ask your AI to write text: no, text (yes, without tools) or tools (yes, with tools)",
    )


def run_allow(settings: Settings, args: argparse.Namespace) -> int:
    if (args.destination is None) == (args.sampling is None):
        print("mcp-setup: give either HOST:PORT or --sampling no|text|tools.", file=sys.stderr)
        return 2
    if args.sampling is not None:
        return _allow_sampling(settings, args.name, args.sampling)
    from setup_agent.launch import allowing

    def allow(store: Any, server: InstalledServer) -> str:
        if not server.launch_spec.get("sandbox_network", True):
            raise SetupError(f"{server.qualified_name} has no network (chosen in its consent).")
        store.servers.set_network(server.server_id, allowing(server.launch_spec, args.destination), actor=BY)
        return f"{server.qualified_name} may now connect to {args.destination}; running mcp-setup sessions restart it."

    return _change(settings, args.name, allow)


def _allow_sampling(settings: Settings, name: str, sampling: Sampling) -> int:
    from setup_agent.store import SAMPLING_LABEL, SAMPLING_WORDS

    def allow(store: Any, server: InstalledServer) -> str:
        store.servers.set_sampling(server.server_id, sampling, actor=BY)
        return f"{server.title or server.qualified_name}: {SAMPLING_LABEL}: {SAMPLING_WORDS[sampling].lower()}."

    return _change(settings, name, allow)


def _change(settings: Settings, name: str, change: Callable[[Any, InstalledServer], str]) -> int:
    """``change`` made to the installed server ``name`` and the words it returns printed (exit 0);
    no server of that name (exit :data:`EXIT_NOT_FOUND`) or a refusal (exit 1) said on stderr."""
    try:
        with open_store(settings) as store:
            said = change(store, resolve(store, name))
    except NotFound as exc:
        print(f"mcp-setup: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except SetupError as exc:
        print(f"mcp-setup: {exc.message}", file=sys.stderr)
        return 1
    print(said)
    return 0


def sampling_line(server: InstalledServer) -> str:
    """The setting as ``show`` prints it, with the command that changes it."""
    from setup_agent.store import SAMPLING_LABEL, SAMPLING_WORDS

    return (
        f"{SAMPLING_LABEL}: {SAMPLING_WORDS[server.sampling].lower()} "
        f"(change it: mcp-setup allow {server.slug} --sampling no|text|tools)"
    )


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
