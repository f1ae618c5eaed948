"""What the user is asked to approve: a :class:`ConsentRequest` built from the prepared launch spec.

The runner, package, exact version or sha256, the command line with ``${KEY}`` templates (never
values), the host each secret is sent to, the *destination settings* (URL template variables and
``*_URL``/``*_HOST``-like settings, whose values the agent only suggests), and warnings the user
must accept explicitly (e.g. ``argv_secret``). The broker that holds it open is
:class:`~setup_agent.setup.consent.ConsentBroker`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from registry_clients.models import RequiredKey
from setup_agent.launch import (
    USER_SECRETS,
    LaunchSpec,
    after_test_words,
    network_words,
    profile_words,
    seen_destinations,
    template_keys,
)
from setup_agent.store import context_cost

if TYPE_CHECKING:
    from setup_agent.launch import NetRecord

__all__ = [
    "ConsentRequest",
    "ConsentWarning",
    "DestinationSetting",
    "SecretDestination",
    "build_consent_request",
    "fingerprint",
    "is_destination_setting",
    "sandbox_profile",
    "tool_choices",
]

_DESTINATION_NAME = re.compile(r"(?i)(^|[_.\-])(url|uri|host|hostname|endpoint|domain|origin|base[_\-]?url)$")
_URL_VALUE = re.compile(r"(?i)^[a-z][a-z0-9+.\-]*://")
_TEMPLATE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


@dataclass(frozen=True)
class ConsentWarning:
    """Something the user must accept explicitly (``code`` e.g. ``argv_secret``)."""

    code: str
    message: str


@dataclass(frozen=True)
class DestinationSetting:
    """A non-secret value that decides where the server connects: the agent only suggests it."""

    name: str
    suggested: str
    description: str = ""


@dataclass(frozen=True)
class SecretDestination:
    """Where one secret goes: ``how`` (env var, header, argument, URL) and to which ``host``."""

    key: str
    how: list[str]
    destination: str
    host: str | None = None


@dataclass(frozen=True)
class ConsentRequest:
    """What the user is asked to approve. Holds templates and non-secret values only."""

    server: str
    version: str | None
    action: str
    package_type: str
    package: str
    runner: str | None
    sha256: str | None
    transport: str
    command_line: list[str]
    url: str | None
    env: dict[str, str]
    headers: dict[str, str]
    secrets: list[SecretDestination]
    destinations: list[DestinationSetting]
    warnings: list[ConsentWarning] = field(default_factory=list)
    fingerprint: str = ""
    #: For ``action == "tools_change"``: the installed server's tool list changed (see pins.py):
    #: ``{server_id, pinned_hash, live_hash, diff, tools: [{name, change, description, pinned_description,
    #: inputSchema}]}`` — the new texts as the server wrote them, shown escaped, never to the agent.
    tools_change: dict[str, Any] | None = None
    #: What the server can see, in plain words (setup_agent/launch/sandbox.py); empty for a remote.
    sandbox: list[str] = field(default_factory=list)
    #: Whether the user may widen the sandbox here (an extra folder, no network): a local server
    #: in mcp-setup's own sandbox, not a remote or a container.
    widenable: bool = False
    #: Files of the user's home that the command line names (credential files excepted: those are
    #: never shown): kept from the server unless the user ticks them, each unticked by default.
    home_files: list[str] = field(default_factory=list)
    #: The tools the server will add, when a test already listed them (an install after a test):
    #: ``[{name, title, description, estimated_tokens}]``, each drawn as a ticked box the user may
    #: untick. Empty when nothing has run yet (a first test): nothing to choose.
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: The user approved this launch already (the test's consent): this ask is about the tools only,
    #: so faces show the server and the tool boxes, not the launch, destinations or widening again.
    launch_approved: bool = False
    #: Its network in plain words (setup_agent/launch/net_words.py): how it is held, the policy,
    #: and after a test "During the test it connected to api.notion.com:443".
    network: list[str] = field(default_factory=list)
    #: After a test through the proxy: the destinations it reached; the person may choose
    #: "only these" (``sandbox.only_these``), a strict policy. Empty: nothing to choose.
    only_these: list[str] = field(default_factory=list)
    #: Lines the person answers by picking an option (consent_choices.py): ``[{name, label,
    #: options: [{value, label}], default}]``. An answer, not part of what is approved.
    choices: list[dict[str, Any]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        """The JSON a face shows (no fingerprint: it is an internal key)."""
        out = asdict(self)
        out.pop("fingerprint", None)
        return out

    @classmethod
    def from_public(cls, data: Mapping[str, Any]) -> ConsentRequest:
        """The request back from :meth:`public`'s JSON (another process shows and checks it)."""
        fields = dict(data)
        fields["secrets"] = [SecretDestination(**d) for d in fields.get("secrets") or []]
        fields["destinations"] = [DestinationSetting(**d) for d in fields.get("destinations") or []]
        fields["warnings"] = [ConsentWarning(**d) for d in fields.get("warnings") or []]
        known = set(cls.__dataclass_fields__) - {"fingerprint"}
        return cls(**{k: v for k, v in fields.items() if k in known})


# -- building a request -------------------------------------------------------------------


def is_destination_setting(key: RequiredKey, value: str | None, url_keys: Iterable[str] = ()) -> bool:
    """A non-secret setting that shapes where the server connects."""
    if key.secret:
        return False
    if key.kind == "url_variable" or key.name in set(url_keys):
        return True
    return bool(_DESTINATION_NAME.search(key.name)) or bool(value and _URL_VALUE.match(value.strip()))


def _fill_public(text: str, values: Mapping[str, str], *, in_url: bool = False) -> str:
    """Fill ``${KEY}`` from non-secret ``values``; other templates stay as ``${KEY}``."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return "$"
        if name not in values:
            return m.group(0)
        return quote(values[name], safe=":@!$'()*+,;=") if in_url else values[name]

    return _TEMPLATE.sub(sub, text)


def _host_of(url: str | None) -> str | None:
    if not url:
        return None
    try:
        parts = urlsplit(url)
        return parts.netloc.rsplit("@", 1)[-1] or None
    except ValueError:
        return None


def _named_files(spec: LaunchSpec) -> list[str]:
    return [a for a in spec.args if a.startswith("/") and not _TEMPLATE.search(a)]


def home_files(spec: LaunchSpec, user_home: str | None) -> list[str]:
    """The files of ``user_home`` that ``spec``'s command line names and the user may let it read
    (never a credential file: those stay hidden whatever the user ticks)."""
    if not spec.command or not user_home:
        return []
    home = os.path.normpath(user_home).rstrip("/") + "/"
    secrets = tuple(home + d for d in USER_SECRETS)
    return [
        a
        for a in _named_files(spec)
        if a.startswith(home) and not any(a == s or a.startswith(s + "/") for s in secrets)
    ]


def sandbox_profile(spec: LaunchSpec, mechanism: str, user_home: str | None = None) -> list[str]:
    """The consent's (and ``mcp-setup show``'s) words for what a local server can see; files of
    ``user_home`` its command line names are said to be kept from it (the sandbox does so) unless
    the user ticked them (``spec.sandbox_reads``)."""
    if not spec.command:
        return []
    container = (spec.runner or spec.command) in ("docker", "podman")
    ticked = set(spec.sandbox_reads)
    reads = [a for a in _named_files(spec) if a not in ticked]
    return profile_words(
        mechanism,
        grants=spec.sandbox_grants,
        network=spec.sandbox_network,
        container=container,
        reads=reads,
        user_home=user_home,
        chosen_reads=[a for a in _named_files(spec) if a in ticked],
    )


#: The longest description a consent shows for one tool (the rest is cut with an ellipsis).
MAX_TOOL_DESCRIPTION = 300


def tool_choices(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The consent's rows for ``tools`` (as a probe listed them, redacted): name, title, the
    description's start and an estimate of the tokens the tool's definition adds to a client."""
    out = []
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            continue
        title = tool.get("title") or (tool.get("annotations") or {}).get("title") or ""
        text = " ".join(str(tool.get("description") or "").split())
        if len(text) > MAX_TOOL_DESCRIPTION:
            text = text[: MAX_TOOL_DESCRIPTION - 1].rstrip() + "…"
        out.append(
            {
                "name": name,
                "title": str(title),
                "description": text,
                "estimated_tokens": context_cost([dict(tool)])["estimated_tokens"],
            }
        )
    return out


def fingerprint(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def build_consent_request(
    *,
    server: str,
    version: str | None,
    spec: LaunchSpec,
    keys: Iterable[RequiredKey],
    values: Mapping[str, str],
    action: str = "test",
    warnings: Iterable[ConsentWarning | Mapping[str, str]] = (),
    sandbox: str = "none",
    tools: Iterable[Mapping[str, Any]] = (),
    user_home: str | None = None,
    net_mechanism: str = "none",
    tested: NetRecord | None = None,
) -> ConsentRequest:
    """The request for running ``spec`` with ``values`` (only non-secret values are read).
    ``sandbox`` names the mechanism a local server starts in (``bwrap``, ``landlock``, ``none``);
    ``tools`` the server's tools when a test listed them (redacted): the user may untick some.
    ``net_mechanism`` holds its network here (``bwrap-netns``, ``landlock-net``, ``none``);
    ``tested``: what its test reached or tried through the proxy (None: no proxied test)."""
    keys = list(keys)
    secret_names = {k.name for k in keys if k.secret}
    url_keys = template_keys(spec.url or "")
    destinations = [
        DestinationSetting(k.name, values[k.name], k.description or "")
        for k in keys
        if k.name in values and is_destination_setting(k, values.get(k.name), url_keys)
    ]
    public_values = {d.name: d.suggested for d in destinations}
    # Non-secret values the launch uses (a directory a filesystem server may read) decide access:
    # shown filled in, and part of what is approved. Destinations stay templates: the
    # user edits them below the launch.
    used = spec.keys()
    shown = {
        k.name: values[k.name]
        for k in keys
        if not k.secret and k.name in values and k.name in used and k.name not in public_values
    }
    filled_url = _fill_public(spec.url, public_values, in_url=True) if spec.url else None
    secrets: list[SecretDestination] = []
    for name in sorted(secret_names & spec.keys()):
        how: list[str] = []
        how += [f"environment variable {env}" for env, t in spec.env.items() if name in template_keys(t)]
        how += [f"header {h}" for h, t in spec.headers.items() if name in template_keys(t)]
        if any(name in template_keys(a) for a in spec.args) or name in template_keys(spec.command or ""):
            how.append("command-line argument")
        if name in url_keys:
            how.append("URL")
        if spec.transport == "stdio":
            where = "this computer: the server process started by " + (spec.runner or spec.command or "its runtime")
            if destinations:
                where += " (it may send it on to " + ", ".join(d.name for d in destinations) + ")"
            secrets.append(SecretDestination(name, how, where, None))
        else:
            host = _host_of(filled_url)
            secrets.append(SecretDestination(name, how, f"{spec.transport} server at {filled_url}", host))
    warns = [
        w if isinstance(w, ConsentWarning) else ConsentWarning(str(w["code"]), str(w["message"])) for w in warnings
    ]
    command_line = [spec.command, *spec.args] if spec.command else []
    request = ConsentRequest(
        server=server,
        version=version,
        action=action,
        package_type=spec.package_type,
        package=spec.identifier,
        runner=spec.runner,
        sha256=spec.file_sha256,
        transport=spec.transport,
        command_line=[_fill_public(c, shown) for c in command_line if c is not None],
        url=spec.url,
        env={name: _fill_public(template, shown) for name, template in spec.env.items()},
        headers=dict(spec.headers),
        secrets=secrets,
        destinations=destinations,
        warnings=warns,
        sandbox=sandbox_profile(spec, sandbox, user_home),
        widenable=(
            widenable := sandbox != "none"
            and spec.transport == "stdio"
            and (spec.runner or spec.command) not in ("docker", "podman")
        ),
        home_files=home_files(spec, user_home) if widenable else [],
        tools=tool_choices(tools),
        network=[
            *network_words(spec.model_dump(mode="json"), net_mechanism),
            *(after_test_words(tested.attempts()) if tested is not None else []),
        ],
        only_these=seen_destinations(tested.attempts()) if tested is not None and spec.sandbox_network else [],
    )
    fp = fingerprint(
        {
            "server": server,
            "version": version,
            "spec": spec.model_dump(mode="json"),
            "destinations": public_values,
            "values": shown,  # another directory is another approval
            "warnings": sorted(w.code for w in warns),
            # The tools shown are part of what is approved: an approval given before they were
            # known (the test's) does not answer the install that shows them.
            **({"tools": sorted(t["name"] for t in request.tools)} if request.tools else {}),
            **({"only_these": request.only_these} if request.only_these else {}),
        }
    )
    return ConsentRequest(**{**request.__dict__, "fingerprint": fp})
