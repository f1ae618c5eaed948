"""What the gateway says and checks when it relays an installed server's requests (relay.py).

The gateway speaks for others, so it says who speaks: every relayed request names its
:class:`Origin`, in words a person reads (a form's message is "<title> (installed server
`<slug>`) asks: …") and in ``_meta`` (:data:`ORIGIN_KEY`); only mcp-setup's own prompts are in
mcp-setup's voice, so a server's log messages carry its slug as their logger and never the
name ``mcp-setup`` (:meth:`Origin.logger`).

:class:`RelayRules` enforces the specification on what passes:

* a form elicitation that asks for credentials (``format: password``, a field named or
  described as a key, token, secret, password, credential…, or a default the redactor
  would hide) is refused to the server, and the user is told which server tried
  (:func:`credential_fields`; servers MUST NOT ask for sensitive information by form);
* a URL elicitation whose URL is not ``http(s)``, points at mcp-setup's own origin, or at a
  loopback address other than the server's own, is refused; any other is shown with its
  real host (:meth:`RelayRules.url_refusal`, :func:`real_host`);
* sampling asks for no context beyond the request (``includeContext`` becomes ``none``:
  behind one gateway "this server" and "all servers" would mean every installed server and
  mcp-setup itself; :func:`scoped_sampling`), and is relayed only as far as the person allowed
  it for that server: not at all, without tools (the default) or with tools
  (:attr:`Origin.sampling`, setup_agent/store/sampling.py; :func:`sampling_refusal`);
* every answer going back to a server passes the guard like a tool argument (a protected
  value is refused and counted against the principal who answered) and then the redactor
  (:meth:`RelayRules.answer`).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from setup_agent.errors import SetupError
from setup_agent.store import SAMPLING_DEFAULT, SAMPLING_LABEL, SAMPLING_WORDS, Sampling

__all__ = [
    "ORIGIN_KEY",
    "Origin",
    "RelayRules",
    "credential_fields",
    "real_host",
    "refused_answer",
    "sampling_refusal",
    "scoped_sampling",
]

logger = logging.getLogger(__name__)

#: The ``_meta`` key of a relayed request that says which installed server sent it.
ORIGIN_KEY = "io.mcp-setup/origin"
#: Words of a form field's name, title or description that ask for a credential.
_CREDENTIAL_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "tokens",
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "pwd",
        "credential",
        "credentials",
        "pin",
        "otp",
        "totp",
        "mfa",
        "2fa",
        "cookie",
        "bearer",
    }
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+[a-z]*", re.ASCII)
_RESERVED = "mcpsetup"  # a logger whose letters spell this is mcp-setup's voice
_INLINE_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+\Z")
_MAX_ICON = 64 * 1024


@dataclass(frozen=True)
class Origin:
    """The installed server a relayed request comes from."""

    slug: str
    title: str
    server: str = ""  # its qualified name
    url: str | None = None  # a remote's own URL: its loopback host may be named by a URL elicitation
    #: What the person allowed it to ask their AI (setup_agent/store/sampling.py).
    sampling: Sampling = SAMPLING_DEFAULT
    #: Its icon as its own answer gave it (an image ``data:`` URI only: nothing to fetch), or None.
    icon: str | None = None

    @classmethod
    def of(cls, server: Any) -> Origin:
        """The origin of an installed server's record (``InstalledServer``)."""
        spec = getattr(server, "launch_spec", None) or {}
        url = spec.get("url") if isinstance(spec, dict) else None
        name = server.qualified_name
        sampling = getattr(server, "sampling", SAMPLING_DEFAULT)
        return cls(server.slug or name, server.title or name, name, url if isinstance(url, str) else None, sampling)

    def with_icon(self, info: Any) -> Origin:
        """This origin with the first image icon of the server's ``serverInfo`` (``Implementation``),
        if it carries one inline (``data:image/…;base64,``, at most 64 KiB): a page shows it beside
        the server's name, and nothing is fetched from an address the server chose."""
        for icon in getattr(info, "icons", None) or ():
            src = getattr(icon, "src", None)
            if isinstance(src, str) and _INLINE_IMAGE.match(src) and len(src) <= _MAX_ICON:
                return replace(self, icon=src)
        return self

    def meta(self) -> dict[str, Any]:
        said = {"slug": self.slug, "title": self.title, "server": self.server or self.slug}
        return {ORIGIN_KEY: {**said, "icon": self.icon} if self.icon else said}

    def says(self, message: str, *, verb: str = "asks") -> str:
        """``message`` in the server's voice, for a person to read."""
        return f"{self.title} (installed server `{self.slug}`) {verb}: {message}"

    def logger(self, name: Any) -> str:
        """A log message's logger: the server's slug; its own logger name after it, unless it
        claims mcp-setup's voice."""
        text = name.strip() if isinstance(name, str) else ""
        if not text or _claims_mcp_setup(text) or text == self.slug:
            return self.slug
        return f"{self.slug}/{text}"


def _claims_mcp_setup(text: str) -> bool:
    letters = "".join(ch for ch in text.casefold() if ch.isalnum())
    return _RESERVED in letters


def _words(text: Any) -> set[str]:
    if not isinstance(text, str):
        return set()
    words = {w.lower() for w in _WORD.findall(text)}
    joined = re.sub(r"[^a-z0-9]", "", text.lower())
    if joined in _CREDENTIAL_WORDS or joined.endswith(("apikey", "token", "secret", "password")):
        words.add(joined)
    return words


def credential_fields(schema: Any, holds_secret: Callable[[Any], bool] | None = None) -> list[str]:
    """The fields of a form's ``requestedSchema`` that ask for a credential: ``format:
    password``, a name, title or description with a word such as key, token, secret,
    password or credential (a description only of a text field), or a default/enum value
    ``holds_secret`` recognises."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    found: list[str] = []
    for name, field in (properties or {}).items():
        field = field if isinstance(field, dict) else {}
        words = _words(str(name)) | _words(field.get("title"))
        if field.get("type", "string") == "string":  # a number's description may warn "not your PIN"
            words |= _words(field.get("description"))
        shaped = holds_secret is not None and holds_secret([field.get("default"), field.get("enum")])
        if str(field.get("format", "")).lower() == "password" or words & _CREDENTIAL_WORDS or shaped:
            found.append(str(name))
    return found


def scoped_sampling(params: dict[str, Any]) -> dict[str, Any]:
    """A sampling request that asks for no context but its own: ``includeContext`` ``none``."""
    if params.get("includeContext", "none") != "none":
        params = {**params, "includeContext": "none"}
    return params


def sampling_refusal(params: dict[str, Any], origin: Origin) -> str | None:
    """Why a sampling request of ``origin`` is refused by the person's setting for it (the words
    name the server and the setting a person changes to allow it), or None when it may pass."""
    wanted: Sampling = "tools" if params.get("tools") else "text"
    if origin.sampling == "tools" or origin.sampling == wanted:
        return None
    now = SAMPLING_WORDS[origin.sampling].lower()
    asked = "to write text using tools" if wanted == "tools" else "to write text"
    return (
        f"mcp-setup refused {origin.title}'s request to ask your AI {asked}: its setting "
        f'"{SAMPLING_LABEL}" is "{now}". To allow it, change that setting on {origin.title}\'s card in the '
        f"mcp-setup page, or run: mcp-setup allow {origin.slug} --sampling {wanted}"
    )


def real_host(url: str) -> str:
    """The host a URL really names (after any ``user@``), IDNA-encoded so a look-alike shows."""
    host = urlsplit(url).hostname or ""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host.encode("ascii", "backslashreplace").decode("ascii")


def _loopback(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # 127.1, 0x7f.0.0.1, 2130706433: the forms a resolver accepts for an IPv4 address
            address = ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return False
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address.is_loopback or address.is_unspecified


def _host_port(url: str) -> tuple[str, int | None] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:
        return None
    return (parts.hostname or "").rstrip(".").lower(), port


class RelayRules:
    """The checks of one gateway's relay (see the module doc). ``check(principal, value)`` is
    the guard's (``GuessGuard.check``: raises a :class:`SetupError`); ``own_origins`` are the
    URLs mcp-setup serves its pages at beyond loopback (a team gateway's public URL); ``told``
    hears what the user must know, in mcp-setup's words (default: a warning in mcp-setup's log)."""

    def __init__(
        self,
        redactor: Any,
        *,
        check: Callable[[str | None, Any], None] | None = None,
        holds_secret: Callable[[Any], bool] | None = None,
        own_origins: Iterable[str] = (),
        told: Callable[[str], Any] | None = None,
    ) -> None:
        self.redactor = redactor
        self.check = check
        self.holds_secret = holds_secret
        self._own = {hp for hp in map(_host_port, own_origins) if hp is not None}
        self.told = told

    def tell(self, text: str) -> None:
        """Tell the user (out of band, in mcp-setup's voice)."""
        logger.warning("%s", text)
        if self.told is not None:
            try:
                self.told(text)
            except Exception as exc:  # noqa: BLE001 - a listener must not break the relay
                logger.debug("notice not delivered: %s", type(exc).__name__)

    def url_refusal(self, url: Any, origin: Origin) -> str | None:
        """Why a URL elicitation to ``url`` is refused, or None when it may be shown."""
        if not isinstance(url, str) or urlsplit(url).scheme.lower() not in ("http", "https"):
            return "its URL is not an http(s) address"
        target = _host_port(url)
        if target is None or not target[0]:
            return "its URL names no host"
        if target in self._own:
            return "its URL points at mcp-setup's own pages"
        if _loopback(target[0]):
            own = _host_port(origin.url) if origin.url else None
            if own is None or own != target:
                return "its URL points at a local address that is not the server's own (mcp-setup's pages live there)"
        return None

    def url_required(self, data: Any, origin: Origin) -> dict[str, Any] | None:
        """A ``-32042`` (URL elicitation required) error's ``data`` as its client gets it: each
        URL elicitation in the server's name with its real host and origin, a refused one left
        out (the user told); None when none is left."""
        kept = []
        for item in data.get("elicitations") or () if isinstance(data, dict) else ():
            if not isinstance(item, dict):
                continue
            why = self.url_refusal(item.get("url"), origin)
            if why is not None:
                self.tell(origin.says(f"a page mcp-setup did not show, because {why}.", verb="asked to open"))
                continue
            verb = f"asks you to open a page at {real_host(item['url'])}"
            meta = item.get("_meta") if isinstance(item.get("_meta"), dict) else {}
            kept.append(
                {
                    **item,
                    "message": origin.says(str(item.get("message") or ""), verb=verb),
                    "_meta": {**meta, **origin.meta()},
                }
            )
        return {**data, "elicitations": kept} if kept else None

    def answer(self, principal: str | None, value: Any, *, guarded: bool) -> Any:
        """An answer on its way back to a server: checked by the guard when ``guarded`` (a
        :class:`SetupError` refuses it; counted against ``principal``), then redacted."""
        if guarded and self.check is not None:
            self.check(principal, value)
        return self.redactor.redact_obj(value)


def refused_answer(exc: SetupError) -> str:
    """What a server is told when its caller's answer was refused by the guard (echoing nothing)."""
    if exc.code == "session_locked":
        return "mcp-setup did not pass the answer on: this client's calls are blocked until the user unblocks them."
    return "mcp-setup did not pass the answer on: it held a value that mcp-setup protects."
