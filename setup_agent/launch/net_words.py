"""A server's network in plain words, for the consent, ``mcp-setup show``, ``doctor`` and the page.

The person's settings live in the launch spec's ``sandbox_net``: the policy
(:meth:`NetPolicy.to_dict`) and ``seen``, the destinations its test-connect reached (what
"only these" allowed). :func:`allowing` is the one step that allows a refused destination
(``mcp-setup allow SERVER HOST:PORT``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .net_policy import Endpoint, NetPolicy
from .net_record import Attempt

__all__ = ["allowing", "network_words", "seen_destinations", "after_test_words"]

_CONTAINER_RUNNERS = ("docker", "podman")


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
