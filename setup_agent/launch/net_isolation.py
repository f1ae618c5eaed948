"""Which mechanism keeps a sandboxed server's network to mcp-setup's proxy here, and why.

- ``bwrap-netns``: bubblewrap runs (the sandbox's trial start already unshares the network), so
  each server gets a network namespace of its own with only its loopback, and the proxy's
  socket handed in (:mod:`setup_agent.launch.netns`). The host's loopback listeners, its abstract
  unix sockets (X11, D-Bus) and every address are out of reach but through the proxy.
- ``landlock-net``: no bubblewrap, Landlock with TCP rules (ABI ≥ 4): the server runs in the
  host's network, its TCP connections limited to the port of a proxy listener on the host's
  loopback (:func:`landlock_network`). Weaker, and said so: the rule names a port, not an
  address; UDP (so DNS) is not covered; abstract unix sockets are scoped only from ABI 6.
- ``none``: nothing restricts the network (no sandbox, or Landlock without TCP rules); every
  face says so plainly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .landlock import NET_ABI, abi_version, network_rules
from .netns import host_netns
from .netns_bootstrap import proxy_environment

__all__ = ["NetIsolation", "NetMechanism", "landlock_network", "network_isolation"]

NetMechanism = Literal["bwrap-netns", "landlock-net", "none"]


@dataclass(frozen=True)
class NetIsolation:
    mechanism: NetMechanism
    #: Why this one, for ``doctor`` and the logs.
    why: str

    @property
    def words(self) -> str:
        """The consent's line about the network, in plain words."""
        if self.mechanism == "bwrap-netns":
            return "Network: only through mcp-setup, to the destinations you allow."
        if self.mechanism == "landlock-net":
            return (
                "Network: TCP only through mcp-setup, to the destinations you allow "
                "(other traffic, such as DNS, is not restricted on this system)."
            )
        return "Network: not restricted on this system."


def network_isolation(
    sandbox_mechanism: str,
    *,
    landlock_abi: Callable[[], int] = abi_version,
    netns: Callable[[], int] = host_netns,
) -> NetIsolation:
    """The network mechanism that goes with the sandbox's (``Sandbox.mechanism``: ``bwrap``,
    ``landlock`` or ``none``); the Landlock ABI and the host's namespace are seams for tests."""
    if sandbox_mechanism == "bwrap":
        try:
            netns()
        except OSError as exc:
            return NetIsolation("none", f"bubblewrap runs, but this system hides network namespaces ({exc.strerror})")
        return NetIsolation(
            "bwrap-netns", "bubblewrap: a network namespace of its own, out only through mcp-setup's proxy"
        )
    if sandbox_mechanism == "landlock":
        abi = landlock_abi()
        if abi >= NET_ABI:
            scoped = "abstract unix sockets scoped" if abi >= 6 else "abstract unix sockets not scoped (ABI 6)"
            return NetIsolation(
                "landlock-net",
                f"Landlock ABI {abi}: TCP only to mcp-setup's proxy port; UDP not restricted; {scoped}",
            )
        return NetIsolation("none", f"Landlock ABI {abi} has no TCP rules (ABI {NET_ABI}, Linux 6.7, is needed)")
    return NetIsolation("none", "no sandbox runs here, so nothing restricts a server's network")


def landlock_network(proxy_port: int) -> tuple[dict, dict[str, str]]:
    """For ``landlock-net``: the ``RULES`` keys to merge into the launcher's rules and the variables
    to add to the server's environment, for a proxy listening on the host's ``127.0.0.1:proxy_port``."""
    return network_rules([proxy_port]), proxy_environment(proxy_port)
