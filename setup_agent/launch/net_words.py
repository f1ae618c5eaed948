"""A server's network in plain words, for the consent, ``mcp-setup show``, ``doctor`` and the page.

The person's settings live in the launch spec's ``sandbox_net``: the policy
(:meth:`NetPolicy.to_dict`) and ``seen``, the destinations its test-connect reached (what
"only these" allows), stored at install. :func:`allowing` is the one step that allows a refused
destination (``mcp-setup allow SERVER HOST:PORT``); :func:`holding_to_tested` the one that holds
an installed server to what its test reached, or lets it reach the public internet again
(``mcp-setup allow SERVER --only-tested`` / ``--public-internet``, the card's Network part), where
:func:`network_state` says which it is now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setup_agent.errors import InvalidInput

from .net_policy import Endpoint, NetMode, NetPolicy
from .net_record import Attempt

__all__ = [
    "NetworkState",
    "after_test_words",
    "allowing",
    "holding_to_tested",
    "network_state",
    "network_words",
    "seen_destinations",
]

_CONTAINER_RUNNERS = ("docker", "podman")
#: The network mechanisms that hold a server's connections to mcp-setup's proxy (net_isolation.py).
_HELD = ("bwrap-netns", "landlock-net")


def seen_destinations(attempts: Iterable[Attempt]) -> list[str]:
    """The destinations a test reached (allowed and connected), as the person reads them."""
    return [a.destination for a in attempts if a.allowed and a.reached]


def after_test_words(attempts: Sequence[Attempt]) -> list[str]:
    """What a test-connect's proxy saw, for the consent after it."""
    reached = seen_destinations(attempts)
    refused = [a.destination for a in attempts if not a.allowed]
    lines = []
    if reached:
        lines.append(f"During the test it connected to {', '.join(reached)}.")
    else:
        lines.append("During the test it connected to nothing on the network.")
    if refused:
        lines.append(f"mcp-setup refused it: {', '.join(refused)}.")
    return lines


def network_words(spec: Mapping[str, Any], mechanism: str) -> list[str]:
    """``spec`` (a launch spec as stored) under the network ``mechanism`` (``bwrap-netns``,
    ``landlock-net``, ``none``): the policy, how it is held, the destinations its test used."""
    if not spec.get("command"):
        return []
    runner = spec.get("runner") or spec.get("command")
    if runner in _CONTAINER_RUNNERS:
        return ["Network: its container's (Docker decides it)."]
    net = dict(spec.get("sandbox_net") or {})
    if not spec.get("sandbox_network", True):
        policy = NetPolicy.none()
    else:
        policy = NetPolicy.from_dict(net) if net else NetPolicy.default()
    if policy.mode == "none":
        return ["Network: none."]
    if spec.get("transport", "stdio") != "stdio":
        how = "Network: not restricted (it serves HTTP on this computer, where mcp-setup reaches it)."
    elif mechanism == "bwrap-netns":
        how = "Network: its own, out only through mcp-setup's proxy (bwrap-netns)."
    elif mechanism == "landlock-net":
        how = "Network: TCP only through mcp-setup's proxy (landlock-net; DNS and UDP are not restricted here)."
    else:
        how = "Network: not restricted on this system (no network sandbox here)."
    if policy.mode == "strict":
        only = ", ".join(map(str, sorted(policy.only))) or "nothing"
        rule = f"Network policy: only these: {only}."
    else:
        rule = "Network policy: the public internet; nothing on this computer or your local network."
    lines = [how, rule]
    if policy.granted:
        lines.append(f"You allowed: {', '.join(map(str, sorted(policy.granted)))}.")
    if seen := net.get("seen"):
        lines.append(f"During its test it connected to {', '.join(map(str, seen))}.")
    return lines


def allowing(spec: Mapping[str, Any], destination: str) -> dict[str, Any]:
    """``spec``'s ``sandbox_net`` with ``destination`` allowed: granted (so a loopback or
    private one is reached too) and, for a strict server, on its list."""
    endpoint = Endpoint.parse(destination)
    net = dict(spec.get("sandbox_net") or {})
    policy = NetPolicy.from_dict(net) if net else NetPolicy.default()
    granted = {*policy.granted, endpoint}
    if policy.mode == "strict":
        updated = NetPolicy.strict({*policy.only, endpoint}, granted)
    else:
        updated = NetPolicy.default(granted)
    return {**net, **updated.to_dict()}


@dataclass(frozen=True)
class NetworkState:
    """An installed server's network as the person may change it after install: ``mode`` its
    policy now (``default``: the public internet; ``strict``: only its list; ``none``),
    ``tested`` where its test connected (None: no test went through mcp-setup's proxy), ``only``
    a strict server's list, ``allowed`` what the person allowed beyond the policy; ``held``
    False where nothing holds a server's network to mcp-setup's proxy on this system (the policy
    is kept, but not enforced here)."""

    mode: NetMode
    tested: tuple[str, ...] | None
    only: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    held: bool = True

    @property
    def may_hold_to_tested(self) -> bool:
        """Whether "Allow only these" is one step away: the public internet now, and a test's list to hold it to."""
        return self.mode == "default" and bool(self.tested)

    def public(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "tested": None if self.tested is None else list(self.tested),
            "only": list(self.only),
            "allowed": list(self.allowed),
            "may_hold_to_tested": self.may_hold_to_tested,
            "held": self.held,
        }


def network_state(spec: Mapping[str, Any], mechanism: str | None = None) -> NetworkState | None:
    """``spec``'s (a launch spec as stored) network as :class:`NetworkState` under the network
    ``mechanism`` of this system (``bwrap-netns``, ``landlock-net``, ``none``; None: not asked);
    None where mcp-setup's proxy never holds it (a remote, a container, a local package that
    serves HTTP)."""
    runner = spec.get("runner") or spec.get("command")
    if not spec.get("command") or runner in _CONTAINER_RUNNERS or spec.get("transport", "stdio") != "stdio":
        return None
    net = dict(spec.get("sandbox_net") or {})
    seen = net.get("seen")
    tested = tuple(map(str, seen)) if isinstance(seen, list) else None
    held = mechanism is None or mechanism in _HELD
    if not spec.get("sandbox_network", True):
        return NetworkState("none", tested, held=held)
    policy = NetPolicy.from_dict(net) if net else NetPolicy.default()
    allowed = tuple(map(str, sorted(policy.granted)))
    return NetworkState(policy.mode, tested, tuple(map(str, sorted(policy.only))), allowed, held)


def holding_to_tested(spec: Mapping[str, Any], only: bool, name: str) -> dict[str, Any]:
    """``spec``'s ``sandbox_net`` held to the destinations its test connected to ("only these",
    strict) or, with ``only`` False, back to the default (the public internet). What the person
    allowed (:func:`allowing`) stays allowed either way, and the test's list stays beside it.
    Refused, in words naming the server ``name``, where there is no such choice."""
    state = network_state(spec)
    if state is None:
        raise InvalidInput(
            f"{name}'s network is not held by mcp-setup's proxy (a remote server, a container, or a server "
            "that serves HTTP on this computer): there is nothing to choose."
        )
    if state.mode == "none":
        raise InvalidInput(f"{name} has no network (chosen in its consent): there is nothing to choose.")
    net = dict(spec.get("sandbox_net") or {})
    granted = NetPolicy.from_dict(net).granted if net else frozenset()
    if not only:
        return {**net, **NetPolicy.default(granted).to_dict()}
    if state.tested is None:
        raise InvalidInput(
            f"mcp-setup did not see where {name} connected during a test (it was not tested through "
            "mcp-setup's proxy), so there is no list to hold it to. Allow each destination it needs with "
            "mcp-setup allow NAME HOST:PORT, or test and install it again."
        )
    if not state.tested:
        raise InvalidInput(
            f"During its test {name} connected to nothing on the network, so there is no list to hold it to."
        )
    return {**net, **NetPolicy.strict(state.tested, granted).to_dict()}
