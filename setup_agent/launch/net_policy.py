"""Where a sandboxed server may connect: the person's choice, checked on every connection.

A server in its own network namespace reaches out only through mcp-setup's proxy
(:mod:`setup_agent.launch.net_proxy`), which asks this policy about each destination. The policy
is pure: it parses what the server asked for, and decides on the *addresses* the name resolved to,
so a name that resolves to loopback is refused like ``127.0.0.1`` itself, and the proxy connects
to the address that was checked (no second resolution, no DNS-rebinding window).

Modes, decided per server by the person:

- **default**: the public internet; loopback, private ranges (RFC 1918, CGNAT ``100.64/10``, ULA
  ``fc00::/7``), link-local, cloud metadata, unspecified, multicast and reserved addresses are
  refused, in every spelling (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``,
  ``[::1]``, ``[::ffff:127.0.0.1]``, ``localhost``), unless the person **granted** that exact
  ``host:port`` (by name as asked, or by address);
- **strict**: only the listed ``host:port``s (``only``, e.g. what the test-connect recorded);
  a listed public name still has to resolve to a public address unless it is also granted;
- **none**: nothing.

A name that the policy refuses before resolution (strict and unlisted, no network, a metadata
name) is never resolved: a DNS query is itself a way out. ``localhost`` is never asked of DNS
either: it is loopback (RFC 6761).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from setup_agent.errors import InvalidInput

__all__ = [
    "REASONS",
    "Endpoint",
    "IPAddress",
    "Lookup",
    "NetMode",
    "NetPolicy",
    "Verdict",
    "address_class",
    "normalize_host",
    "parse_address",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NetMode = Literal["default", "strict", "none"]

#: Why a destination was allowed or refused, in words for the 403 body, the record and the page.
REASONS: dict[str, str] = {
    "public": "a public address",
    "granted": "allowed by you",
    "listed": "on this server's list",
    "loopback": "a loopback address (this computer)",
    "private": "a private network address",
    "shared": "a carrier-grade NAT address (a private network)",
    "link-local": "a link-local address",
    "metadata": "a cloud metadata address",
    "unspecified": "the unspecified address (this computer)",
    "multicast": "a multicast address",
    "broadcast": "the broadcast address",
    "reserved": "a reserved address, not on the public internet",
    "no-network": "this server has no network",
    "not-listed": "not on this server's list of destinations",
    "invalid": "not a valid host and port",
    "unresolved": "a name that does not resolve",
}

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

#: Cloud metadata services: checked before the ranges that hold them.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS VPC DNS
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",  # AWS VPC DNS over IPv6
    )
)
#: Names of metadata services: refused without a lookup.
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)

#: Non-public IPv4 ranges, most specific first (the first match names the reason).
_V4_RANGES: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "unspecified"),  # "this network": Linux connects 0.x to this computer
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("100.64.0.0/10"), "shared"),
    (_V4("169.254.0.0/16"), "link-local"),
    (_V4("192.0.0.0/24"), "reserved"),  # IETF protocol assignments
    (_V4("192.0.2.0/24"), "reserved"),  # documentation
    (_V4("198.51.100.0/24"), "reserved"),
    (_V4("203.0.113.0/24"), "reserved"),
    (_V4("198.18.0.0/15"), "reserved"),  # benchmarking, often inside networks
    (_V4("192.88.99.0/24"), "reserved"),  # old 6to4 relays
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("255.255.255.255/32"), "broadcast"),
    (_V4("240.0.0.0/4"), "reserved"),
)
#: Non-public IPv6 ranges; an address outside 2000::/3 that none of these names is "reserved".
_V6_RANGES: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("fc00::/7"), "private"),  # unique local
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "private"),  # site-local, deprecated
    (_V6("ff00::/8"), "multicast"),
    (_V6("64:ff9b:1::/48"), "private"),  # local-use NAT64
    (_V6("2001::/32"), "reserved"),  # Teredo: the IPv4 inside is obfuscated
    (_V6("2001:db8::/32"), "reserved"),  # documentation
    (_V6("2001::/23"), "reserved"),  # IETF protocol assignments
    (_V6("100::/64"), "reserved"),  # discard
)
_NAT64 = _V6("64:ff9b::/96")
_SIXTOFOUR = _V6("2002::/16")
_GLOBAL_UNICAST = _V6("2000::/3")

_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_PART = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


def address_class(address: IPAddress) -> str:
    """``"public"`` or the reason an address is not (a key of :data:`REASONS`).

    An IPv6 address that carries an IPv4 one (mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``,
    6to4 ``2002::/16``) is judged by the IPv4 address inside."""
    if address in METADATA_ADDRESSES:
        return "metadata"
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_v4(address)
        if inner is not None:
            return address_class(inner)
        found = next((reason for net6, reason in _V6_RANGES if address in net6), None)
        return found or ("public" if address in _GLOBAL_UNICAST else "reserved")
    return next((reason for net4, reason in _V4_RANGES if address in net4), "public")


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return None


def _loose_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a C resolver reads in ``text`` (``inet_aton``'s forms: ``127.1``,
    ``2130706433``, ``0x7f000001``, ``0177.0.0.1``), or None when ``text`` is not one."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMERIC_PART.match(p) for p in parts):
        return None
    values = []
    for part in parts:
        if part.startswith("0x"):
            if len(part) == 2:
                return None
            values.append(int(part[2:], 16))
        elif len(part) > 1 and part.startswith("0"):
            if any(c in "89" for c in part):
                return None
            values.append(int(part, 8))
        else:
            values.append(int(part))
    *head, last = values
    if any(v > 255 for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = last
    for i, value in enumerate(head):
        number |= value << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def parse_address(host: str) -> IPAddress | None:
    """The address ``host`` spells, in any form a resolver accepts (brackets, a zone, the legacy
    IPv4 forms), with an IPv4-mapped IPv6 address read as its IPv4; None for a name."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            address = ipaddress.IPv6Address(text.partition("%")[0])
        except ValueError:
            return None
        return address.ipv4_mapped or address
    return _loose_ipv4(text.removesuffix("."))


def normalize_host(host: str) -> str | None:
    """How a host is compared with the person's list: an address in its canonical text (IPv6
    without brackets), a name lower-cased without its final dot; None when it is neither."""
    address = parse_address(host)
    if address is not None:
        return str(address)
    name = host.strip().lower().removesuffix(".")
    if not name or len(name) > 253 or not name.isascii():
        return None
    labels = name.split(".")
    if not all(_LABEL.match(label) for label in labels):
        return None
    if _NUMERIC_PART.match(labels[-1]):  # numeric, yet not an address: a resolver may read it as one
        return None
    return name


@dataclass(frozen=True, order=True)
class Endpoint:
    """A ``host:port`` as the person sees it; ``host`` normalized (:func:`normalize_host`)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """``host:port``, ``[v6]:port``; raises :class:`InvalidInput` otherwise."""
        raw = text.strip()
        if raw.startswith("["):
            host, sep, rest = raw[1:].partition("]")
            port_text = rest[1:] if sep and rest.startswith(":") else ""
        else:
            host, _, port_text = raw.rpartition(":")
        return cls.of(host, port_text, text)

    @classmethod
    def of(cls, host: str, port: int | str, shown: str | None = None) -> Endpoint:
        normalized = normalize_host(host)
        try:
            number = int(port)
        except (TypeError, ValueError):
            number = 0
        if normalized is None or not 1 <= number <= 65535:
            raise InvalidInput(
                f"{shown or f'{host}:{port}'!r} is not a host and port (e.g. api.example.com:443, [::1]:8080)."
            )
        return cls(normalized, number)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Verdict:
    """The decision on one destination; ``addresses`` are where the proxy may connect (allowed)
    or what the name resolved to (refused)."""

    allowed: bool
    reason: str
    addresses: tuple[IPAddress, ...] = ()

    @property
    def words(self) -> str:
        return REASONS.get(self.reason, self.reason)


@dataclass(frozen=True)
class Lookup:
    """The name must be resolved; then :meth:`NetPolicy.after_lookup` decides on its addresses."""

    endpoint: Endpoint
    granted: bool


#: What ``localhost`` is, without asking DNS (RFC 6761).
_LOCALHOST = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))


@dataclass(frozen=True)
class NetPolicy:
    """One server's network policy (module docstring). ``granted``: destinations the person allowed
    even where they are not public; ``only``: in strict mode, the destinations it may reach."""

    mode: NetMode = "default"
    granted: frozenset[Endpoint] = frozenset()
    only: frozenset[Endpoint] = frozenset()

    @classmethod
    def default(cls, granted: Iterable[Endpoint | str] = ()) -> NetPolicy:
        return cls("default", _endpoints(granted))

    @classmethod
    def strict(cls, only: Iterable[Endpoint | str], granted: Iterable[Endpoint | str] = ()) -> NetPolicy:
        return cls("strict", _endpoints(granted), _endpoints(only))

    @classmethod
    def none(cls) -> NetPolicy:
        return cls("none")

    @classmethod
    def only_hosts(cls, hosts: Iterable[str], ports: Sequence[int] = (443, 80)) -> NetPolicy:
        """Strict: each host on each of ``ports`` (the download phase's package registries)."""
        return cls.strict(Endpoint.of(host, port) for host in hosts for port in ports)

    @classmethod
    def only_urls(cls, urls: Iterable[str]) -> NetPolicy:
        """Strict: the ``host:port`` of each URL (a configured registry, e.g. ``https://npm.corp:8443/``),
        the scheme's port when the URL names none."""
        out = []
        for url in urls:
            parts = urlsplit(url)
            try:
                port = parts.port or {"https": 443, "http": 80}[parts.scheme]
            except (KeyError, ValueError):
                raise InvalidInput(f"{url!r} is not an http(s) URL with a host.") from None
            out.append(Endpoint.of(parts.hostname or "", port, url))
        return cls.strict(out)

    # --- storage -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "granted": sorted(map(str, self.granted)), "only": sorted(map(str, self.only))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NetPolicy:
        mode = data.get("mode", "default")
        if mode not in ("default", "strict", "none"):
            raise InvalidInput(f"{mode!r} is not a network mode (default, strict, none).")
        return cls(mode, _endpoints(data.get("granted", ())), _endpoints(data.get("only", ())))

    def loopback_grants(self) -> list[Endpoint]:
        """The granted destinations on this computer's loopback (``127.0.0.1:5432``,
        ``localhost:8080``), one per port: a server in its own namespace finds each at the same
        port on its own loopback (``NetnsBridge(forwards=...)``, ``NetProxy.forward``), since a
        database client does not speak through an HTTP proxy. None with no network."""
        if self.mode == "none":
            return []
        out: dict[int, Endpoint] = {}
        for endpoint in sorted(self.granted):
            address = parse_address(endpoint.host)
            local = endpoint.host == "localhost" or endpoint.host.endswith(".localhost")
            if local or (address is not None and address_class(address) == "loopback"):
                out.setdefault(endpoint.port, endpoint)
        return list(out.values())

    # --- deciding ------------------------------------------------------------------------

    def check(self, host: str, port: int | str) -> Verdict | Lookup:
        """The decision that needs no resolution, or the :class:`Lookup` to make first."""
        if self.mode == "none":
            return Verdict(False, "no-network")
        try:
            endpoint = Endpoint.of(host, port)
        except InvalidInput:
            return Verdict(False, "invalid")
        granted = endpoint in self.granted
        if self.mode == "strict" and not granted and endpoint not in self.only:
            return Verdict(False, "not-listed")
        address = parse_address(endpoint.host)
        if address is not None:
            return self.after_lookup(Lookup(endpoint, granted), (address,))
        if endpoint.host == "localhost" or endpoint.host.endswith(".localhost"):
            return self.after_lookup(Lookup(endpoint, granted), _LOCALHOST)
        if endpoint.host in METADATA_NAMES and not granted:
            return Verdict(False, "metadata")
        return Lookup(endpoint, granted)

    def after_lookup(self, lookup: Lookup, addresses: Sequence[IPAddress]) -> Verdict:
        """Decide on what the name resolved to: the addresses allowed, in the resolver's order.

        A name that resolves to public and non-public addresses alike keeps only the public ones."""
        port = lookup.endpoint.port
        found = tuple(dict.fromkeys(_plain(a) for a in addresses))
        if not found:
            return Verdict(False, "unresolved")
        if lookup.granted:
            return Verdict(True, "granted", found)
        allowed: list[IPAddress] = []
        refused: list[str] = []
        by_grant = False
        for address in found:
            if Endpoint(str(address), port) in self.granted:
                allowed.append(address)
                by_grant = True
            elif (kind := address_class(address)) == "public":
                allowed.append(address)
            elif kind == "reserved" and self.mode == "strict" and lookup.endpoint in self.only:
                # A name the policy lists (a download's registry, a destination the person chose)
                # may resolve into a reserved range: the fake-IP answers of a proxy's DNS and the
                # test networks some build machines route registries through. Never loopback,
                # private, link-local or metadata addresses: those are this computer's neighbours.
                allowed.append(address)
            else:
                refused.append(kind)
        if not allowed:
            return Verdict(False, refused[0], found)
        reason = "granted" if by_grant else ("listed" if self.mode == "strict" else "public")
        return Verdict(True, reason, tuple(allowed))


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address as the IPv4 address it is."""
    return address.ipv4_mapped or address if isinstance(address, ipaddress.IPv6Address) else address


def _endpoints(items: Iterable[Endpoint | str]) -> frozenset[Endpoint]:
    return frozenset(item if isinstance(item, Endpoint) else Endpoint.parse(item) for item in items)
