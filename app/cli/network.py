"""``mcp-setup allow SERVER HOST:PORT``: the one step that lets a server reach a destination its
proxy refused (a loopback or private service, or a new one of a strict server), and the
network lines ``mcp-setup show`` and ``doctor`` print (setup_agent/launch/net_words.py).

``mcp-setup allow SERVER --only-tested``: "only these", the server held to the destinations its
test connected to (stored at install), any other refused; ``--public-internet`` lets it reach the
public internet again (the default policy). What was allowed one by one stays allowed; a running
server restarts under the new policy; audited as the person at the terminal.

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

__all__ = [
    "BY",
    "add_allow_parser",
    "network_lines",
    "network_step_line",
    "only_these_hint",
    "run_allow",
    "sampling_line",
]

#: Who the audit says changed a server's network or sampling: the person at this terminal.
BY = "user:terminal"


def add_allow_parser(sub: Any) -> None:
    p = sub.add_parser(
        "allow",
        help="let an installed server reach HOST:PORT or only what its test reached, or choose whether it may ask "
        "your AI to write text",
        description="Allow a sandboxed server to connect to HOST:PORT: a service on this computer or your "
        "network, or a new destination of a server limited to 'only these'. It restarts with it allowed. "
        "With --only-tested: only the destinations it connected to during its test, any other refused "
        "(--public-internet: the public internet again, the default); what you allowed one by one stays "
        "allowed, and it restarts under the new policy. "
        "With --sampling: whether the server may ask your AI to write text (no; text: yes, without tools; "
        "tools: yes, with tools). That takes effect at its next request, without a restart.",
    )
    p.add_argument("name", help="server id, qualified name or slug")
    p.add_argument("destination", nargs="?", help="HOST:PORT, e.g. 127.0.0.1:5432 or api.example.com:443")
    p.add_argument(
        "--only-tested",
        action="store_true",
        help="only the destinations it connected to during its test ('only these'); any other is refused",
    )
    p.add_argument(
        "--public-internet",
        action="store_true",
        help="the public internet again, nothing on this computer or your network (the default policy)",
    )
    p.add_argument(
        "--sampling",
        choices=("no", "text", "tools"),
        help="may it ask your AI to write text: no, text (yes, without tools) or tools (yes, with tools)",
    )


def run_allow(settings: Settings, args: argparse.Namespace) -> int:
    given = [args.destination is not None, args.sampling is not None, args.only_tested, args.public_internet]
    if sum(given) != 1:
        print(
            "mcp-setup: give one of HOST:PORT, --only-tested, --public-internet or --sampling no|text|tools.",
            file=sys.stderr,
        )
        return 2
    if args.sampling is not None:
        return _allow_sampling(settings, args.name, args.sampling)
    if args.only_tested or args.public_internet:
        return _hold_to_tested(settings, args.name, only=args.only_tested)
    from setup_agent.launch import allowing

    def allow(store: Any, server: InstalledServer) -> str:
        if not server.launch_spec.get("sandbox_network", True):
            raise SetupError(f"{server.qualified_name} has no network (chosen in its consent).")
        store.servers.set_network(server.server_id, allowing(server.launch_spec, args.destination), actor=BY)
        return f"{server.qualified_name} may now connect to {args.destination}; running mcp-setup sessions restart it."

    return _change(settings, args.name, allow)


def _hold_to_tested(settings: Settings, name: str, *, only: bool) -> int:
    from setup_agent.launch import holding_to_tested

    def hold(store: Any, server: InstalledServer) -> str:
        label = server.title or server.qualified_name
        policy = holding_to_tested(server.launch_spec, only, label)
        store.servers.set_network(server.server_id, policy, actor=BY)
        if only:
            return (
                f"{label} may now connect only to {', '.join(policy['only'])} (what it connected to during its "
                f"test){_and_allowed(policy)}; anything else is refused. Running mcp-setup sessions restart it."
            )
        return (
            f"{label} may now connect to the public internet again (nothing on this computer or your "
            f"network){_and_allowed(policy)}. Running mcp-setup sessions restart it."
        )

    return _change(settings, name, hold)


def _and_allowed(policy: dict[str, Any]) -> str:
    granted = policy.get("granted") or []
    return f", and to what you allowed: {', '.join(granted)}" if granted else ""


def network_step_line(server: InstalledServer) -> str | None:
    """The one step that changes its policy, as ``show`` prints it (None: nothing to choose)."""
    from setup_agent.launch import network_state

    state = network_state(server.launch_spec)
    if state is None:
        return None
    if state.may_hold_to_tested:
        return f"Only these (what its test connected to): mcp-setup allow {server.slug} --only-tested"
    if state.mode == "strict":
        return f"The public internet again: mcp-setup allow {server.slug} --public-internet"
    return None


def only_these_hint(server: InstalledServer) -> str | None:
    """After an install in the terminal: where its test connected, and the one step to "only these"
    (None: nothing to hold it to, or it is held already)."""
    from setup_agent.launch import network_state

    state = network_state(server.launch_spec)
    if state is None or not state.may_hold_to_tested or state.tested is None:
        return None
    return (
        f"During its test it connected to {', '.join(state.tested)}. To let it connect only to these: "
        f"mcp-setup allow {server.slug} --only-tested"
    )


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
