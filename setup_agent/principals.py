"""Who is asking: the principals of mcp-setup, named in one place.

A request carries its principal from the face that authenticated it, decided by the credential
and never by what the caller says about itself:

* **the user** — the person who owns this mcp-setup: the printed page link's session
  (``user:web``), the terminal's TTY (``user:terminal``), a one-time page opened by URL
  elicitation or by mcp-setup in the user's browser (``user:consent-page``). Only the user
  approves: launch consents, tool-list changes, unlocking a locked client.
* **a client** — an MCP session over stdio (``client:stdio``), an HTTP client on ``/mcp`` with
  its own client token (``client:http:NAME``, made by ``mcp-setup client connect CLIENT --http``),
  a ``/rpc`` caller, the sub-agent. Clients call tools, request secrets, start sign-ins and list
  things; they never approve, never open the user's page and never receive a credential that
  can. The page link's key is the user's: ``/mcp`` refuses it.
* **a member** — a team gateway's named token (``token:NAME``): a client with its own credential.
  A token made with ``--admin`` may also approve, audited as ``token:NAME``.

What a client says about itself (MCP ``clientInfo.name``) is only a display *hint* beside the
principal: ``client:stdio via claude-desktop``. The clients' own names (:data:`CLIENT_NAMES`)
and who asked for something, in a person's words (:func:`asker_words`), are here too: the
consent names its asker, the page and the terminal who installed a server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["CLIENT_NAMES", "SCOPE_KEY", "Principal", "asker_words", "client_hint", "client_name"]

PrincipalKind = Literal["user", "client", "member"]
#: The ASGI scope key under which the web face's guard hands a request's principal on (to
#: handlers that run in another task, such as the MCP sessions of ``/mcp``).
SCOPE_KEY = "mcp_setup.principal"
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


#: The clients' own names, by the word mcp-setup knows them by (``client connect CLIENT``, labels).
CLIENT_NAMES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "windsurf": "Windsurf",
    "zed": "Zed",
    "gemini": "Gemini CLI",
    "codex": "Codex",
}


def client_name(client: str) -> str:
    """``claude-desktop`` -> ``Claude Desktop``; a client mcp-setup does not know, as written (dashes as spaces)."""
    return CLIENT_NAMES.get(client.strip().lower()) or client.strip().replace("-", " ") or "an AI client"


def asker_words(label: str | None) -> str:
    """Who asked, as the subject of a sentence a person reads ("… asked to install X"), from an
    ``installed_by`` label: ``cli``/``ui``/``user:…`` -> ``You``; ``mcp:claude-desktop`` ->
    ``Claude Desktop``; ``mcp`` or ``client:…`` -> ``An AI client`` (its name when it gave one);
    ``agent`` -> ``The setup assistant``; ``token:NAME`` -> ``The token NAME``."""
    if not label:
        return "An AI client"
    principal, _, via = label.partition(" via ")
    kind, _, rest = principal.partition(":")
    if principal in ("cli", "ui") or kind == "user":
        return "You"
    if kind == "mcp":
        return client_name(rest) if rest else "An AI client"
    if kind == "import":
        return "You"  # `mcp-setup import`: the person's own command
    if principal == "agent":
        return "The setup assistant"
    if kind == "token":
        return f"The token {rest}" + (f" ({client_name(via)})" if via else "")
    if kind == "client":
        return client_name(via) if via else "An AI client"
    return "An AI client"


def client_hint(client_name: object) -> str | None:
    """``Claude Desktop`` → ``claude-desktop``; missing, empty or nothing left → None."""
    if not isinstance(client_name, str):
        return None
    slug = _NON_ALNUM.sub("-", client_name.strip().lower()).strip("-")[:48].strip("-")
    return slug or None


@dataclass(frozen=True)
class Principal:
    """One principal (see the module docstring). ``name``: the face (``web``, ``terminal``,
    ``stdio``, ``http``) or the token's name; ``hint``: what the client calls itself (display only)."""

    kind: PrincipalKind
    name: str
    admin: bool = False
    hint: str | None = None

    @classmethod
    def user(cls, face: str) -> Principal:
        return cls("user", face)

    @classmethod
    def client(cls, face: str, hint: str | None = None) -> Principal:
        return cls("client", face, hint=hint)

    @classmethod
    def http_client(cls, token_name: str, hint: str | None = None) -> Principal:
        """An HTTP client authenticated by its own client token ``token_name``."""
        return cls("client", f"http:{token_name}", hint=hint)

    @classmethod
    def member(cls, token_name: str, *, admin: bool = False, hint: str | None = None) -> Principal:
        return cls("member", token_name, admin=admin, hint=hint)

    @property
    def label(self) -> str:
        """The audit's name for it: ``user:web``, ``client:stdio``, ``token:alice``."""
        prefix = "token" if self.kind == "member" else self.kind
        return f"{prefix}:{self.name}"

    @property
    def display(self) -> str:
        """The label with the client's own name beside it: ``token:alice via cursor``."""
        return f"{self.label} via {self.hint}" if self.hint else self.label

    @property
    def guard_key(self) -> str:
        """Whom the guessing guard counts: the credential (a token, the user), or for a stdio client,
        which has none, its face and the name it gives, so that each session of the same client
        goes on counting where the last one stopped."""
        return self.display if self.kind == "client" and self.name == "stdio" else self.label

    @property
    def provenance(self) -> str:
        """What an install records as its ``installed_by`` (the host conventions): an MCP client is
        ``mcp:<its name>`` (``mcp`` when it gives none); a member and the user their :attr:`display`.
        The principal's own :attr:`display` stays in the audit beside it."""
        if self.kind == "client":
            return f"mcp:{self.hint}" if self.hint else "mcp"
        return self.display

    @property
    def may_approve(self) -> bool:
        """Only the user (and a team's ``--admin`` token) approves launches and tool changes."""
        return self.kind == "user" or (self.kind == "member" and self.admin)

    def with_hint(self, hint: str | None) -> Principal:
        return Principal(self.kind, self.name, self.admin, hint)
