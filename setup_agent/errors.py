"""One error hierarchy for the core, with stable codes.

Every failure the core reports is a :class:`SetupError`. Its ``code`` is stable (agents,
UIs and tests match on it) and its message is a sentence a person or an agent can act on.
Messages never hold a secret value; faces still pass them through the redactor.

::

    SetupError                          internal
    ├── InvalidInput                    invalid_input
    │   └── RequestStateInvalid         request_state_invalid
    ├── NotFound                        not_found
    ├── AlreadyInstalled                already_installed
    ├── SecretError
    │   ├── SecretMissing               secret_missing
    │   ├── SecretExpired               secret_expired
    │   ├── SecretPending               secret_pending
    │   ├── SecretWrongKey              secret_wrong_key
    │   ├── SecretNotAllowed            secret_not_allowed
    │   └── SecretInUse                 secret_in_use
    ├── PromptError
    │   ├── PromptNotFound              prompt_not_found
    │   ├── PromptAlreadyAnswered       prompt_answered
    │   ├── PromptCancelled             prompt_cancelled
    │   └── PromptFailed                prompt_failed
    ├── PackageError
    │   ├── NoRunnablePackage           no_runnable_package
    │   ├── PackageNotFound             package_not_found
    │   ├── BundleInvalid               bundle_invalid
    │   ├── ArgvSecret                  argv_secret
    │   ├── InvalidEntry                invalid_entry
    │   └── DeprecatedEntry             deprecated
    ├── ProbeError
    │   ├── CommandNotFound             command_not_found
    │   ├── RuntimeMissing              runtime_missing
    │   ├── ServerExited                exited
    │   ├── ProbeTimeout                timeout
    │   ├── ProtocolError               protocol_error
    │   ├── ServerRejected              rejected
    │   ├── CredentialRejected          credential_rejected
    │   ├── Unreachable                 unreachable
    │   ├── PortInUse                   port_in_use
    │   ├── OAuthRequired               oauth_required
    │   ├── DownloadTimeout             download_timeout
    │   ├── DownloadFailed              download_failed
    │   └── SandboxUnavailable          sandbox_unavailable
    ├── RegistryUnavailable             registry_unavailable
    │   └── RegistryAuthError           registry_auth
    ├── StoreError                      store_error
    │   └── DataDirUnusable             data_dir_unusable
    ├── ConsentError
    │   ├── ConsentRequired             consent_required
    │   ├── ConsentDenied               consent_denied
    │   ├── ConsentNotFound             consent_not_found
    │   └── ToolsChanged                tools_changed
    ├── OAuthError                      oauth_error
    │   ├── OAuthRefused                oauth_refused
    │   ├── OAuthDenied                 oauth_denied
    │   └── NeedsSignIn                 needs_sign_in
    ├── GuardError
    │   ├── ArgumentsRefused            arguments_refused
    │   └── SessionLocked               session_locked
    ├── ToolLeftOut                     tool_left_out
    ├── NotAdmitted                     not_admitted
    ├── ConfigInvalid                   config_invalid
    ├── LockFileInvalid                 lock_file_invalid
    ├── LockMismatch                    lock_mismatch
    └── UpdateRefused                   update_refused

Two planes (as in the MCP python-sdk): a ``SetupError`` is something the agent can act on and travels
back as a *tool result* ``{"ok": false, "error": {"code", "message"}}``; a malformed call (unknown
tool, arguments of the wrong shape) is a *protocol error*. :func:`jsonrpc_error` is the one place
that maps either onto a JSON-RPC error object.

Library exceptions are translated into this tree at the boundary, through one table
(:mod:`setup_agent.translation`, as httpx maps httpcore's in its transport).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyInstalled",
    "ArgumentsRefused",
    "ArgvSecret",
    "BundleInvalid",
    "ConfigInvalid",
    "CommandNotFound",
    "CredentialRejected",
    "DataDirUnusable",
    "ConsentDenied",
    "ConsentError",
    "ConsentNotFound",
    "ConsentRequired",
    "DeprecatedEntry",
    "DownloadFailed",
    "DownloadTimeout",
    "GuardError",
    "InvalidEntry",
    "InvalidInput",
    "LockFileInvalid",
    "LockMismatch",
    "JSONRPC_INTERNAL_ERROR",
    "JSONRPC_INVALID_PARAMS",
    "JSONRPC_METHOD_NOT_FOUND",
    "JSONRPC_SETUP_ERROR",
    "NeedsSignIn",
    "NoRunnablePackage",
    "NotAdmitted",
    "NotFound",
    "OAuthDenied",
    "OAuthError",
    "OAuthRefused",
    "OAuthRequired",
    "PackageError",
    "PackageNotFound",
    "PortInUse",
    "ProbeError",
    "ProbeTimeout",
    "PromptAlreadyAnswered",
    "PromptCancelled",
    "PromptError",
    "PromptFailed",
    "PromptNotFound",
    "ProtocolError",
    "RegistryAuthError",
    "RegistryUnavailable",
    "RuntimeMissing",
    "SandboxUnavailable",
    "SecretError",
    "SecretExpired",
    "SecretInUse",
    "SecretMissing",
    "SecretNotAllowed",
    "SecretPending",
    "SecretWrongKey",
    "ServerExited",
    "ServerRejected",
    "SessionLocked",
    "SetupError",
    "StoreError",
    "ToolLeftOut",
    "ToolsChanged",
    "Unreachable",
    "UpdateRefused",
    "jsonrpc_error",
    "RequestStateInvalid",
]


class SetupError(Exception):
    """Base of every error the core reports. ``code`` is stable; ``message`` is for people."""

    code = "internal"

    def __init__(self, message: str, *, key: str | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message, self.key, self.details = message, key, dict(details or {})
        #: Where ``message`` holds mcp-setup's own words added after the error was made
        #: (:meth:`add_words`), as (start, end) spans, and the ``details`` keys that are ours.
        #: The rest of an error may quote a server, a registry or a library, so an echo of the
        #: agent's text is scrubbed there (``setup_agent/setup/tool_args.py``), never in these.
        self.own_spans: tuple[tuple[int, int], ...] = ()
        self.own_details = frozenset[str]()

    def add_words(self, text: str, *, own: bool, first: bool = False, **details: Any) -> None:
        """Add ``text`` to the message, at its end (or ``first``): mcp-setup's own words (``own``,
        with its ``details`` keys) or words that quote something from outside (a server's output)."""
        if first:
            self.own_spans = tuple((a + len(text), b + len(text)) for a, b in self.own_spans)
            self.message, span = text + self.message, (0, len(text))
        else:
            self.message, span = self.message + text, (len(self.message), len(self.message) + len(text))
        self.args = (self.message,)
        self.details.update(details)
        if own:
            self.own_spans += (span,)
            self.own_details |= frozenset(details)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.key is not None:
            out["key"] = self.key
        if self.details:
            out["details"] = self.details
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidInput(SetupError):
    code = "invalid_input"


class RequestStateInvalid(InvalidInput):
    """A retry's ``requestState`` is not one the gateway gave for that request (a protocol
    error: the client changed it, or it belongs to another request or process)."""

    code = "request_state_invalid"


class NotFound(SetupError):
    code = "not_found"


class AlreadyInstalled(SetupError):
    code = "already_installed"


class SecretError(SetupError):
    code = "secret_error"


class SecretMissing(SecretError):
    code = "secret_missing"


class SecretExpired(SecretError):
    code = "secret_expired"


class SecretPending(SecretError):
    code = "secret_pending"


class SecretWrongKey(SecretError):
    code = "secret_wrong_key"


class SecretNotAllowed(SecretError):
    code = "secret_not_allowed"


class SecretInUse(SecretError):
    """The ref is reserved by an install still running; a ref serves one install."""

    code = "secret_in_use"


class PromptError(SetupError):
    code = "prompt_error"


class PromptNotFound(PromptError):
    code = "prompt_not_found"


class PromptAlreadyAnswered(PromptError):
    code = "prompt_answered"


class PromptCancelled(PromptError):
    code = "prompt_cancelled"


class PromptFailed(PromptError):
    """The face could not show the prompt (e.g. the client's URL elicitation failed)."""

    code = "prompt_failed"


class PackageError(SetupError):
    code = "package_error"


class NoRunnablePackage(PackageError):
    code = "no_runnable_package"


class PackageNotFound(PackageError):
    code = "package_not_found"


class BundleInvalid(PackageError):
    code = "bundle_invalid"


class ArgvSecret(PackageError):
    """The launch would put a secret on the command line (visible in ``ps``) and it cannot be
    moved out: refused unless the user consented to exactly that (``details["keys"]``)."""

    code = "argv_secret"


class InvalidEntry(PackageError):
    """The registry entry itself cannot be run as written (e.g. a local package serving on a
    remote host, runtime arguments its runner cannot take)."""

    code = "invalid_entry"


class DeprecatedEntry(PackageError):
    """The registry marks the entry deprecated or deleted; install needs ``allow_deprecated``."""

    code = "deprecated"


class ProbeError(SetupError):
    code = "probe_error"


class CommandNotFound(ProbeError):
    code = "command_not_found"


class RuntimeMissing(ProbeError):
    code = "runtime_missing"


class ServerExited(ProbeError):
    code = "exited"


class ProbeTimeout(ProbeError):
    code = "timeout"


class ProtocolError(ProbeError):
    code = "protocol_error"


class ServerRejected(ProbeError):
    code = "rejected"


class CredentialRejected(ProbeError):
    """The server started and listed its tools, then refused the key when the test called one of
    its read-only, argument-free tools (a server that checks its key only when used)."""

    code = "credential_rejected"


class Unreachable(ProbeError):
    code = "unreachable"


class PortInUse(ProbeError):
    """A local package's port is held by another program: it is not started, or it is
    stopped before anything is sent (the other program would get the headers and values)."""

    code = "port_in_use"


class OAuthRequired(ProbeError):
    """The remote answered 401 with an OAuth challenge: sign in with ``mcp_setup_authorize``."""

    code = "oauth_required"


class DownloadTimeout(ProbeError):
    """The package download (npx/uvx/docker's first run) passed MCP_SETUP_DOWNLOAD_TIMEOUT_SECONDS."""

    code = "download_timeout"


class DownloadFailed(ProbeError):
    """The runner said the package could not be downloaded (no network, nothing answering, a
    certificate not trusted, no such package or version): ``details`` holds ``cause`` (in words),
    ``package``, ``registry`` and ``runner_code`` (the runner's own, e.g. ``ECONNREFUSED``)."""

    code = "download_failed"


class SandboxUnavailable(ProbeError):
    """MCP_SETUP_SANDBOX names a mechanism (bwrap, landlock) that does not work on this system:
    no server starts unisolated behind the user's back."""

    code = "sandbox_unavailable"


class RegistryUnavailable(SetupError):
    code = "registry_unavailable"


class RegistryAuthError(RegistryUnavailable):
    code = "registry_auth"


class StoreError(SetupError):
    code = "store_error"


class DataDirUnusable(StoreError):
    """The data folder (MCP_SETUP_HOME) or a file in it cannot be used: a damaged database, a
    read-only disk, no permission, a folder that cannot be created, a key file that cannot be
    read. The message is one sentence naming the path, the cause and the fix; ``details`` holds
    ``path``, ``problem`` (the cause's word), ``fix`` and ``check`` (doctor's line it belongs to)."""

    code = "data_dir_unusable"


class ConsentError(SetupError):
    code = "consent_error"


class ConsentRequired(ConsentError):
    """The user has not yet approved, out of band, what will run; ``details.prompt_id`` names the request."""

    code = "consent_required"


class ConsentDenied(ConsentError):
    code = "consent_denied"


class ConsentNotFound(ConsentError):
    code = "consent_not_found"


class ToolsChanged(ConsentError):
    """A tool-list approval or rejection for a list the server no longer offers (pins.py)."""

    code = "tools_changed"


class OAuthError(SetupError):
    code = "oauth_error"


class OAuthRefused(OAuthError):
    """mcp-setup stopped a sign-in: metadata naming another host, a wrong ``state``, …"""

    code = "oauth_refused"


class OAuthDenied(OAuthError):
    """The user or the authorization server declined the sign-in."""

    code = "oauth_denied"


class NeedsSignIn(OAuthError):
    """The stored sign-in no longer works (refresh refused): the user must sign in again."""

    code = "needs_sign_in"


class GuardError(SetupError):
    """The guessing guard (:mod:`setup_agent.secrets.guard`) refused a call."""

    code = "guard_error"


class ArgumentsRefused(GuardError):
    code = "arguments_refused"


class SessionLocked(GuardError):
    code = "session_locked"


class ToolLeftOut(SetupError):
    code = "tool_left_out"  # a call of a tool the user unticked at install


class NotAdmitted(SetupError):
    """Opt-in admission (``admission = "eligible-providers"`` in config.toml): no enabled,
    trusted capability provider covers this server, so it is not tested or installed
    (see setup_agent/setup/providers.py)."""

    code = "not_admitted"


class ConfigInvalid(SetupError):
    """config.toml cannot be used as written; the message names the file and the field."""

    code = "config_invalid"


class LockFileInvalid(SetupError):
    """A lock file (``mcp-setup apply FILE``) that cannot be used: not JSON, a newer version than
    this mcp-setup reads, a field of the wrong shape, an unknown registry. The message says which."""

    code = "lock_file_invalid"


class LockMismatch(SetupError):
    """What the registry or the server offers now differs from the lock file (an artifact's
    digest, the launch, the tool list); the message says what was expected and what was found."""

    code = "lock_mismatch"


class UpdateRefused(SetupError):
    """This server cannot be updated in place (it signed in with OAuth: its grant is bound to the old install)."""

    code = "update_refused"


# --- JSON-RPC mapping: the one place ------------------------------------------------

JSONRPC_INVALID_PARAMS = -32602
JSONRPC_METHOD_NOT_FOUND = -32601
JSONRPC_INTERNAL_ERROR = -32603
#: Application error: a SetupError sent as a JSON-RPC error (the ``/rpc`` face). ``data.code``
#: carries the stable code.
JSONRPC_SETUP_ERROR = -32000


def jsonrpc_error(exc: BaseException) -> dict[str, Any]:
    """``{code, message, data}``: a :class:`SetupError` keeps its stable code in ``data.code``;
    anything else is an internal error whose message says nothing about its insides."""
    if isinstance(exc, InvalidInput):
        return {"code": JSONRPC_INVALID_PARAMS, "message": exc.message, "data": exc.to_dict()}
    if isinstance(exc, SetupError):
        return {"code": JSONRPC_SETUP_ERROR, "message": exc.message, "data": exc.to_dict()}
    return {
        "code": JSONRPC_INTERNAL_ERROR,
        "message": "Internal error in mcp-setup; the log has details.",
        "data": {"code": "internal"},
    }
