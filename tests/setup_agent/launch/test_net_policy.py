"""The network policy a sandboxed server is held to: a table of destinations and decisions.

Pure: the proxy resolves names and asks :meth:`NetPolicy.after_lookup`; here the addresses a
name resolves to are given, so every case is exact and nothing is resolved.
"""

from __future__ import annotations

import ipaddress

import pytest

from setup_agent.errors import InvalidInput
from setup_agent.launch.net_policy import Endpoint, Lookup, NetPolicy, Verdict, address_class, parse_address

ip = ipaddress.ip_address


def decide(policy: NetPolicy, host: str, port: int, resolves_to: tuple[str, ...] = ()) -> Verdict:
    """The whole decision, with ``resolves_to`` as the name's addresses when one is needed."""
    step = policy.check(host, port)
    if isinstance(step, Lookup):
        return policy.after_lookup(step, [ip(a) for a in resolves_to])
    return step


#: Every spelling of a destination that is not on the public internet, and why.
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.0.0.2", "loopback"),
    ("127.255.255.254", "loopback"),
    ("localhost", "loopback"),
    ("LocalHost.", "loopback"),
    ("db.localhost", "loopback"),
    ("2130706433", "loopback"),
    ("0x7f000001", "loopback"),
    ("0X7F000001", "loopback"),
    ("0177.0.0.1", "loopback"),
    ("0177.0.0.01", "loopback"),
    ("127.1", "loopback"),
    ("127.0.1", "loopback"),
    ("0x7f.1", "loopback"),
    ("127.0.0.1.", "loopback"),
    ("::1", "loopback"),
    ("[::1]", "loopback"),
    ("0:0:0:0:0:0:0:1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),
    ("[::ffff:7f00:1]", "loopback"),
    ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("0.0.0.0", "unspecified"),
    ("0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("::", "unspecified"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("::ffff:192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),
    ("100.64.0.1", "shared"),
    ("100.127.255.255", "shared"),
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("[fe80::1%25eth0]", "link-local"),
    ("169.254.169.254", "metadata"),
    ("2852039166", "metadata"),  # 169.254.169.254 as one number
    ("::ffff:169.254.169.254", "metadata"),
    ("169.254.170.2", "metadata"),
    ("fd00:ec2::254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("metadata.google.internal", "metadata"),
    ("metadata.google.internal.", "metadata"),
    ("instance-data", "metadata"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "reserved"),
    ("198.18.0.1", "reserved"),
    ("::127.0.0.1", "reserved"),  # IPv4-compatible, deprecated
    ("2001:db8::1", "reserved"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"),  # Teredo
    ("100::1", "reserved"),
    ("::ffff:0.0.0.0", "unspecified"),
]


@pytest.mark.parametrize(("host", "why"), REFUSED)
def test_every_spelling_of_a_non_public_destination_is_refused_with_its_reason(host: str, why: str) -> None:
    verdict = decide(NetPolicy.default(), host, 443)
    assert verdict == Verdict(False, why, verdict.addresses), host
    assert "this computer" in verdict.words or why not in ("loopback", "unspecified")


@pytest.mark.parametrize(
    ("name", "addresses", "why"),
    [
        ("rebind.example", ("127.0.0.1",), "loopback"),
        ("rebind.example", ("::1",), "loopback"),
        ("rebind.example", ("::ffff:10.1.2.3",), "private"),
        ("internal.example", ("10.0.0.5", "192.168.0.5"), "private"),
        ("meta.example", ("169.254.169.254",), "metadata"),
        ("nothing.example", (), "unresolved"),
    ],
)
def test_a_name_is_judged_by_the_addresses_it_resolves_to(name: str, addresses: tuple[str, ...], why: str) -> None:
    verdict = decide(NetPolicy.default(), name, 443, addresses)
    assert not verdict.allowed and verdict.reason == why


@pytest.mark.parametrize(
    "host", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "[2a00:1450:4001:80b::200e]", "::ffff:8.8.8.8", "134744072"]
)
def test_a_public_address_is_allowed_by_default_and_connected_to_as_checked(host: str) -> None:
    verdict = decide(NetPolicy.default(), host, 443)
    assert verdict.allowed and verdict.reason == "public"
    assert verdict.addresses == (parse_address(host),)


def test_a_name_with_public_and_local_addresses_keeps_only_the_public_ones() -> None:
    verdict = decide(NetPolicy.default(), "api.example.com", 443, ("93.184.215.14", "127.0.0.1", "93.184.215.14"))
    assert verdict == Verdict(True, "public", (ip("93.184.215.14"),))


def test_a_listed_name_may_resolve_into_a_reserved_range_but_never_to_a_neighbour() -> None:
    registry = NetPolicy.strict(["registry.npmjs.org:443"])  # a download's registry, as a proxy's DNS answers it
    assert decide(registry, "registry.npmjs.org", 443, ("203.0.113.80",)) == Verdict(
        True, "listed", (ip("203.0.113.80"),)
    )
    assert decide(registry, "registry.npmjs.org", 443, ("198.18.0.7",)).allowed  # fake-IP DNS
    for neighbour, why in (("127.0.0.1", "loopback"), ("10.0.0.5", "private"), ("169.254.169.254", "metadata")):
        verdict = decide(registry, "registry.npmjs.org", 443, (neighbour,))
        assert not verdict.allowed and verdict.reason == why
    assert not decide(registry, "other.example", 443, ("203.0.113.80",)).allowed  # not listed
    assert decide(NetPolicy.default(), "registry.npmjs.org", 443, ("203.0.113.80",)).reason == "reserved"


def test_the_exact_host_and_port_the_person_granted_is_allowed_and_no_other_port() -> None:
    policy = NetPolicy.default(["127.0.0.1:5432", "db.corp:5432", "[::1]:8080"])
    assert decide(policy, "127.0.0.1", 5432) == Verdict(True, "granted", (ip("127.0.0.1"),))
    # The same address in another spelling is the same destination.
    for spelling in ("2130706433", "0x7f000001", "127.1", "::ffff:127.0.0.1", "localhost"):
        assert decide(policy, spelling, 5432) == Verdict(True, "granted", (ip("127.0.0.1"),)), spelling
    assert not decide(policy, "127.0.0.1", 5433).allowed
    assert decide(policy, "::1", 8080).allowed and not decide(policy, "::1", 5432).allowed
    # A granted name may resolve where it likes; another name resolving there is judged by the address.
    assert decide(policy, "db.corp", 5432, ("10.0.0.7",)) == Verdict(True, "granted", (ip("10.0.0.7"),))
    assert decide(policy, "db.corp", 5433, ("10.0.0.7",)).reason == "private"
    assert decide(policy, "other.example", 5432, ("127.0.0.1",)) == Verdict(True, "granted", (ip("127.0.0.1"),))
    assert decide(policy, "other.example", 5432, ("10.0.0.7",)).reason == "private"


def test_a_metadata_name_is_refused_without_a_lookup_unless_granted() -> None:
    assert NetPolicy.default().check("metadata.google.internal", 80) == Verdict(False, "metadata")
    assert isinstance(NetPolicy.default(["metadata.google.internal:80"]).check("metadata.google.internal", 80), Lookup)


def test_strict_allows_only_the_listed_destinations_and_asks_no_resolver_about_the_others() -> None:
    policy = NetPolicy.strict(["api.notion.com:443"], granted=["127.0.0.1:5432"])
    assert decide(policy, "api.notion.com", 443, ("104.18.1.1",)) == Verdict(True, "listed", (ip("104.18.1.1"),))
    assert policy.check("api.notion.com", 80) == Verdict(False, "not-listed")
    assert policy.check("evil.example", 443) == Verdict(False, "not-listed")  # no Lookup: never resolved
    assert policy.check("8.8.8.8", 443) == Verdict(False, "not-listed")
    assert decide(policy, "127.0.0.1", 5432).reason == "granted"
    # A listed public name that now resolves to loopback (DNS rebinding) is still refused.
    assert decide(policy, "api.notion.com", 443, ("127.0.0.1",)) == Verdict(False, "loopback", (ip("127.0.0.1"),))


def test_no_network_refuses_everything_even_what_was_granted() -> None:
    policy = NetPolicy("none", granted=frozenset({Endpoint("127.0.0.1", 5432)}))
    for host, port in (("8.8.8.8", 443), ("127.0.0.1", 5432), ("example.com", 80)):
        assert policy.check(host, port) == Verdict(False, "no-network")


def test_the_download_phase_reaches_only_the_registry_hosts_on_https_and_http() -> None:
    policy = NetPolicy.only_hosts(["registry.npmjs.org", "pypi.org", "files.pythonhosted.org"])
    assert decide(policy, "registry.npmjs.org", 443, ("104.16.1.34",)).allowed
    assert decide(policy, "files.pythonhosted.org", 80, ("151.101.1.63",)).allowed
    assert policy.check("registry.npmjs.org", 22) == Verdict(False, "not-listed")
    assert policy.check("evil.example", 443) == Verdict(False, "not-listed")
    mirror = NetPolicy.only_urls(["https://npm.corp.example:8443/repo/", "http://pypi.mirror.example/simple"])
    assert mirror.only == {Endpoint("npm.corp.example", 8443), Endpoint("pypi.mirror.example", 80)}
    with pytest.raises(InvalidInput):
        NetPolicy.only_urls(["ftp://x.example/"])


@pytest.mark.parametrize(
    "host", ["", "a b", "exa mple.com", "user@host", "host/path", "1.2.3.4.5", "999.1.1.1", "08.1.1.1", "0x", "é.com"]
)
def test_what_is_neither_a_name_nor_an_address_is_refused_as_invalid(host: str) -> None:
    assert NetPolicy.default().check(host, 443) == Verdict(False, "invalid")


@pytest.mark.parametrize("port", [0, -1, 65536, "http", ""])
def test_a_port_outside_1_to_65535_is_invalid(port: object) -> None:
    assert NetPolicy.default().check("example.com", port) == Verdict(False, "invalid")  # type: ignore[arg-type]


def test_endpoints_parse_print_and_store_in_their_normal_form() -> None:
    assert Endpoint.parse("API.Example.com.:443") == Endpoint("api.example.com", 443)
    assert str(Endpoint.parse("[::1]:8080")) == "[::1]:8080"
    assert Endpoint.parse("2130706433:80") == Endpoint("127.0.0.1", 80)
    for bad in ("example.com", "[::1]", "example.com:0", ":80", "a b:80"):
        with pytest.raises(InvalidInput):
            Endpoint.parse(bad)
    policy = NetPolicy.strict(["api.notion.com:443"], granted=["localhost:5432"])
    assert policy.to_dict() == {"mode": "strict", "granted": ["localhost:5432"], "only": ["api.notion.com:443"]}
    assert NetPolicy.from_dict(policy.to_dict()) == policy
    with pytest.raises(InvalidInput):
        NetPolicy.from_dict({"mode": "everything"})


def test_an_ipv6_address_that_carries_a_public_ipv4_one_is_judged_by_it() -> None:
    assert address_class(ip("64:ff9b::808:808")) == "public"
    assert address_class(ip("2002:808:808::1")) == "public"
    assert address_class(ip("2606:4700::1")) == "public"
    assert address_class(ip("4000::1")) == "reserved"  # outside 2000::/3: not assigned


def test_granted_loopback_destinations_are_offered_once_per_port_for_the_namespaces_own_loopback() -> None:
    policy = NetPolicy.default(["127.0.0.1:5432", "[::1]:5432", "localhost:6379", "db.corp:5433", "10.0.0.7:80"])
    assert policy.loopback_grants() == [Endpoint("127.0.0.1", 5432), Endpoint("localhost", 6379)]
    assert NetPolicy("none", granted=policy.granted).loopback_grants() == []
