"""What the user is asked to approve: a :class:`ConsentRequest` built from the prepared launch spec.

The runner, package, exact version or sha256, the command line with ``${KEY}`` templates (never
values), the host each secret is sent to, the *destination settings* (URL template variables and
``*_URL``/``*_HOST``-like settings, whose values the agent only suggests), and warnings the user
must accept explicitly (e.g. ``argv_secret``). The broker that holds it open is
:class:`~setup_agent.setup.consent.ConsentBroker`.

What a person reads is one document built from it, :func:`consent_document`: who asked, then
sections in order (the person's settings first, what runs, one sandbox block, the network, the
tools a test listed, and the package's internals folded under "Technical details"), every
template resolved into words. The page's modal, the consent page and the terminals draw that
same document; a line is added to a section here, once, for all of them.
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
from setup_agent.gateway import adds_words
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
    "ConsentDocument",
    "ConsentLine",
    "ConsentRequest",
    "ConsentSection",
    "ConsentWarning",
    "DestinationSetting",
    "SecretDestination",
    "budget_line",
    "build_consent_request",
    "consent_document",
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
    #: The names the launch's templates give it (the key's own and its aliases, e.g. a bundle's
    #: ``api_key`` for ``WEATHER_API_KEY``): each is shown as "<your KEY>".
    templates: list[str] = field(default_factory=list)


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
    #: Its network in plain words (setup_agent/launch/net_words.py): how it is held, the policy,
    #: and after a test "During the test it connected to api.notion.com:443".
    network: list[str] = field(default_factory=list)
    #: After a test through the proxy: the destinations it reached; the person may choose
    #: "only these" (``sandbox.only_these``), a strict policy. Empty: nothing to choose.
    only_these: list[str] = field(default_factory=list)
    #: Lines the person answers by picking an option (consent_choices.py): ``[{name, label,
    #: options: [{value, label}], default}]``. An answer, not part of what is approved.
    choices: list[dict[str, Any]] = field(default_factory=list)
    #: Who asked, in words that begin a sentence: "You", "Claude Desktop", "The setup assistant"
    #: (``setup_agent.principals.asker_words``); empty: not known.
    asker: str = ""
    #: An update of an installed server (the person pressed Update, or ran ``mcp-setup update``).
    update: bool = False
    #: The non-secret values the launch uses (a folder, a region), as given: the person's settings.
    values: dict[str, str] = field(default_factory=dict)
    #: A test's approval that also covers the install of the same launch, with every tool the
    #: test lists: one approval per install where the person would otherwise come back for a second.
    covers_install: bool = False
    #: The context budget when the consent was asked: ``{budget, listed}`` (tokens; ``listed``: every
    #: tool AI clients are listed now, mcp-setup's own included). Words only, not what is approved.
    budget: dict[str, int] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The JSON a face shows (no fingerprint: it is an internal key), with the document a
        person reads (:func:`consent_document`), which every face draws."""
        out = asdict(self)
        out.pop("fingerprint", None)
        out["document"] = consent_document(self).public()
        return out

    @classmethod
    def from_public(cls, data: Mapping[str, Any]) -> ConsentRequest:
        """The request back from :meth:`public`'s JSON (another process shows and checks it)."""
        fields = dict(data)
        fields.pop("document", None)  # drawn from the request again
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
    asker: str = "",
    update: bool = False,
    covers_install: bool = False,
    budget: Mapping[str, int] | None = None,
) -> ConsentRequest:
    """The request for running ``spec`` with ``values`` (only non-secret values are read).
    ``sandbox`` names the mechanism a local server starts in (``bwrap``, ``landlock``, ``none``);
    ``tools`` the server's tools when a test listed them (redacted): the user may untick some.
    ``net_mechanism`` holds its network here (``bwrap-netns``, ``landlock-net``, ``none``);
    ``tested``: what its test reached or tried through the proxy (None: no proxied test).
    ``asker``: who asked, in words; ``update``: it updates an installed server; ``covers_install``:
    a test's approval that also approves the install of the same launch; ``budget``: the context
    budget and what is listed now, ``{budget, listed}`` (none of them change what is approved, only
    how it is said)."""
    keys = list(keys)
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
    for key in sorted((k for k in keys if k.secret), key=lambda k: k.name):
        names = {key.name, *key.aliases} & spec.keys()  # a bundle's template may use an alias
        if not names:
            continue
        how: list[str] = []
        how += [f"environment variable {env}" for env, t in spec.env.items() if names & template_keys(t)]
        how += [f"header {h}" for h, t in spec.headers.items() if names & template_keys(t)]
        if any(names & template_keys(a) for a in spec.args) or names & template_keys(spec.command or ""):
            how.append("command-line argument")
        if names & url_keys:
            how.append("URL")
        if spec.transport == "stdio":
            where = "this computer: the server process started by " + (spec.runner or spec.command or "its runtime")
            if destinations:
                where += " (it may send it on to " + ", ".join(d.name for d in destinations) + ")"
            secrets.append(SecretDestination(key.name, how, where, None, sorted(names)))
        else:
            host = _host_of(filled_url)
            secrets.append(
                SecretDestination(key.name, how, f"{spec.transport} server at {filled_url}", host, sorted(names))
            )
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
        values=dict(shown),
        asker=asker,
        update=update,
        covers_install=covers_install,
        budget=dict(budget or {}),
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


# -- the document a person reads ------------------------------------------------------------


@dataclass(frozen=True)
class ConsentLine:
    """One line of a section: a ``label`` (a setting's name, "Command line"; empty for a plain
    sentence) and its ``text``."""

    label: str
    text: str


@dataclass(frozen=True)
class ConsentSection:
    """One part of the document. ``key`` names it for the faces (``settings``, ``runs``,
    ``sandbox``, ``network``, ``tools``, ``technical``); ``folded``: drawn closed where a face
    can fold (the page), printed last and indented in a terminal."""

    key: str
    title: str
    lines: tuple[ConsentLine, ...]
    folded: bool = False


@dataclass(frozen=True)
class ConsentDocument:
    """What a person reads before approving: the question, who asked, what approving means, and
    the sections in order. Every face draws this (the page's modal, the consent page, the
    terminals), so each says the same."""

    title: str
    asked: str
    intro: str
    sections: tuple[ConsentSection, ...]

    def section(self, key: str) -> ConsentSection | None:
        return next((s for s in self.sections if s.key == key), None)

    def public(self) -> dict[str, Any]:
        return asdict(self)


_PACKAGE_WORDS = {
    "npm": "the npm package",
    "pypi": "the Python package",
    "oci": "the Docker image",
    "nuget": "the .NET package",
    "mcpb": "the MCPB bundle",
    "remote": "the remote server",
}
#: Any template a launch may hold: ``${NAME}``, ``${user_config.NAME}``, ``${input:NAME}``,
#: ``${__dirname}``, a URL's ``{NAME}``, and ``$$`` for a dollar sign.
_ANY_TEMPLATE = re.compile(r"\$\$|\$\{([^}]*)\}|\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


def _resolved(text: str, request: ConsentRequest) -> str:
    """``text`` with every template in words: a value the person gave, "<your KEY>" for a secret
    (never its value), "<its own folder>" for a bundle's folder."""
    secrets = {name: s.key for s in request.secrets for name in (s.key, *s.templates)}
    known = {**{d.name: d.suggested for d in request.destinations}, **request.values}

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
        for prefix in ("user_config.", "input:", "env:"):
            name = name.removeprefix(prefix)
        if name == "__dirname":
            return "<its own folder>"
        if name in known and name not in secrets:
            return known[name]
        return f"<your {secrets.get(name, name)}>"

    return _ANY_TEMPLATE.sub(sub, text)


def _verb(request: ConsentRequest) -> str:
    if request.update:
        return "update"
    return "install" if request.action == "install" else "test"


def _settings(request: ConsentRequest) -> tuple[ConsentLine, ...]:
    """The person's own settings: each secret and where it goes, the values given, the
    destinations (editable where a face can)."""
    lines = []
    for secret in request.secrets:
        where = _resolved(secret.destination, request) + (f" (host {secret.host})" if secret.host else "")
        how = ", ".join(secret.how) or "a setting"
        lines.append(ConsentLine(secret.key, f"your secret, never shown here: sent as {how} to {where}"))
    for name, value in request.values.items():
        lines.append(ConsentLine(name, value))
    for d in request.destinations:
        lines.append(ConsentLine(d.name, f"{d.suggested} (where it connects: the assistant suggested it)"))
    return tuple(lines)


def _runs(request: ConsentRequest) -> tuple[ConsentLine, ...]:
    package = f"{_PACKAGE_WORDS.get(request.package_type, request.package_type)} {_resolved(request.package, request)}"
    lines = [
        ConsentLine("Server", request.server + (f", version {request.version}" if request.version else "")),
        ConsentLine("From", package),
    ]
    if request.command_line:
        lines.append(
            ConsentLine("Where", "on this computer, started by " + (request.runner or request.command_line[0]))
        )
    elif request.url:
        lines.append(ConsentLine("Where", f"at {_resolved(request.url, request)}"))
    return tuple(lines)


def _sandbox(request: ConsentRequest) -> tuple[ConsentLine, ...]:
    """One block: what it can see and use ("Sandbox: bwrap." becomes "Held by bwrap."); its
    network is said once, in the network section."""
    lines = []
    for line in request.sandbox:
        if line.startswith("Network: ") and request.network:
            continue
        if line.startswith("Sandbox: none"):
            line = "None" + line.removeprefix("Sandbox: none")
        elif line.startswith("Sandbox: "):
            line = "Held by " + line.removeprefix("Sandbox: ")
        lines.append(ConsentLine("", line))
    return tuple(lines)


def _sentence(line: str, prefix: str) -> str:
    """``Network: none.`` -> ``None.``: the section's title says what the prefix said."""
    if not line.startswith(prefix):
        return line
    rest = line.removeprefix(prefix)
    return rest[:1].upper() + rest[1:]


def _network(request: ConsentRequest) -> tuple[ConsentLine, ...]:
    policy = "Network policy: "
    lines = ("Policy: " + line.removeprefix(policy) if line.startswith(policy) else line for line in request.network)
    return tuple(ConsentLine("", _sentence(line, "Network: ")) for line in lines)


def _tools(request: ConsentRequest) -> tuple[ConsentLine, ...]:
    lines = tuple(
        ConsentLine(t["name"], (t.get("description") or "") + f" (about {t.get('estimated_tokens', 0)} tokens)")
        for t in request.tools
    )
    return (*lines, ConsentLine("", words)) if (words := budget_line(request)) else lines


def budget_line(request: ConsentRequest, *, lead: bool = True) -> str:
    """Where the server's tools leave the context budget, in words (``lead=False``: after a
    sentence that said what they add); empty when no tool or no budget is known."""
    if not request.tools or "budget" not in request.budget:
        return ""
    adds = sum(int(t.get("estimated_tokens") or 0) for t in request.tools)
    return adds_words(adds, int(request.budget.get("listed", 0)), int(request.budget["budget"]), lead=lead)


def _technical(request: ConsentRequest) -> tuple[ConsentLine, ...]:
    """The package's internals: what a person rarely needs, folded."""
    lines = [ConsentLine("Package", f"{request.package_type}: {_resolved(request.package, request)}")]
    if request.sha256:
        lines.append(ConsentLine("sha256", request.sha256))
    if request.runner:
        lines.append(ConsentLine("Runner", request.runner))
    if request.command_line:
        lines.append(ConsentLine("Command line", " ".join(_resolved(c, request) for c in request.command_line)))
    if request.url:
        lines.append(ConsentLine("Address", f"{_resolved(request.url, request)} ({request.transport})"))
    if request.env:
        text = "\n".join(f"{name}={_resolved(template, request)}" for name, template in request.env.items())
        lines.append(ConsentLine("Environment", text))
    for name, template in request.headers.items():
        lines.append(ConsentLine("Header", f"{name}: {_resolved(template, request)}"))
    return tuple(lines)


def _intro(request: ConsentRequest) -> str:
    if request.covers_install:
        return (
            "It runs third-party code on this computer or sends your secrets to the host shown. It is tested "
            "first; if the test passes it is installed with the tools the test lists, with no second question. "
            "Approve only what you expect."
        )
    return (
        "It runs third-party code on this computer or sends your secrets to the host shown. "
        "Approve only what you expect."
    )


def consent_document(request: ConsentRequest) -> ConsentDocument:
    """The document a person reads for ``request`` (see :class:`ConsentDocument`)."""
    verb = _verb(request)
    asker = request.asker or "Your assistant"
    doing = "install" if request.covers_install else verb
    asked = f"{asker} asked to {doing} {request.server}."
    parts = [
        ConsentSection("settings", "Your settings", _settings(request)),
        ConsentSection("runs", "What runs", _runs(request)),
        ConsentSection("sandbox", "Sandbox", _sandbox(request)),
        ConsentSection("network", "Network", _network(request)),
        ConsentSection("tools", "Tools it gives your assistant", _tools(request)),
        ConsentSection("technical", "Technical details", _technical(request), folded=True),
    ]
    return ConsentDocument(
        title=f"Allow mcp-setup to {verb} {request.server}?",
        asked=asked,
        intro=_intro(request),
        sections=tuple(p for p in parts if p.lines),
    )
